// PNG through libpng, converted as Pillow's convert("RGB"): palette -> its RGB entries
// (transparency ignored), grey -> three equal channels, alpha dropped, 16-bit -> high byte.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "vision/image_codecs.hpp"

namespace dsv41::vision::codecs {

namespace {

struct PngSource {
  const unsigned char* data;
  size_t size, at;
  char* error;
  jmp_buf jump;
};

void png_error_fn(png_structp png, png_const_charp msg) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(src->error, 200, "%s", msg);
  std::longjmp(src->jump, 1);
}

void png_warning_fn(png_structp, png_const_charp) {}

void png_read_fn(png_structp png, png_bytep out, size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (src->size - src->at < n) png_error(png, "truncated data");
  std::memcpy(out, src->data + src->at, n);
  src->at += n;
}

}  // namespace

void decode_png(const unsigned char* data, size_t size, long long max_pixels, DecodedPixels* out) {
  PngSource src{data, size, 0, out->error, {}};
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_error_fn, png_warning_fn);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  // Assigned after setjmp and freed after the jump: volatile, or its value would be indeterminate.
  png_bytep* volatile rows = nullptr;
  if (!png || !info) {
    std::snprintf(out->error, 200, "out of memory starting the PNG decoder");
    png_destroy_read_struct(&png, nullptr, nullptr);
    return;
  }
  if (setjmp(src.jump)) {
    std::free(rows);
    std::free(out->rgb);
    out->rgb = nullptr;
    png_destroy_read_struct(&png, &info, nullptr);
    return;
  }
  png_set_read_fn(png, &src, png_read_fn);
  png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
  png_read_info(png, info);
  const png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  if (static_cast<long long>(w) * h > max_pixels) {
    std::snprintf(out->error, 200, "%ux%u = %lld pixels exceeds the limit of %lld", w, h,
                  static_cast<long long>(w) * h, max_pixels);
    std::longjmp(src.jump, 1);
  }
  const int color = png_get_color_type(png, info);
  // Pillow's convert("RGB"): palette -> its RGB entries (transparency ignored), grey -> three
  // equal channels, alpha dropped, 16-bit -> high byte; but 16-bit grey alone opens as mode "I"
  // ("I;16" in newer Pillow) whose conversion saturates: min(v, 255) (checked against Pillow
  // 9.4 by golden:vision_pillow_oracle; Convert.c I16_RGB does the same).
  const bool grey16 = color == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) == 16;
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8)
    png_set_expand_gray_1_2_4_to_8(png);
  if (!grey16) png_set_strip_16(png);
  png_set_strip_alpha(png);
  if (!grey16 && (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA))
    png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const size_t row_bytes = static_cast<size_t>(w) * (grey16 ? 2 : 3);
  if (png_get_rowbytes(png, info) != row_bytes) {
    std::snprintf(out->error, 200, "PNG rows of %zu bytes after conversion (expected %zu)",
                  static_cast<size_t>(png_get_rowbytes(png, info)), row_bytes);
    std::longjmp(src.jump, 1);
  }
  out->rgb = static_cast<unsigned char*>(std::malloc(static_cast<size_t>(w) * h * 3));
  rows = static_cast<png_bytep*>(std::malloc(sizeof(png_bytep) * h));
  if (!out->rgb || !rows) {
    std::snprintf(out->error, 200, "out of memory for %ux%u pixels", w, h);
    std::longjmp(src.jump, 1);
  }
  png_bytep* const row_ptrs = rows;
  for (png_uint_32 y = 0; y < h; ++y) row_ptrs[y] = out->rgb + static_cast<size_t>(y) * row_bytes;
  png_read_image(png, row_ptrs);
  png_read_end(png, nullptr);
  if (grey16) {  // big-endian samples packed at the front: widen in place, last pixel first
    for (size_t i = static_cast<size_t>(w) * h; i-- > 0;) {
      const unsigned v = (unsigned{out->rgb[2 * i]} << 8) | out->rgb[2 * i + 1];
      const auto c = static_cast<unsigned char>(v > 255 ? 255 : v);
      out->rgb[3 * i] = out->rgb[3 * i + 1] = out->rgb[3 * i + 2] = c;
    }
  }
  std::free(rows);
  png_destroy_read_struct(&png, &info, nullptr);
  out->width = static_cast<int>(w);
  out->height = static_cast<int>(h);
}

}  // namespace dsv41::vision::codecs
