// The per-format decoders behind decode_image (image_decoder.cpp picks one by the magic bytes).
// Each is a C-style function: libpng and libjpeg report errors by longjmp, so a decode keeps only
// plain data across its setjmp (C++ objects would not be destroyed by the jump) and hands back a
// malloc'd buffer or an error text. Every one converts as Pillow's `Image.open(...).convert("RGB")`
// does (image_decoder.hpp) and checks the pixel count before allocating pixels.
#pragma once

#include <cstddef>

namespace dsv41::vision::codecs {

struct DecodedPixels {
  unsigned char* rgb = nullptr;  // malloc'd [height, width, 3]; null on failure
  int width = 0, height = 0;
  char error[200] = {0};
  bool unsupported = false;  // a valid file in a form this build does not convert
};

void decode_png(const unsigned char* data, size_t size, long long max_pixels, DecodedPixels* out);
void decode_jpeg(const unsigned char* data, size_t size, long long max_pixels, DecodedPixels* out);
// First frame (gif_decoder.cpp; gif_decoder_absent.cpp without giflib).
void decode_gif(const unsigned char* data, size_t size, long long max_pixels, DecodedPixels* out);
// First frame (webp_decoder.cpp; webp_decoder_absent.cpp without libwebp).
void decode_webp(const unsigned char* data, size_t size, long long max_pixels, DecodedPixels* out);

}  // namespace dsv41::vision::codecs
