// Exhaustive checks of the scalar storage formats (spec model-architecture.md §1.4, §2.7).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "quant/dtype.hpp"

using namespace dsv41;

TEST_CASE("e4m3: all 256 codes decode by the formula and re-encode to themselves", "[unit][dtype]") {
  for (int code = 0; code < 256; ++code) {
    const uint8_t b = static_cast<uint8_t>(code);
    const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    const float v = e4m3_to_f32(b);
    INFO("code " << code);
    if (e == 15 && m == 7) {
      REQUIRE(std::isnan(v));
      continue;
    }
    const double want = (s ? -1.0 : 1.0) * (e == 0 ? m / 8.0 * std::pow(2.0, -6)
                                                   : (1 + m / 8.0) * std::pow(2.0, e - 7));
    REQUIRE(v == static_cast<float>(want));
    REQUIRE(f32_to_e4m3(v) == b);
  }
  REQUIRE(e4m3_to_f32(0x7E) == 448.0f);
}

TEST_CASE("e4m3: rounding is nearest-even, saturating at 448", "[unit][dtype]") {
  REQUIRE(round_e4m3(1.0625f) == 1.0f);     // tie between 1.0 (m=0) and 1.125 (m=1): even
  REQUIRE(round_e4m3(1.1875f) == 1.25f);    // tie between 1.125 and 1.25 (m=2): even
  REQUIRE(round_e4m3(1.07f) == 1.125f);
  REQUIRE(round_e4m3(-1.07f) == -1.125f);
  REQUIRE(round_e4m3(1000.0f) == 448.0f);
  REQUIRE(round_e4m3(-460.0f) == -448.0f);
  REQUIRE(round_e4m3(std::ldexp(1.0f, -10)) == 0.0f);                     // half of 2^-9: tie to 0
  REQUIRE(round_e4m3(std::ldexp(3.0f, -10)) == std::ldexp(2.0f, -9));     // 1.5 quanta: tie to 2
  REQUIRE(round_e4m3(std::ldexp(15.5f, -10)) == std::ldexp(1.0f, -6));    // crosses into normals
  REQUIRE(f32_to_e4m3(NAN) == 0x7F);
}

TEST_CASE("e8m0: all 256 scale bytes are 2^(e-127), 0xFF is NaN", "[unit][dtype]") {
  for (int e = 0; e < 255; ++e) {
    INFO("byte " << e);
    REQUIRE(e8m0_to_f32(static_cast<uint8_t>(e)) == static_cast<float>(std::ldexp(1.0, e - 127)));
  }
  REQUIRE(std::isnan(e8m0_to_f32(0xFF)));
}

TEST_CASE("e2m1: all 16 codes and round-to-nearest-even on codes", "[unit][dtype]") {
  const float mags[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 16; ++c) {
    const float want = (c & 8) ? -mags[c & 7] : mags[c & 7];
    REQUIRE(e2m1_to_f32(static_cast<uint8_t>(c)) == want);
    if (c != 8) REQUIRE(f32_to_e2m1(want) == c);  // -0 encodes as 8 too
  }
  // Ties (spec §2.7): 0.25, 1.25, 2.5, 5.0 go down; 0.75, 1.75, 3.5 go up.
  REQUIRE(e2m1_to_f32(f32_to_e2m1(0.25f)) == 0.0f);
  REQUIRE(e2m1_to_f32(f32_to_e2m1(0.75f)) == 1.0f);
  REQUIRE(e2m1_to_f32(f32_to_e2m1(1.25f)) == 1.0f);
  REQUIRE(e2m1_to_f32(f32_to_e2m1(1.75f)) == 2.0f);
  REQUIRE(e2m1_to_f32(f32_to_e2m1(2.5f)) == 2.0f);
  REQUIRE(e2m1_to_f32(f32_to_e2m1(3.5f)) == 4.0f);
  REQUIRE(e2m1_to_f32(f32_to_e2m1(5.0f)) == 4.0f);
  REQUIRE(e2m1_to_f32(f32_to_e2m1(-5.1f)) == -6.0f);
  REQUIRE(e2m1_to_f32(f32_to_e2m1(100.0f)) == 6.0f);
}

TEST_CASE("bf16 and f16 conversions round to nearest even", "[unit][dtype]") {
  REQUIRE(bf16_to_f32(0x3F80) == 1.0f);
  REQUIRE(f32_to_bf16(1.0f) == 0x3F80);
  float x;
  uint32_t u = 0x3F808000;  // exactly halfway between two bf16 values, lower is even
  std::memcpy(&x, &u, 4);
  REQUIRE(f32_to_bf16(x) == 0x3F80);
  u = 0x3F818000;  // halfway, upper is even
  std::memcpy(&x, &u, 4);
  REQUIRE(f32_to_bf16(x) == 0x3F82);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t b = static_cast<uint16_t>(h);
    const float f = f16_to_f32(b);
    if (std::isnan(f)) continue;
    INFO("f16 bits " << h);
    REQUIRE(f32_to_f16(f) == b);
  }
  REQUIRE(f16_to_f32(0x3C00) == 1.0f);
  REQUIRE(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));
  REQUIRE(f32_to_f16(65520.0f) == 0x7C00);
}

TEST_CASE("pow2_ceil uses the IEEE bits", "[unit][dtype]") {
  REQUIRE(pow2_ceil(1.0f) == 1.0f);
  REQUIRE(pow2_ceil(1.0000001f) == 2.0f);
  REQUIRE(pow2_ceil(0.3f) == 0.5f);
  REQUIRE(pow2_ceil(448.0f) == 512.0f);
}

TEST_CASE("block dequantisation: FP8 32x32 and FP4 row blocks", "[unit][dtype]") {
  // FP8 [2, 40]: block columns [0,32) and [32,40); scales 2^1 and 2^-2.
  std::vector<uint8_t> w(80, 0x38);  // 1.0
  std::vector<uint8_t> s = {128, 125};
  std::vector<float> out(80);
  dequant_fp8_blocked(w.data(), s.data(), 2, 40, 32, 32, out.data());
  REQUIRE(out[0] == 2.0f);
  REQUIRE(out[31] == 2.0f);
  REQUIRE(out[32] == 0.25f);
  REQUIRE(out[79] == 0.25f);
  // FP4 [1, 64]: byte 0x2F = low nibble 0xF (-6, column 0), high nibble 0x2 (+1, column 1).
  std::vector<uint8_t> w4(32, 0);
  w4[0] = 0x2F;
  std::vector<uint8_t> s4 = {127, 126};
  std::vector<float> o4(64);
  dequant_fp4_rowblocked(w4.data(), s4.data(), 1, 64, 32, o4.data());
  REQUIRE(o4[0] == -6.0f);
  REQUIRE(o4[1] == 1.0f);
  REQUIRE(o4[2] == 0.0f);
}

TEST_CASE("dtype names round-trip", "[unit][dtype]") {
  for (const char* n : {"BF16", "F16", "F32", "F64", "I8", "I16", "I32", "I64", "U8", "F8_E4M3",
                        "F8_E8M0"}) {
    auto d = dtype_from_name(n);
    REQUIRE(d.has_value());
    REQUIRE(std::string(dtype_name(*d)) == n);
  }
  REQUIRE_FALSE(dtype_from_name("F8_E5M2").has_value());
}
