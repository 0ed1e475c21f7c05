// decode_image on GIF and WebP files written here with giflib / libwebp: the first frame on its
// canvas with Pillow's rules (gif_decoder.cpp, webp_decoder.cpp): global and local colour
// tables, a frame smaller than or past the logical screen, the transparent index filling the
// rest, interlacing, grey-ramp tables, animations read as their first frame, alpha dropped with
// the colour under it kept, lossy WebP equal to libwebp's still decoder; and the rejections
// (truncated, no image, corrupt, too many pixels).
#include <gif_lib.h>
#include <webp/decode.h>
#include <webp/encode.h>
#include <webp/mux.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "vision/image_decoder.hpp"

namespace dsv41::vision {
namespace {

using Bytes = std::vector<uint8_t>;
using Rgb = std::array<uint8_t, 3>;

// ---- GIF writer (giflib) ----

int gif_append(GifFileType* gif, const GifByteType* data, int n) {
  auto* out = static_cast<Bytes*>(gif->UserData);
  out->insert(out->end(), data, data + n);
  return n;
}

struct GifFrame {
  int left = 0, top = 0, width = 0, height = 0;
  std::vector<Rgb> local;  // empty: none
  int transparent = -1;
  bool interlace = false;
  std::vector<uint8_t> indices;  // [height, width], in display order
};

ColorMapObject* color_map(const std::vector<Rgb>& colors) {
  std::vector<GifColorType> c;
  for (const Rgb& x : colors) c.push_back({x[0], x[1], x[2]});
  return GifMakeMapObject(static_cast<int>(c.size()), c.data());
}

Bytes write_gif(int sw, int sh, const std::vector<Rgb>& global,
                const std::vector<GifFrame>& frames) {
  Bytes out;
  int err = 0;
  GifFileType* gif = EGifOpen(&out, gif_append, &err);
  REQUIRE(gif != nullptr);
  EGifSetGifVersion(gif, true);
  ColorMapObject* g = global.empty() ? nullptr : color_map(global);
  REQUIRE(EGifPutScreenDesc(gif, sw, sh, 8, 0, g) == GIF_OK);
  for (const GifFrame& f : frames) {
    if (f.transparent >= 0) {
      const GifByteType gce[4] = {1, 0, 0, static_cast<GifByteType>(f.transparent)};
      REQUIRE(EGifPutExtension(gif, GRAPHICS_EXT_FUNC_CODE, 4, gce) == GIF_OK);
    }
    ColorMapObject* l = f.local.empty() ? nullptr : color_map(f.local);
    REQUIRE(EGifPutImageDesc(gif, f.left, f.top, f.width, f.height, f.interlace, l) == GIF_OK);
    // Interlaced files carry rows in pass order: 0, 8, ..; 4, 12, ..; 2, 6, ..; 1, 3, ..
    std::vector<int> order;
    if (f.interlace) {
      const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
      for (int p = 0; p < 4; ++p)
        for (int y = start[p]; y < f.height; y += step[p]) order.push_back(y);
    } else {
      for (int y = 0; y < f.height; ++y) order.push_back(y);
    }
    for (int y : order) {
      std::vector<GifPixelType> row(f.indices.begin() + y * f.width,
                                    f.indices.begin() + (y + 1) * f.width);
      REQUIRE(EGifPutLine(gif, row.data(), f.width) == GIF_OK);
    }
    GifFreeMapObject(l);
  }
  REQUIRE(EGifCloseFile(gif, &err) == GIF_OK);
  GifFreeMapObject(g);
  return out;
}

RgbImage decode_ok(const Bytes& b, int64_t max_pixels = 1 << 24) {
  Result<RgbImage> r = decode_image(b, max_pixels);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

Rgb at(const RgbImage& im, int x, int y) {
  const uint8_t* p = im.rgb.data() + 3 * (static_cast<size_t>(y) * im.width + x);
  return {p[0], p[1], p[2]};
}

const std::vector<Rgb> kPalette = {{10, 20, 30}, {200, 0, 0}, {0, 200, 0}, {0, 0, 200}};

TEST_CASE("gif: global and local tables, canvas fill, growth past the screen", "[unit][vision]") {
  GifFrame f{0, 0, 3, 2, {}, -1, false, {0, 1, 2, 3, 2, 1}};
  RgbImage im = decode_ok(write_gif(3, 2, kPalette, {f}));
  REQUIRE((im.width == 3 && im.height == 2));
  CHECK(at(im, 0, 0) == kPalette[0]);
  CHECK(at(im, 2, 0) == kPalette[2]);
  CHECK(at(im, 0, 1) == kPalette[3]);
  // A local table replaces the global one.
  f.local = {{1, 1, 1}, {2, 2, 3}, {4, 5, 6}, {7, 8, 9}};
  im = decode_ok(write_gif(3, 2, kPalette, {f}));
  CHECK(at(im, 1, 0) == Rgb{2, 2, 3});
  // A 2x1 frame at (1, 1) on a 4x3 screen: the rest is index 0 without transparency ...
  GifFrame small{1, 1, 2, 1, {}, -1, false, {3, 2}};
  im = decode_ok(write_gif(4, 3, kPalette, {small}));
  CHECK(at(im, 0, 0) == kPalette[0]);
  CHECK(at(im, 1, 1) == kPalette[3]);
  CHECK(at(im, 2, 1) == kPalette[2]);
  CHECK(at(im, 3, 2) == kPalette[0]);
  // ... and the transparent index with it; the frame's transparent pixels keep their colour.
  small.transparent = 2;
  im = decode_ok(write_gif(4, 3, kPalette, {small}));
  CHECK(at(im, 0, 0) == kPalette[2]);
  CHECK(at(im, 2, 1) == kPalette[2]);
  CHECK(at(im, 1, 1) == kPalette[3]);
  // A frame reaching past the 2x2 screen grows the canvas to 3x3.
  GifFrame past{1, 1, 2, 2, {}, -1, false, {1, 1, 1, 3}};
  im = decode_ok(write_gif(2, 2, kPalette, {past}));
  REQUIRE((im.width == 3 && im.height == 3));
  CHECK(at(im, 2, 2) == kPalette[3]);
  CHECK(at(im, 0, 2) == kPalette[0]);
}

TEST_CASE("gif: interlaced rows, grey tables, the first frame of an animation", "[unit][vision]") {
  // 1x11 interlaced: row y has index y % 4.
  GifFrame tall{0, 0, 1, 11, {}, -1, true, {}};
  for (int y = 0; y < 11; ++y) tall.indices.push_back(static_cast<uint8_t>(y % 4));
  RgbImage im = decode_ok(write_gif(1, 11, kPalette, {tall}));
  for (int y = 0; y < 11; ++y) {
    INFO("row " << y);
    CHECK(at(im, 0, y) == kPalette[y % 4]);
  }
  // A table that is the grey ramp (entry i = (i, i, i)) makes the image greyscale: same values.
  std::vector<Rgb> ramp;
  for (int i = 0; i < 4; ++i) ramp.push_back({uint8_t(i), uint8_t(i), uint8_t(i)});
  im = decode_ok(write_gif(2, 1, ramp, {GifFrame{0, 0, 2, 1, {}, -1, false, {3, 1}}}));
  CHECK(at(im, 0, 0) == Rgb{3, 3, 3});
  // Two frames: only the first is read.
  GifFrame a{0, 0, 2, 1, {}, -1, false, {1, 1}}, b{0, 0, 2, 1, {}, -1, false, {3, 3}};
  im = decode_ok(write_gif(2, 1, kPalette, {a, b}));
  CHECK(at(im, 0, 0) == kPalette[1]);
  CHECK(at(im, 1, 0) == kPalette[1]);
}

TEST_CASE("gif: truncated, imageless, corrupt and oversized files are refused", "[unit][vision]") {
  const Bytes good =
      write_gif(4, 4, kPalette, {GifFrame{0, 0, 4, 4, {}, -1, false, std::vector<uint8_t>(16, 2)}});
  auto expect = [](const Bytes& b, const std::string& needle, int64_t max_pixels = 1 << 24) {
    Result<RgbImage> r = decode_image(b, max_pixels);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::StartsWith("image: GIF: ") && Catch::Contains(needle));
  };
  expect(Bytes(good.begin(), good.begin() + 8), "header");
  expect(write_gif(4, 4, kPalette, {}), "no image");
  expect(Bytes(good.begin(), good.end() - 6), "first frame");
  expect(good, "4x4 = 16 pixels exceeds the limit of 15", 15);
}

// ---- WebP writers (libwebp) ----

Bytes webp_lossless_rgba(int w, int h, const std::vector<uint8_t>& rgba) {
  WebPConfig config;
  REQUIRE(WebPConfigInit(&config));
  config.lossless = 1;
  config.exact = 1;  // keep the colour under alpha 0, so the decoder's handling shows
  WebPPicture pic;
  REQUIRE(WebPPictureInit(&pic));
  pic.use_argb = 1;
  pic.width = w;
  pic.height = h;
  REQUIRE(WebPPictureImportRGBA(&pic, rgba.data(), w * 4));
  WebPMemoryWriter writer;
  WebPMemoryWriterInit(&writer);
  pic.writer = WebPMemoryWrite;
  pic.custom_ptr = &writer;
  REQUIRE(WebPEncode(&config, &pic));
  Bytes out(writer.mem, writer.mem + writer.size);
  WebPMemoryWriterClear(&writer);
  WebPPictureFree(&pic);
  return out;
}

Bytes webp_animation(int w, int h, const std::vector<std::vector<uint8_t>>& frames) {
  WebPAnimEncoderOptions opts;
  REQUIRE(WebPAnimEncoderOptionsInit(&opts));
  WebPAnimEncoder* enc = WebPAnimEncoderNew(w, h, &opts);
  REQUIRE(enc != nullptr);
  WebPConfig config;
  REQUIRE(WebPConfigInit(&config));
  config.lossless = 1;
  int t = 0;
  for (const auto& rgba : frames) {
    WebPPicture pic;
    REQUIRE(WebPPictureInit(&pic));
    pic.use_argb = 1;
    pic.width = w;
    pic.height = h;
    REQUIRE(WebPPictureImportRGBA(&pic, rgba.data(), w * 4));
    REQUIRE(WebPAnimEncoderAdd(enc, &pic, t, &config));
    WebPPictureFree(&pic);
    t += 100;
  }
  REQUIRE(WebPAnimEncoderAdd(enc, nullptr, t, nullptr));
  WebPData data;
  WebPDataInit(&data);
  REQUIRE(WebPAnimEncoderAssemble(enc, &data));
  Bytes out(data.bytes, data.bytes + data.size);
  WebPDataClear(&data);
  WebPAnimEncoderDelete(enc);
  return out;
}

std::vector<uint8_t> pattern_rgba(int w, int h, int seed, bool alpha) {
  std::vector<uint8_t> px(static_cast<size_t>(w) * h * 4);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 37 + seed * 101) & 0xFF);
  for (size_t i = 3; i < px.size(); i += 4) px[i] = alpha ? static_cast<uint8_t>(i % 3 * 127) : 255;
  return px;
}

void check_rgb_of(const RgbImage& im, const std::vector<uint8_t>& rgba) {
  for (size_t i = 0; i < rgba.size() / 4; ++i) {
    INFO("pixel " << i);
    REQUIRE(im.rgb[3 * i + 0] == rgba[4 * i + 0]);
    REQUIRE(im.rgb[3 * i + 1] == rgba[4 * i + 1]);
    REQUIRE(im.rgb[3 * i + 2] == rgba[4 * i + 2]);
  }
}

TEST_CASE("webp: lossless exact, alpha dropped with its colour kept, animations' first frame",
          "[unit][vision]") {
  const auto opaque = pattern_rgba(5, 3, 1, false);
  RgbImage im = decode_ok(webp_lossless_rgba(5, 3, opaque));
  REQUIRE((im.width == 5 && im.height == 3));
  check_rgb_of(im, opaque);
  const auto translucent = pattern_rgba(7, 4, 2, true);  // alpha 0, 127, 254
  check_rgb_of(decode_ok(webp_lossless_rgba(7, 4, translucent)), translucent);
  const auto first = pattern_rgba(6, 5, 3, false), second = pattern_rgba(6, 5, 4, false);
  im = decode_ok(webp_animation(6, 5, {first, second}));
  REQUIRE((im.width == 6 && im.height == 5));
  check_rgb_of(im, first);
}

TEST_CASE("webp: lossy equals libwebp's still decoder", "[unit][vision]") {
  std::vector<uint8_t> rgb(33 * 17 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>((i * 7 + i / 99) & 0xFF);
  uint8_t* enc = nullptr;
  const size_t n = WebPEncodeRGB(rgb.data(), 33, 17, 33 * 3, 75.0f, &enc);
  REQUIRE(n > 0);
  const Bytes file(enc, enc + n);
  WebPFree(enc);
  int w = 0, h = 0;
  uint8_t* still = WebPDecodeRGB(file.data(), file.size(), &w, &h);
  REQUIRE(still != nullptr);
  const RgbImage im = decode_ok(file);
  REQUIRE((im.width == 33 && im.height == 17));
  CHECK(std::memcmp(im.rgb.data(), still, im.rgb.size()) == 0);
  WebPFree(still);
}

TEST_CASE("webp: truncated, corrupt and oversized files are refused", "[unit][vision]") {
  const Bytes good = webp_lossless_rgba(4, 4, pattern_rgba(4, 4, 5, false));
  auto expect = [](const Bytes& b, const std::string& needle, int64_t max_pixels = 1 << 24) {
    Result<RgbImage> r = decode_image(b, max_pixels);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::StartsWith("image: WebP: ") && Catch::Contains(needle));
  };
  expect(Bytes(good.begin(), good.begin() + 14), "container");
  Bytes corrupt = good;
  for (size_t i = 30; i < corrupt.size(); ++i) corrupt[i] = 0xFF;
  expect(corrupt, "corrupt");
  expect(good, "4x4 = 16 pixels exceeds the limit of 15", 15);
}

}  // namespace
}  // namespace dsv41::vision
