// Patches (§7.2 step 6), the ViT's 2D RoPE tables (§7.3) and the aligner's 3x3 merge (§7.4 step
// 1): layouts and orderings checked element by element.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "quant/dtype.hpp"
#include "vision/image_patches.hpp"
#include "vision/patch_merge.hpp"
#include "vision/vision_attention.hpp"
#include "vision/vision_rope.hpp"

namespace dsv41::vision {
namespace {

VisionConfig tiny_config() {
  VisionConfig v;
  v.patch_size = 2;
  v.max_image_tokens = 40;
  v.min_pixels = 36;
  return v;
}

float normalised(uint8_t p) { return bf16_to_f32(f32_to_bf16((p / 255.0f - 0.5f) / 0.5f)); }

TEST_CASE("patches are row-major tiles flattened channel-major", "[unit]") {
  // 6x6 is its own layout size (patch 2): no resize, every pixel distinct.
  RgbImage im{6, 6, std::vector<uint8_t>(108)};
  for (size_t i = 0; i < im.rgb.size(); ++i) im.rgb[i] = static_cast<uint8_t>(i * 2 + 1);
  Result<ImagePatches> p = make_patches(im, tiny_config());
  REQUIRE(p.is_ok());
  REQUIRE(p->layout.vit_h == 3);
  REQUIRE(p->layout.vit_w == 3);
  REQUIRE(p->values.size() == 9u * 12u);
  for (int py = 0; py < 3; ++py)
    for (int px = 0; px < 3; ++px)
      for (int c = 0; c < 3; ++c)
        for (int y = 0; y < 2; ++y)
          for (int x = 0; x < 2; ++x) {
            INFO("patch " << py << "," << px << " c" << c << " y" << y << " x" << x);
            const size_t at = static_cast<size_t>((py * 3 + px) * 12 + (c * 2 + y) * 2 + x);
            REQUIRE(p->values[at] == normalised(im.pixel(px * 2 + x, py * 2 + y)[c]));
          }
}

TEST_CASE("patch values are (x/255 - 0.5)/0.5 rounded to bf16", "[unit]") {
  CHECK(normalised(0) == -1.0f);
  CHECK(normalised(255) == 1.0f);
  RgbImage im{1, 1, {0, 127, 255}};
  Result<ImagePatches> p = make_patches(im, tiny_config());  // sized up to 6x6
  REQUIRE(p.is_ok());
  for (float v : p->values) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    REQUIRE((bits & 0xFFFF) == 0);  // bf16-exact
  }
  CHECK(p->values[0] == -1.0f);            // channel 0 of patch 0
  CHECK(p->values[4] == normalised(127));  // channel 1
  CHECK(p->values[8] == 1.0f);             // channel 2
}

TEST_CASE("make_patches rejects inconsistent images by name", "[unit]") {
  const VisionConfig v = tiny_config();
  RgbImage short_buffer{4, 4, std::vector<uint8_t>(47)};
  Result<ImagePatches> a = make_patches(short_buffer, v);
  REQUIRE_FALSE(a.is_ok());
  CHECK_THAT(a.status().message(), Catch::Contains("4x4") && Catch::Contains("47 bytes"));
  RgbImage empty{0, 3, {}};
  Result<ImagePatches> b = make_patches(empty, v);
  REQUIRE_FALSE(b.is_ok());
  CHECK(b.status().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("vision RoPE angles: first half rows, second half columns", "[unit]") {
  // head_dim 8: 4 angles per position, θ_m = 100^(-2m/4) = 1, 0.1.
  const std::vector<float> a = vision_rope_angles(2, 3, 8, 100.0);
  REQUIRE(a.size() == 2u * 3u * 4u);
  const float* p12 = &a[(1 * 3 + 2) * 4];  // row 1, column 2
  CHECK(p12[0] == 1.0f);
  CHECK(p12[1] == Approx(0.1f));
  CHECK(p12[2] == 2.0f);
  CHECK(p12[3] == Approx(0.2f));
  // Rotation pairs channel i with i + 4.
  float x[8] = {1, 0, 0, 0, 0, 1, 0, 0};
  const float ang[4] = {0.5f, 0.25f, 0, 0};
  apply_vision_rope(x, ang, 8);
  CHECK(x[0] == Approx(std::cos(0.5f)));
  CHECK(x[4] == Approx(std::sin(0.5f)));
  CHECK(x[1] == Approx(-std::sin(0.25f)));
  CHECK(x[5] == Approx(std::cos(0.25f)));
}

TEST_CASE("merge orders each 3x3 cell (channel, dy, dx) and zero-pads the edges", "[unit]") {
  // A 4x5 grid of 2 channels: value = 100·y + 10·x + c.
  const int H = 4, W = 5, C = 2, r = 3;
  std::vector<float> x(static_cast<size_t>(H * W * C));
  for (int y = 0; y < H; ++y)
    for (int xc = 0; xc < W; ++xc)
      for (int c = 0; c < C; ++c)
        x[static_cast<size_t>((y * W + xc) * C + c)] = 100.f * y + 10.f * xc + c;
  const std::vector<float> m = merge_patches(x.data(), H, W, C, r);
  REQUIRE(m.size() == 4u * 18u);  // 2x2 cells of 2·9
  for (int bi = 0; bi < 2; ++bi)
    for (int bj = 0; bj < 2; ++bj)
      for (int c = 0; c < C; ++c)
        for (int dy = 0; dy < r; ++dy)
          for (int dx = 0; dx < r; ++dx) {
            const int y = bi * r + dy, xc = bj * r + dx;
            const float want = (y < H && xc < W) ? 100.f * y + 10.f * xc + c : 0.0f;
            INFO("cell " << bi << "," << bj << " c" << c << " dy" << dy << " dx" << dx);
            REQUIRE(m[static_cast<size_t>((bi * 2 + bj) * 18 + (c * r + dy) * r + dx)] == want);
          }
}

}  // namespace
}  // namespace dsv41::vision

namespace dsv41::vision {
namespace {

TEST_CASE("vision attention: equal keys average the values, a dominant key selects its value",
          "[unit]") {
  ThreadPool pool(2);
  // n = 3 positions, 2 heads of 4: qkv rows [q(8) | k(8) | v(8)].
  const int64_t n = 3, hidden = 8;
  std::vector<float> qkv(static_cast<size_t>(n * 3 * hidden), 0.0f);
  for (int64_t t = 0; t < n; ++t) {
    float* row = &qkv[t * 3 * hidden];
    for (int d = 0; d < 8; ++d) row[d] = 1.0f;                           // q
    for (int d = 0; d < 8; ++d) row[hidden + d] = 0.5f;                  // k: all equal
    for (int d = 0; d < 8; ++d) row[2 * hidden + d] = float(t) * 3 + d;  // v
  }
  // Head 1's key at position 2 dominates.
  for (int d = 4; d < 8; ++d) qkv[2 * 3 * hidden + hidden + d] = 40.0f;
  std::vector<float> out(static_cast<size_t>(n * hidden));
  full_attention(qkv.data(), n, 2, 4, out.data(), pool);
  for (int64_t t = 0; t < n; ++t) {
    INFO("position " << t);
    for (int d = 0; d < 4; ++d) CHECK(out[t * hidden + d] == Approx(3.0f + d));  // mean of v
    for (int d = 4; d < 8; ++d) CHECK(out[t * hidden + d] == Approx(6.0f + d));  // v of pos 2
  }
}

TEST_CASE("rotate_qk rotates q and k of every head and leaves v", "[unit]") {
  const int64_t n = 2, hidden = 8;  // 2 heads of 4: 2 angles per position
  std::vector<float> qkv(static_cast<size_t>(n * 3 * hidden));
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = float(i % 7) - 3.0f;
  const std::vector<float> before = qkv;
  const float angles[4] = {0.3f, -1.1f, 2.0f, 0.7f};
  rotate_qk(qkv.data(), n, 2, 4, angles);
  for (int64_t t = 0; t < n; ++t)
    for (int part = 0; part < 3; ++part)
      for (int h = 0; h < 2; ++h) {
        float want[4];
        std::copy_n(&before[t * 24 + part * 8 + h * 4], 4, want);
        if (part < 2) apply_vision_rope(want, angles + t * 2, 4);
        for (int d = 0; d < 4; ++d) REQUIRE(qkv[t * 24 + part * 8 + h * 4 + d] == want[d]);
      }
}

}  // namespace
}  // namespace dsv41::vision
