// RgbImage: a decoded image as 8-bit RGB, the input of the vision preprocessing (spec
// model-architecture.md §7.2 step 1: every image is converted to RGB first).
#pragma once

#include <cstdint>
#include <vector>

namespace dsv41::vision {

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // [height, width, 3], row-major

  const uint8_t* pixel(int x, int y) const { return rgb.data() + (int64_t{y} * width + x) * 3; }
  uint8_t* pixel(int x, int y) { return rgb.data() + (int64_t{y} * width + x) * 3; }
};

}  // namespace dsv41::vision
