// decode_image on PNG and JPEG files written here with libpng / libjpeg: every PNG colour type
// and bit depth converted as Pillow's convert("RGB") does, interlacing, JPEG colour and grey,
// and every rejection (unknown, truncated, corrupt, too many pixels, CMYK); GIF and WebP in
// test_gif_webp_decoder.cpp.
#include <catch2/catch.hpp>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

// jpeglib.h uses size_t and FILE without including their headers: after <cstdio>.
#include <jpeglib.h>
#include <png.h>

#include "vision/image_decoder.hpp"

namespace dsv41::vision {
namespace {

// ---- writers ----

void png_append(png_structp png, png_bytep data, size_t n) {
  auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}

// A PNG of w x h with `rows` already in the file's sample layout.
std::vector<uint8_t> write_png(int w, int h, int color, int depth,
                               const std::vector<std::vector<uint8_t>>& rows,
                               const std::vector<png_color>& palette = {},
                               const std::vector<uint8_t>& trns = {}, bool interlace = false) {
  std::vector<uint8_t> out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  REQUIRE(setjmp(png_jmpbuf(png)) == 0);
  png_set_write_fn(png, &out, png_append, nullptr);
  png_set_IHDR(png, info, w, h, depth, color, interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (!palette.empty()) png_set_PLTE(png, info, palette.data(), static_cast<int>(palette.size()));
  if (!trns.empty()) png_set_tRNS(png, info, trns.data(), static_cast<int>(trns.size()), nullptr);
  png_write_info(png, info);
  std::vector<png_bytep> ptrs;
  for (const auto& r : rows) ptrs.push_back(const_cast<png_bytep>(r.data()));
  png_write_image(png, ptrs.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

std::vector<uint8_t> write_jpeg(int w, int h, int components, const std::vector<uint8_t>& px,
                                J_COLOR_SPACE space) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = w;
  c.image_height = h;
  c.input_components = components;
  c.in_color_space = space;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 100, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(&px[static_cast<size_t>(c.next_scanline) * w * components]);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<uint8_t> out(buf, buf + size);
  jpeg_destroy_compress(&c);
  std::free(buf);
  return out;
}

RgbImage decode_ok(const std::vector<uint8_t>& bytes) {
  Result<RgbImage> r = decode_image(bytes, 1 << 20);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

std::vector<uint8_t> pixel(const RgbImage& im, int x, int y) {
  return {im.pixel(x, y)[0], im.pixel(x, y)[1], im.pixel(x, y)[2]};
}

TEST_CASE("PNG: RGB, RGBA (alpha dropped), 16-bit (high byte), interlaced", "[unit]") {
  REQUIRE(image_decoding_available());
  const RgbImage rgb =
      decode_ok(write_png(2, 1, PNG_COLOR_TYPE_RGB, 8, {{1, 2, 3, 250, 251, 252}}));
  CHECK(rgb.width == 2);
  CHECK(rgb.height == 1);
  CHECK(rgb.rgb == std::vector<uint8_t>{1, 2, 3, 250, 251, 252});
  const RgbImage rgba = decode_ok(write_png(1, 1, PNG_COLOR_TYPE_RGB_ALPHA, 8, {{10, 20, 30, 0}}));
  CHECK(rgba.rgb == std::vector<uint8_t>{10, 20, 30});  // not composited onto anything
  const RgbImage deep =
      decode_ok(write_png(1, 1, PNG_COLOR_TYPE_RGB, 16, {{0x12, 0xFF, 0xAB, 0x01, 0x00, 0x80}}));
  CHECK(deep.rgb == std::vector<uint8_t>{0x12, 0xAB, 0x00});
  std::vector<std::vector<uint8_t>> rows;
  for (int y = 0; y < 9; ++y) {
    rows.emplace_back();
    for (int x = 0; x < 11; ++x) rows.back().insert(rows.back().end(), {uint8_t(x), uint8_t(y), 7});
  }
  const RgbImage inter = decode_ok(write_png(11, 9, PNG_COLOR_TYPE_RGB, 8, rows, {}, {}, true));
  for (int y = 0; y < 9; ++y)
    for (int x = 0; x < 11; ++x)
      REQUIRE(pixel(inter, x, y) == std::vector<uint8_t>{uint8_t(x), uint8_t(y), 7});
}

TEST_CASE("PNG: grey of every depth and palettes become RGB", "[unit]") {
  REQUIRE(image_decoding_available());
  // 1-bit grey: 0 -> 0, 1 -> 255.
  const RgbImage g1 = decode_ok(write_png(3, 1, PNG_COLOR_TYPE_GRAY, 1, {{0b10100000}}));
  CHECK(g1.rgb == std::vector<uint8_t>{255, 255, 255, 0, 0, 0, 255, 255, 255});
  // 4-bit grey: n -> 17·n.
  const RgbImage g4 = decode_ok(write_png(2, 1, PNG_COLOR_TYPE_GRAY, 4, {{0x3F}}));
  CHECK(g4.rgb == std::vector<uint8_t>{51, 51, 51, 255, 255, 255});
  const RgbImage ga = decode_ok(write_png(1, 1, PNG_COLOR_TYPE_GRAY_ALPHA, 8, {{77, 3}}));
  CHECK(ga.rgb == std::vector<uint8_t>{77, 77, 77});
  // 16-bit grey saturates (Pillow mode "I" / "I;16" -> RGB: min(v, 255); the Pillow oracle,
  // golden:vision_pillow_oracle, replaced the high byte this once expected).
  const RgbImage g16 =
      decode_ok(write_png(2, 1, PNG_COLOR_TYPE_GRAY, 16, {{0xC8, 0x01, 0x00, 0x42}}));
  CHECK(g16.rgb == std::vector<uint8_t>{255, 255, 255, 0x42, 0x42, 0x42});
  // Palette with a transparent entry: the entry's colour, transparency ignored.
  const std::vector<png_color> pal = {{9, 8, 7}, {200, 100, 50}};
  const RgbImage p = decode_ok(write_png(2, 1, PNG_COLOR_TYPE_PALETTE, 8, {{1, 0}}, pal, {0}));
  CHECK(p.rgb == std::vector<uint8_t>{200, 100, 50, 9, 8, 7});
  const RgbImage p2 = decode_ok(write_png(3, 1, PNG_COLOR_TYPE_PALETTE, 2, {{0b01000100}}, pal));
  CHECK(p2.rgb == std::vector<uint8_t>{200, 100, 50, 9, 8, 7, 200, 100, 50});
}

TEST_CASE("JPEG: colour and grey decode to RGB", "[unit]") {
  REQUIRE(image_decoding_available());
  std::vector<uint8_t> flat;
  for (int i = 0; i < 16 * 8; ++i) flat.insert(flat.end(), {200, 40, 90});
  const RgbImage c = decode_ok(write_jpeg(16, 8, 3, flat, JCS_RGB));
  REQUIRE(c.width == 16);
  REQUIRE(c.height == 8);
  for (int i = 0; i < 16 * 8; ++i) {
    INFO("pixel " << i);
    REQUIRE(std::abs(c.rgb[i * 3 + 0] - 200) <= 3);
    REQUIRE(std::abs(c.rgb[i * 3 + 1] - 40) <= 3);
    REQUIRE(std::abs(c.rgb[i * 3 + 2] - 90) <= 3);
  }
  std::vector<uint8_t> grey(8 * 8);
  for (size_t i = 0; i < grey.size(); ++i) grey[i] = static_cast<uint8_t>(i * 4);
  const RgbImage g = decode_ok(write_jpeg(8, 8, 1, grey, JCS_GRAYSCALE));
  for (int i = 0; i < 64; ++i) {
    REQUIRE(g.rgb[i * 3] == g.rgb[i * 3 + 1]);
    REQUIRE(g.rgb[i * 3] == g.rgb[i * 3 + 2]);
    REQUIRE(std::abs(g.rgb[i * 3] - grey[static_cast<size_t>(i)]) <= 3);
  }
}

TEST_CASE("decode_image rejects what it cannot decode, by name", "[unit]") {
  REQUIRE(image_decoding_available());
  auto expect = [](const std::vector<uint8_t>& b, ErrorCode code, const std::string& needle,
                   int64_t max_pixels = 1 << 20) {
    Result<RgbImage> r = decode_image(b, max_pixels);
    INFO(r.status().to_string());
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == code);
    CHECK_THAT(r.status().message(), Catch::Contains(needle));
  };
  expect({'B', 'M', 0, 0}, ErrorCode::kInvalidArgument, "unknown format");
  expect({}, ErrorCode::kInvalidArgument, "unknown format");
  const std::vector<uint8_t> png =
      write_png(4, 4, PNG_COLOR_TYPE_RGB, 8,
                std::vector<std::vector<uint8_t>>(4, std::vector<uint8_t>(12, 5)));
  expect(std::vector<uint8_t>(png.begin(), png.begin() + 40), ErrorCode::kInvalidArgument, "PNG");
  std::vector<uint8_t> corrupt = png;
  corrupt[corrupt.size() - 20] ^= 0xFF;  // inside IDAT: a CRC or zlib error
  expect(corrupt, ErrorCode::kInvalidArgument, "image: PNG");
  expect(png, ErrorCode::kInvalidArgument, "4x4 = 16 pixels exceeds the limit of 15", 15);
  std::vector<uint8_t> grey(8 * 8, 100);
  const std::vector<uint8_t> jpg = write_jpeg(8, 8, 1, grey, JCS_GRAYSCALE);
  expect(std::vector<uint8_t>(jpg.begin(), jpg.begin() + 30), ErrorCode::kInvalidArgument, "JPEG");
  expect(jpg, ErrorCode::kInvalidArgument, "8x8 = 64 pixels exceeds the limit of 63", 63);
  std::vector<uint8_t> cmyk_px(8 * 8 * 4, 50);
  expect(write_jpeg(8, 8, 4, cmyk_px, JCS_CMYK), ErrorCode::kUnsupported, "CMYK");
  // GIF and WebP go to their decoders (test_gif_webp_decoder.cpp): a bare signature is corrupt
  // (kInvalidArgument), or refused by a build without giflib / libwebp (kUnsupported).
  for (const std::vector<uint8_t>& sig :
       {std::vector<uint8_t>{'G', 'I', 'F', '8', '9', 'a'},
        std::vector<uint8_t>{'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P'}}) {
    Result<RgbImage> r = decode_image(sig, 1 << 20);
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(),
               Catch::StartsWith(sig[0] == 'G' ? "image: GIF: " : "image: WebP: "));
  }
  expect({'G', 'I', 'F', '8', '8', 'a'}, ErrorCode::kInvalidArgument, "unknown format");
}

}  // namespace
}  // namespace dsv41::vision
