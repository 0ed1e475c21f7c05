// WebP through libwebp's animation decoder, as Pillow (WebPImagePlugin with WebPAnimDecoder)
// reads every WebP, still or animated: the first frame on the canvas, RGBA, not premultiplied,
// then convert("RGB") drops alpha. The canvas is cleared to transparent black first, so canvas
// pixels outside a smaller first frame read (0, 0, 0); pixels under alpha keep the colour the file
// stores. The canvas size is read from the container (WebPDemux) and checked against the pixel
// limit before the decoder allocates its canvas.
#include <webp/demux.h>

#include <cstdio>
#include <cstdlib>

#include "vision/image_codecs.hpp"

namespace dsv41::vision::codecs {

void decode_webp(const unsigned char* data, size_t size, long long max_pixels, DecodedPixels* out) {
  const WebPData bytes{data, size};
  WebPDemuxer* demux = WebPDemux(&bytes);
  if (demux == nullptr) {
    std::snprintf(out->error, sizeof(out->error), "invalid or truncated WebP container");
    return;
  }
  const long long w = WebPDemuxGetI(demux, WEBP_FF_CANVAS_WIDTH);
  const long long h = WebPDemuxGetI(demux, WEBP_FF_CANVAS_HEIGHT);
  WebPDemuxDelete(demux);
  if (w <= 0 || h <= 0) {
    std::snprintf(out->error, sizeof(out->error), "empty image (%lldx%lld)", w, h);
    return;
  }
  if (w * h > max_pixels) {
    std::snprintf(out->error, sizeof(out->error),
                  "%lldx%lld = %lld pixels exceeds the limit of %lld", w, h, w * h, max_pixels);
    return;
  }
  WebPAnimDecoderOptions options;
  if (!WebPAnimDecoderOptionsInit(&options)) {
    std::snprintf(out->error, sizeof(out->error), "libwebp version mismatch");
    return;
  }
  options.color_mode = MODE_RGBA;
  options.use_threads = 0;
  WebPAnimDecoder* dec = WebPAnimDecoderNew(&bytes, &options);
  if (dec == nullptr) {
    std::snprintf(out->error, sizeof(out->error), "the decoder rejected the file (corrupt data?)");
    return;
  }
  uint8_t* rgba = nullptr;
  int timestamp = 0;
  if (!WebPAnimDecoderGetNext(dec, &rgba, &timestamp) || rgba == nullptr) {
    std::snprintf(out->error, sizeof(out->error),
                  "decoding the first frame failed (corrupt data?)");
  } else if ((out->rgb = static_cast<unsigned char*>(std::malloc(w * h * 3))) == nullptr) {
    std::snprintf(out->error, sizeof(out->error), "out of memory for %lldx%lld pixels", w, h);
  } else {
    for (long long i = 0; i < w * h; ++i) {
      out->rgb[3 * i + 0] = rgba[4 * i + 0];
      out->rgb[3 * i + 1] = rgba[4 * i + 1];
      out->rgb[3 * i + 2] = rgba[4 * i + 2];
    }
    out->width = static_cast<int>(w);
    out->height = static_cast<int>(h);
  }
  WebPAnimDecoderDelete(dec);
}

}  // namespace dsv41::vision::codecs
