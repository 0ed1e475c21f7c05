// ImagePatches: one image made ready for the ViT (spec model-architecture.md §7.2): sized
// (image_layout), letterboxed onto grey 127 (or stretched in the max_wh_ratio case), normalised to
// (x/255 - 0.5)/0.5 rounded to bf16 as the reference feeds its bf16 tower, and cut into row-major
// patch × patch tiles, each flattened channel-major (c, y, x).
#pragma once

#include <vector>

#include "config/model_config.hpp"
#include "dsv41/status.hpp"
#include "vision/image_layout.hpp"
#include "vision/rgb_image.hpp"

namespace dsv41::vision {

struct ImagePatches {
  ImageLayout layout;
  std::vector<float> values;  // [vit_h·vit_w, 3·patch·patch], bf16-exact
};

// kInvalidArgument naming the problem for an empty or inconsistent image (rgb size != w·h·3), a
// side outside [1, kMaxImageSide], or an aspect ratio too extreme to letterbox.
Result<ImagePatches> make_patches(const RgbImage& image, const VisionConfig& v);

}  // namespace dsv41::vision
