// Pillow-exact bicubic resizing and ImageOps.pad letterboxing (spec §7.2 step 5). The worked
// example follows Pillow's Resample.c arithmetic by hand; the other cases are properties any
// correct implementation has.
#include <catch2/catch.hpp>
#include <random>

#include "vision/bicubic_resize.hpp"

namespace dsv41::vision {
namespace {

RgbImage gray_row(std::initializer_list<uint8_t> values) {
  RgbImage im{static_cast<int>(values.size()), 1, {}};
  for (uint8_t v : values) im.rgb.insert(im.rgb.end(), {v, v, v});
  return im;
}

RgbImage random_image(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  RgbImage im{w, h, std::vector<uint8_t>(size_t{3} * w * h)};
  for (uint8_t& b : im.rgb) b = static_cast<uint8_t>(rng() & 0xFF);
  return im;
}

TEST_CASE("bicubic 4 -> 2 downscale follows Pillow's fixed-point arithmetic", "[unit]") {
  // scale 2: support 2·2 = 4 input pixels each side, kernel arguments (x - center + 0.5) / 2.
  // Output 0 (center 1): taps at 0..3 with cubic(0.25), cubic(0.25), cubic(0.75), cubic(1.25) =
  // 0.8671875, 0.8671875, 0.2265625, -0.0703125, sum 1.890625, normalised and rounded to 22 bits
  // = 1923834, 1923834, 502623, -155987. (2^21 + 100·1923834 + 200·502623 - 255·155987) >> 22
  // = 255228467 >> 22 = 60. Output 1 mirrors the taps: 927703922 >> 22 = 221.
  const RgbImage out = resize_bicubic(gray_row({0, 100, 200, 255}), 2, 1);
  REQUIRE(out.width == 2);
  REQUIRE(out.height == 1);
  CHECK(std::vector<uint8_t>(out.rgb.begin(), out.rgb.end()) ==
        std::vector<uint8_t>{60, 60, 60, 221, 221, 221});
}

TEST_CASE("bicubic resize keeps a constant image constant at any size", "[unit]") {
  RgbImage im{13, 7, {}};
  for (int i = 0; i < 13 * 7; ++i) im.rgb.insert(im.rgb.end(), {17, 128, 250});
  for (auto [w, h] : {std::pair{5, 3}, {40, 9}, {13, 20}, {1, 1}, {100, 2}}) {
    const RgbImage out = resize_bicubic(im, w, h);
    REQUIRE(out.width == w);
    REQUIRE(out.height == h);
    for (int64_t i = 0; i < int64_t{w} * h; ++i) {
      INFO("size " << w << "x" << h << " pixel " << i);
      REQUIRE(out.rgb[i * 3 + 0] == 17);
      REQUIRE(out.rgb[i * 3 + 1] == 128);
      REQUIRE(out.rgb[i * 3 + 2] == 250);
    }
  }
}

TEST_CASE("bicubic resize to the same size is a copy and mirrors commute", "[unit]") {
  const RgbImage im = random_image(11, 6, 7);
  CHECK(resize_bicubic(im, 11, 6).rgb == im.rgb);
  // The kernel is symmetric, so resizing a mirrored image gives the mirrored result.
  RgbImage mirrored = im;
  for (int y = 0; y < im.height; ++y)
    for (int x = 0; x < im.width; ++x)
      std::copy_n(im.pixel(im.width - 1 - x, y), 3, mirrored.pixel(x, y));
  const RgbImage a = resize_bicubic(im, 7, 9), b = resize_bicubic(mirrored, 7, 9);
  for (int y = 0; y < a.height; ++y)
    for (int x = 0; x < a.width; ++x) {
      INFO("pixel " << x << "," << y);
      REQUIRE(std::equal(a.pixel(x, y), a.pixel(x, y) + 3, b.pixel(a.width - 1 - x, y)));
    }
}

TEST_CASE("letterbox centres with half-to-even offsets and fills the rest", "[unit]") {
  // 2x1 into 5x5: fitted 5 x round(1/2·5 = 2.5) = 5x2 (half to even), top offset
  // round((5 - 2)·0.5 = 1.5) = 2.
  Result<RgbImage> out = letterbox(gray_row({200, 200}), 5, 5, {127, 127, 127});
  REQUIRE(out.is_ok());
  REQUIRE(out->width == 5);
  REQUIRE(out->height == 5);
  for (int y = 0; y < 5; ++y) {
    INFO("row " << y);
    CHECK(out->pixel(0, y)[0] == (y == 2 || y == 3 ? 200 : 127));
  }
  // 1x4 column into 5x4: fitted round(1/4·4) = 1 wide, left offset round(4·0.5) = 2.
  RgbImage col{1, 4, std::vector<uint8_t>(12, 9)};
  Result<RgbImage> c = letterbox(col, 5, 4, {127, 127, 127});
  REQUIRE(c.is_ok());
  for (int x = 0; x < 5; ++x) CHECK(c->pixel(x, 1)[1] == (x == 2 ? 9 : 127));
  // Same aspect ratio: a plain resize, no fill.
  Result<RgbImage> same = letterbox(random_image(4, 2, 3), 8, 4, {127, 127, 127});
  REQUIRE(same.is_ok());
  CHECK(same->rgb == resize_bicubic(random_image(4, 2, 3), 8, 4).rgb);
}

TEST_CASE("letterbox refuses an image too elongated to keep one pixel", "[unit]") {
  RgbImage thin{1, 1000, std::vector<uint8_t>(3000, 0)};
  Result<RgbImage> out = letterbox(thin, 42, 300, {127, 127, 127});
  REQUIRE_FALSE(out.is_ok());
  CHECK(out.status().code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(out.status().message(), Catch::Contains("1x1000") && Catch::Contains("too elongated"));
}

}  // namespace
}  // namespace dsv41::vision
