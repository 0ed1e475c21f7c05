// Unit tests of the attention building blocks (spec model-architecture.md §2.2, §2.4, §2.5, §2.7):
// RoPE tables and rotation, the three KV fake-quantisers, top-k and candidate-block selection.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "config/model_config.hpp"
#include "model/attention/indexer.hpp"
#include "model/attention/kv_quant.hpp"
#include "model/attention/rope.hpp"
#include "quant/dtype.hpp"
#include "support/released_rope.hpp"

using namespace dsv41;

namespace {
constexpr float kInf = INFINITY;
}

TEST_CASE("rope: default table is 1/theta^(2i/d)", "[unit][attention]") {
  const std::vector<float> f = rope_inv_freq_default(10000.0, 64);
  REQUIRE(f.size() == 32);
  for (int i = 0; i < 32; ++i)
    CHECK(f[i] == Approx(std::pow(10000.0, -2.0 * i / 64)).epsilon(2e-7));
  CHECK(f[0] == 1.0f);
}

TEST_CASE("rope: released YaRN table ramps between i = 15 and 25 (arch §2.2)",
          "[unit][attention]") {
  RopeScaling s = test::released_yarn_scaling();
  const std::vector<float> f = rope_inv_freq_yarn(160000.0, 64, s);
  REQUIRE(f.size() == 32);
  for (int i = 0; i < 32; ++i) {
    const double base = std::pow(160000.0, -2.0 * i / 64);
    const double r = std::clamp((i - 15) / 10.0, 0.0, 1.0);
    CHECK(f[i] == Approx(base * (1 - r) + base / 16 * r).epsilon(3e-7));
  }
  CHECK(f[15] == rope_inv_freq_default(160000.0, 64)[15]);  // unchanged up to low = 15
  CHECK(f[31] == Approx(rope_inv_freq_default(160000.0, 64)[31] / 16).epsilon(2e-7));
  s.factor = 0;
  CHECK_THROWS_WITH(rope_inv_freq_yarn(160000.0, 64, s), Catch::Contains("factor"));
  CHECK_THROWS_WITH(rope_inv_freq_default(1e4, 7), Catch::Contains("RoPE dimension 7"));
}

TEST_CASE("rope: adjacent pairs rotate by pos·f, inverse undoes it", "[unit][attention]") {
  const std::vector<float> f = {0.5f, 0.25f};
  std::vector<float> x = {1.0f, 0.0f, 0.0f, 2.0f};
  rope_rotate(x.data(), f.data(), 4, 3, false);
  // pair 0: (1, 0) by 1.5 rad; pair 1: (0, 2) by 0.75 rad
  CHECK(x[0] == Approx(std::cos(1.5)).margin(1e-7));
  CHECK(x[1] == Approx(std::sin(1.5)).margin(1e-7));
  CHECK(x[2] == Approx(-2 * std::sin(0.75)).margin(1e-7));
  CHECK(x[3] == Approx(2 * std::cos(0.75)).margin(1e-7));
  rope_rotate(x.data(), f.data(), 4, 3, true);
  CHECK(x[0] == Approx(1.0f).margin(1e-6));
  CHECK(x[1] == Approx(0.0f).margin(1e-6));
  CHECK(x[2] == Approx(0.0f).margin(1e-6));
  CHECK(x[3] == Approx(2.0f).margin(1e-6));
  std::vector<float> y = {0.3f, -0.7f, 1.1f, 2.2f};
  const std::vector<float> y0 = y;
  rope_rotate(y.data(), f.data(), 4, 0, false);  // position 0 is the identity
  CHECK(y == y0);
}

TEST_CASE("kv quant: FP8 window, ue8m0 scale per 32, RNE ties", "[unit][attention]") {
  std::vector<float> x(64, 0.0f);
  x[0] = 448.0f;   // amax 448 -> scale 1: values land on the e4m3 grid unscaled
  x[1] = 1.0625f;  // tie between 1.0 and 1.125 -> even mantissa 1.0
  x[2] = 1.1875f;  // tie between 1.125 and 1.25 -> 1.25
  x[3] = -0.30f;   // -> -0.3125 (e4m3 spacing 1/32 in [0.25, 0.5))
  x[32] = 0.5f;    // second block: amax 0.5 -> s = 2^ceil(log2(0.5/448)) = 2^-9
  x[33] = 0.0123f;
  fake_quant_window_fp8(x.data(), 64);
  CHECK(x[0] == 448.0f);
  CHECK(x[1] == 1.0f);
  CHECK(x[2] == 1.25f);
  CHECK(x[3] == -0.3125f);
  CHECK(x[32] == 0.5f);
  const float s = std::ldexp(1.0f, -9);
  CHECK(x[33] == round_e4m3(0.0123f / s) * s);
  // amax just above 448·2^k needs the next power of two
  std::vector<float> y(32, 0.0f);
  y[0] = std::nextafter(448.0f, 1000.0f);
  y[1] = 2.5e-3f;  // subnormal e4m3: the scale decides the grid
  fake_quant_window_fp8(y.data(), 32);
  CHECK(y[0] == 448.0f);  // scale 2: 224.0000x -> 224 -> 448
  CHECK(y[1] == round_e4m3(2.5e-3f / 2) * 2);
  CHECK(y[1] != round_e4m3(2.5e-3f));
  // all zero: amax floors at 1e-4, values stay 0
  std::vector<float> z(32, 0.0f);
  fake_quant_window_fp8(z.data(), 32);
  CHECK(z == std::vector<float>(32, 0.0f));
  // width not divisible by 32: untouched
  std::vector<float> w(48, 0.123f);
  fake_quant_window_fp8(w.data(), 48);
  CHECK(w == std::vector<float>(48, 0.123f));
}

TEST_CASE("kv quant: FP4 compressed, e4m3 scale per 16, e2m1 ties", "[unit][attention]") {
  // amax 6 -> scale e4m3(6/6) = 1: the e2m1 midpoints show the tie rule.
  std::vector<float> x = {6.0f,   0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f,
                          -0.75f, 0.26f, 4.9f,  0.1f,  -6.0f, 2.9f, 1.0f, 0.0f};
  fake_quant_compressed_fp4(x.data(), 16);
  const std::vector<float> want = {6.0f,  0.0f, 1.0f, 1.0f, 2.0f,  2.0f, 4.0f, 4.0f,
                                   -1.0f, 0.5f, 4.0f, 0.0f, -6.0f, 3.0f, 1.0f, 0.0f};
  CHECK(x == want);
  // amax 6.375: 6.375/6 = 1.0625 is an e4m3 tie -> scale 1.0; 6.375 then clamps to 6
  std::vector<float> y(16, 0.0f);
  y[0] = 6.375f;
  y[1] = -3.2f;
  fake_quant_compressed_fp4(y.data(), 16);
  CHECK(y[0] == 6.0f);
  CHECK(y[1] == -3.0f);
  // tiny block: amax floors at 6·2^-9 -> scale 2^-9 (smallest e4m3 subnormal)
  std::vector<float> z(16, 0.0f);
  z[0] = 1e-5f;
  fake_quant_compressed_fp4(z.data(), 16);
  CHECK(z[0] == 0.0f);             // 1e-5 / 2^-9 = 0.005 -> code 0
  std::vector<float> w(24, 0.3f);  // 24 % 16 != 0: untouched
  fake_quant_compressed_fp4(w.data(), 24);
  CHECK(w == std::vector<float>(24, 0.3f));
}

TEST_CASE("kv quant: FP4 index, ue8m0 scale per 32", "[unit][attention]") {
  std::vector<float> x(64, 0.0f);
  x[0] = 3.0f;    // amax 3 -> s = 2^ceil(log2(0.5)) = 0.5: 3/0.5 = 6 -> 3
  x[1] = 0.3f;    // 0.6 -> code 0.5 -> 0.25
  x[2] = 0.875f;  // 1.75 tie -> 2 -> 1.0
  x[32] = 7.0f;   // second block: amax 7 -> s = 2 : 3.5 -> 4 -> 8 (a power-of-two scale overshoots)
  x[33] = 1.0f;   // 0.5 -> 1
  fake_quant_index_fp4(x.data(), 64);
  CHECK(x[0] == 3.0f);
  CHECK(x[1] == 0.25f);
  CHECK(x[2] == 1.0f);
  CHECK(x[32] == 8.0f);
  CHECK(x[33] == 1.0f);
  std::vector<float> w(16, 0.3f);  // 16 % 32 != 0: untouched
  fake_quant_index_fp4(w.data(), 16);
  CHECK(w == std::vector<float>(16, 0.3f));
}

TEST_CASE("topk: ascending, -1 padded, -inf dropped, ties to the lower index",
          "[unit][attention]") {
  // row 0: 2 visible of 5, k = 3 -> both, padded
  // row 1: all -inf -> nothing
  // row 2: ties 0.5 at 1, 3, 4 -> best 2.0 at 0 then the lowest tied indices 1, 3
  const std::vector<float> s = {0.1f,  -0.2f, -kInf, -kInf, -kInf,  //
                                -kInf, -kInf, -kInf, -kInf, -kInf,  //
                                2.0f,  0.5f,  -1.0f, 0.5f,  0.5f};
  std::vector<int32_t> out(9, 99);
  select_topk(s.data(), 3, 5, 3, out.data());
  CHECK(out == std::vector<int32_t>{0, 1, -1, -1, -1, -1, 0, 1, 3});
  // k larger than the number of entries: min(k, n) picks, rest -1
  std::vector<int32_t> out2(4, 99);
  const std::vector<float> s2 = {0.0f, 1.0f};
  select_topk(s2.data(), 1, 2, 4, out2.data());
  CHECK(out2 == std::vector<int32_t>{0, 1, -1, -1});
  // zero scores are valid picks (ReLU can give exactly 0)
  std::vector<int32_t> out3(2, 99);
  const std::vector<float> s3 = {0.0f, -kInf, 0.0f};
  select_topk(s3.data(), 1, 3, 2, out3.data());
  CHECK(out3 == std::vector<int32_t>{0, 2});
}

TEST_CASE("candidate blocks: block max, newest block pinned, top blocks kept",
          "[unit][attention]") {
  // n = 7 entries, block 3 -> blocks {0,1,2} {3,4,5} {6}; ratio 1, keep 2 blocks.
  // query at position 6 sees all 7: newest block 2 pinned; best other block wins.
  const std::vector<float> s = {0.1f, 0.9f, 0.2f, 0.5f, 0.4f, 0.3f, -5.0f};
  std::vector<uint8_t> mask(7);
  std::vector<float> bs(3);
  select_candidate_blocks(s.data(), 1, 7, /*pos0=*/6, 1, 2, 3, mask.data(), bs.data());
  CHECK(bs == std::vector<float>{0.9f, 0.5f, kInf});
  CHECK(mask == std::vector<uint8_t>{1, 1, 1, 0, 0, 0, 1});
  // query at position 1 (ratio 1): 2 visible, block 0 pinned, others -inf -> dropped
  const std::vector<float> s1 = {0.1f, 0.9f, -kInf, -kInf, -kInf, -kInf, -kInf};
  select_candidate_blocks(s1.data(), 1, 7, 1, 1, 2, 3, mask.data(), bs.data());
  CHECK(bs == std::vector<float>{kInf, -kInf, -kInf});
  CHECK(mask == std::vector<uint8_t>{1, 1, 1, 0, 0, 0, 0});
  // ratio 2, position 0: no complete group -> no pinned block, nothing kept
  const std::vector<float> s2(7, -kInf);
  select_candidate_blocks(s2.data(), 1, 7, 0, 2, 2, 3, mask.data(), bs.data());
  CHECK(mask == std::vector<uint8_t>(7, 0));
  // equal block scores: the lower block index wins
  const std::vector<float> s3 = {1.0f, 0.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f};
  select_candidate_blocks(s3.data(), 1, 7, 6, 1, 2, 3, mask.data(), bs.data());
  CHECK(mask == std::vector<uint8_t>{1, 1, 1, 0, 0, 0, 1});
  CHECK_THROWS_WITH(select_candidate_blocks(s.data(), 1, 7, 6, 1, 2, 0, mask.data(), nullptr),
                    Catch::Contains("block_size"));
}
