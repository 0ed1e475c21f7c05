// decode_image with libpng and libjpeg. Both libraries report errors by longjmp; each decode
// runs in a C-style function whose frame holds only plain data across its setjmp (C++ objects
// would not be destroyed by the jump) and returns a malloc'd buffer or an error text.
#include "vision/image_decoder.hpp"

#include <fmt/format.h>

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

// jpeglib.h uses size_t and FILE without including their headers: after <cstdio>.
#include <jpeglib.h>
#include <png.h>

namespace dsv41::vision {

namespace {

struct Decoded {
  unsigned char* rgb = nullptr;  // malloc'd [height, width, 3]
  int width = 0, height = 0;
  char error[200] = {0};
  bool unsupported = false;  // a valid file in a form this decoder does not convert
};

// ---- PNG -------------------------------------------------------------------------------

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

void decode_png(const unsigned char* data, size_t size, long long max_pixels, Decoded* out) {
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
  // equal channels, alpha dropped, 16-bit -> high byte.
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8)
    png_set_expand_gray_1_2_4_to_8(png);
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != static_cast<size_t>(w) * 3) {
    std::snprintf(out->error, 200, "PNG rows of %zu bytes after conversion (expected %zu)",
                  static_cast<size_t>(png_get_rowbytes(png, info)), static_cast<size_t>(w) * 3);
    std::longjmp(src.jump, 1);
  }
  out->rgb = static_cast<unsigned char*>(std::malloc(static_cast<size_t>(w) * h * 3));
  rows = static_cast<png_bytep*>(std::malloc(sizeof(png_bytep) * h));
  if (!out->rgb || !rows) {
    std::snprintf(out->error, 200, "out of memory for %ux%u pixels", w, h);
    std::longjmp(src.jump, 1);
  }
  png_bytep* const row_ptrs = rows;
  for (png_uint_32 y = 0; y < h; ++y) row_ptrs[y] = out->rgb + static_cast<size_t>(y) * w * 3;
  png_read_image(png, row_ptrs);
  png_read_end(png, nullptr);
  std::free(rows);
  png_destroy_read_struct(&png, &info, nullptr);
  out->width = static_cast<int>(w);
  out->height = static_cast<int>(h);
}

// ---- JPEG ------------------------------------------------------------------------------

struct JpegError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char* error;
};

void jpeg_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  char msg[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, msg);
  std::snprintf(err->error, 200, "%s", msg);
  std::longjmp(err->jump, 1);
}

void jpeg_quiet(j_common_ptr, int) {}

void decode_jpeg(const unsigned char* data, size_t size, long long max_pixels, Decoded* out) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  err.error = out->error;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  err.mgr.emit_message = jpeg_quiet;
  if (setjmp(err.jump)) {
    std::free(out->rgb);
    out->rgb = nullptr;
    jpeg_destroy_decompress(&cinfo);
    return;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  const long long w = cinfo.image_width, h = cinfo.image_height;
  if (w * h > max_pixels) {
    std::snprintf(out->error, 200, "%lldx%lld = %lld pixels exceeds the limit of %lld", w, h, w * h,
                  max_pixels);
    std::longjmp(err.jump, 1);
  }
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    std::snprintf(out->error, 200, "CMYK JPEG images are not supported; send RGB or greyscale");
    out->unsupported = true;
    std::longjmp(err.jump, 1);
  }
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  out->rgb = static_cast<unsigned char*>(std::malloc(static_cast<size_t>(w * h * 3)));
  if (!out->rgb) {
    std::snprintf(out->error, 200, "out of memory for %lldx%lld pixels", w, h);
    std::longjmp(err.jump, 1);
  }
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out->rgb + static_cast<size_t>(cinfo.output_scanline) * w * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  out->width = static_cast<int>(w);
  out->height = static_cast<int>(h);
}

bool starts_with(std::span<const uint8_t> b, const char* magic, size_t n) {
  return b.size() >= n && std::memcmp(b.data(), magic, n) == 0;
}

}  // namespace

bool image_decoding_available() { return true; }

Result<RgbImage> decode_image(std::span<const uint8_t> bytes, int64_t max_pixels) {
  Decoded d;
  std::string format;
  if (starts_with(bytes, "\x89PNG\r\n\x1a\n", 8)) {
    format = "PNG";
    decode_png(bytes.data(), bytes.size(), max_pixels, &d);
  } else if (starts_with(bytes, "\xff\xd8\xff", 3)) {
    format = "JPEG";
    decode_jpeg(bytes.data(), bytes.size(), max_pixels, &d);
  } else if (starts_with(bytes, "GIF8", 4) ||
             (starts_with(bytes, "RIFF", 4) && bytes.size() >= 12 &&
              std::memcmp(bytes.data() + 8, "WEBP", 4) == 0)) {
    return Status(ErrorCode::kUnsupported,
                  fmt::format("image: {} images are not decoded by this build; send PNG or JPEG",
                              starts_with(bytes, "GIF8", 4) ? "GIF" : "WebP"));
  } else {
    return Status(ErrorCode::kInvalidArgument, "image: unknown format (expected PNG or JPEG)");
  }
  if (!d.rgb)
    return Status(d.unsupported ? ErrorCode::kUnsupported : ErrorCode::kInvalidArgument,
                  fmt::format("image: {}: {}", format, d.error[0] ? d.error : "decoding failed"));
  RgbImage out{d.width, d.height,
               std::vector<uint8_t>(d.rgb, d.rgb + size_t{3} * d.width * d.height)};
  std::free(d.rgb);
  return out;
}

}  // namespace dsv41::vision
