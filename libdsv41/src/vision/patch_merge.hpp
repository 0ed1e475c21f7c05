// The aligner's spatial merge (spec model-architecture.md §7.4 step 1): the ViT output as a
// [vit_h, vit_w, C] grid, zero-padded right and bottom to multiples of r, cut into r × r cells in
// row-major cell order; each cell flattened (channel, dy, dx) with the channel slowest, as
// PyTorch's F.unfold orders it.
#pragma once

#include <cstdint>
#include <vector>

namespace dsv41::vision {

// x [vit_h·vit_w, C] -> [ceil(vit_h/r)·ceil(vit_w/r), C·r·r].
std::vector<float> merge_patches(const float* x, int vit_h, int vit_w, int64_t C, int r);

}  // namespace dsv41::vision
