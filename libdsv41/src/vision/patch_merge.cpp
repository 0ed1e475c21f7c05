#include "vision/patch_merge.hpp"

#include <cstddef>

namespace dsv41::vision {

std::vector<float> merge_patches(const float* x, int vit_h, int vit_w, int64_t C, int r) {
  const int rows = (vit_h + r - 1) / r, cols = (vit_w + r - 1) / r;
  const int64_t width = C * r * r;
  std::vector<float> out(static_cast<std::size_t>(rows) * cols * width, 0.0f);  // padding stays 0
  for (int bi = 0; bi < rows; ++bi)
    for (int bj = 0; bj < cols; ++bj) {
      float* dst = out.data() + (int64_t{bi} * cols + bj) * width;
      for (int dy = 0; dy < r; ++dy)
        for (int dx = 0; dx < r; ++dx) {
          const int y = bi * r + dy, xcol = bj * r + dx;
          if (y >= vit_h || xcol >= vit_w) continue;
          const float* src = x + (int64_t{y} * vit_w + xcol) * C;
          for (int64_t c = 0; c < C; ++c) dst[(c * r + dy) * r + dx] = src[c];
        }
    }
  return out;
}

}  // namespace dsv41::vision
