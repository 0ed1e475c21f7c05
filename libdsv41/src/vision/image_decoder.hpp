// decode_image: PNG, JPEG, GIF or WebP bytes to 8-bit RGB, as the reference's
// `PIL.Image.open(...).convert("RGB")` gives them (spec model-architecture.md §7.2 step 1):
// palettes expanded, grey replicated to three channels, alpha dropped (not composited), 16-bit
// samples cut to their high byte, JPEG through libjpeg's default (islow DCT, fancy upsampling) as
// Pillow uses it, GIF and WebP as their first frame on the canvas (gif_decoder.cpp,
// webp_decoder.cpp give Pillow's rules). EXIF orientation is not applied (the reference does not
// apply it either).
//
// Built from libpng + libjpeg (+ giflib, libwebp) when CMake finds them (target
// dsv41_image_codecs); otherwise the missing formats return kUnsupported saying so.
#pragma once

#include <cstdint>
#include <span>

#include "dsv41/status.hpp"
#include "vision/rgb_image.hpp"

namespace dsv41::vision {

// False in a build without libpng / libjpeg (GIF / WebP may be missing alone: see above).
bool image_decoding_available();

// kInvalidArgument naming the problem (unknown or truncated format, corrupt data, more than
// max_pixels pixels: checked from the header before any pixel buffer exists, so a small file
// cannot make a huge allocation), kUnsupported for CMYK JPEG and for a format whose library this
// build lacks.
Result<RgbImage> decode_image(std::span<const uint8_t> bytes, int64_t max_pixels);

}  // namespace dsv41::vision
