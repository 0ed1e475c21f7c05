// JPEG through libjpeg with its defaults (islow DCT, fancy upsampling), as Pillow decodes it;
// CMYK / YCCK refused (Pillow would invert and convert them; not done here).
#include <csetjmp>
#include <cstdio>
#include <cstdlib>

// jpeglib.h uses size_t and FILE without including their headers: after <cstdio>.
#include <jpeglib.h>

#include "vision/image_codecs.hpp"

namespace dsv41::vision::codecs {

namespace {

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

}  // namespace

void decode_jpeg(const unsigned char* data, size_t size, long long max_pixels, DecodedPixels* out) {
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

}  // namespace dsv41::vision::codecs
