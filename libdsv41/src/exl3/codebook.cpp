// Codebook formulas of spec exl3-format.md §1.5 (exllamav3 codebook.cuh decode_3inst<cb>).
#include "exl3/codebook.hpp"

#include <array>
#include <bit>
#include <memory>

#include "quant/dtype.hpp"

namespace dsv41::exl3 {

namespace {

// 3INST / MCG: mask clears exponent bits 14..12 of each half, xor sets 13..12, so each half is
// +-[0.125, 2). The sum of two such fp16 needs <= 15 significant bits: exact in fp32, so the
// only rounding is the final fp32 -> fp16 (RNE), as in CUDA's __hadd.
uint16_t sum_of_halves(uint32_t x) {
  x = (x & 0x8FFF8FFFu) ^ 0x3B603B60u;
  const float lo = f16_to_f32(static_cast<uint16_t>(x & 0xFFFF));
  const float hi = f16_to_f32(static_cast<uint16_t>(x >> 16));
  return f32_to_f16(lo + hi);
}

// MUL1: fp16 fma (1024 + s) * k_inv + k_bias with one rounding. (1024+s) <= 2044 and k_inv have
// 11-bit mantissas, so the product is exact in fp32 (22 bits, lsb 2^-18); adding k_bias
// (lsb 2^-7) to a value below 16 stays within 22 bits: still exact, one rounding to fp16.
constexpr uint16_t kMul1InvBits = 0x1EEE;   // 0.00676727... ~ 1/147.77
constexpr uint16_t kMul1BiasBits = 0xC931;  // -10.3828125

uint16_t mul1_value(uint32_t x) {
  const uint32_t s = (x & 0xFF) + ((x >> 8) & 0xFF) + ((x >> 16) & 0xFF) + (x >> 24);
  const float v =
      static_cast<float>(1024 + s) * f16_to_f32(kMul1InvBits) + f16_to_f32(kMul1BiasBits);
  return f32_to_f16(v);
}

struct Lut {
  std::array<uint16_t, 65536> f16;
  std::array<float, 65536> f32;
};

std::unique_ptr<Lut> build_lut(Codebook cb) {
  auto lut = std::make_unique<Lut>();
  for (uint32_t s = 0; s < 65536; ++s) {
    lut->f16[s] = codebook_eval(cb, static_cast<uint16_t>(s));
    lut->f32[s] = f16_to_f32(lut->f16[s]);
  }
  return lut;
}

const Lut& lut_for(Codebook cb) {
  // Function-local statics: built on first use, thread-safe (C++11 magic statics).
  static const std::unique_ptr<Lut> k3Inst = build_lut(Codebook::k3Inst);
  static const std::unique_ptr<Lut> kMcg = build_lut(Codebook::kMcg);
  static const std::unique_ptr<Lut> kMul1 = build_lut(Codebook::kMul1);
  switch (cb) {
    case Codebook::kMcg:
      return *kMcg;
    case Codebook::kMul1:
      return *kMul1;
    default:
      return *k3Inst;
  }
}

}  // namespace

const char* codebook_name(Codebook cb) {
  switch (cb) {
    case Codebook::kMcg:
      return "mcg";
    case Codebook::kMul1:
      return "mul1";
    default:
      return "3inst";
  }
}

uint16_t codebook_eval(Codebook cb, uint16_t state) {
  const uint32_t st = state;
  switch (cb) {
    case Codebook::kMcg:
      return sum_of_halves(st * 0xCBAC1FEDu);
    case Codebook::kMul1:
      return mul1_value(st * 0x83DCD12Du);
    default:
      return sum_of_halves(st * 89226354u + 64248484u);
  }
}

const uint16_t* codebook_lut_f16(Codebook cb) { return lut_for(cb).f16.data(); }
const float* codebook_lut_f32(Codebook cb) { return lut_for(cb).f32.data(); }

}  // namespace dsv41::exl3
