// Image resizing as the reference preprocessing does it (spec model-architecture.md §7.2 step 5):
// Pillow's `Image.resize(size, BICUBIC)` on an 8-bit RGB image, and `ImageOps.pad` (fit inside
// the target keeping the aspect ratio, centre, fill the rest). Reproduced to the bit: the
// separable two-pass convolution with the a = -0.5 cubic kernel widened by the downscale factor
// (antialiasing), per-output-pixel weights normalised in double and then rounded to 22-bit fixed
// point, horizontal pass first, each pass rounding to 8 bits.
#pragma once

#include <array>
#include <cstdint>

#include "dsv41/status.hpp"
#include "vision/rgb_image.hpp"

namespace dsv41::vision {

// src resized to out_w × out_h (both >= 1); a copy when the size is unchanged.
RgbImage resize_bicubic(const RgbImage& src, int out_w, int out_h);

// ImageOps.pad(src, (out_w, out_h), BICUBIC, color=fill, centering=(0.5, 0.5)): src resized to
// the largest size with its aspect ratio (sides rounded half-to-even) that fits, pasted centred
// (offset rounded half-to-even) on a canvas of `fill`. kInvalidArgument when the fitted image
// would have a side of 0 pixels (Pillow raises there too: an aspect ratio beyond ~2·out_w:1).
Result<RgbImage> letterbox(const RgbImage& src, int out_w, int out_h, std::array<uint8_t, 3> fill);

}  // namespace dsv41::vision
