// An 8-bit RGB PNG file in memory (libpng), for tests that feed images to decoders and
// endpoints. Link PNG::PNG.
#pragma once

#include <png.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace dsv41::test {

// rgb [h, w, 3]; throws std::runtime_error when libpng fails.
inline std::string write_rgb_png(int w, int h, const std::vector<uint8_t>& rgb) {
  std::string out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    throw std::runtime_error("write_rgb_png: libpng failed");
  }
  png_set_write_fn(
      png, &out,
      [](png_structp p, png_bytep data, size_t n) {
        static_cast<std::string*>(png_get_io_ptr(p))->append(reinterpret_cast<char*>(data), n);
      },
      nullptr);
  png_set_IHDR(png, info, w, h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < h; ++y)
    png_write_row(png, const_cast<png_bytep>(rgb.data() + size_t{3} * w * y));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

// Seeded random pixels [h, w, 3].
inline std::vector<uint8_t> random_rgb(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(size_t{3} * w * h);
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng() & 0xFF);
  return b;
}

}  // namespace dsv41::test
