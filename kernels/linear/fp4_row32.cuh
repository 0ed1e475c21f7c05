// Format policy of quant_gemv.cuh for the released routed-expert FP4 weights (spec
// model-architecture.md §1.4): packed E2M1 pairs, one E8M0 scale per row per 32 columns. Used by
// fp4_expert_gemv.cu and the grouped MoE GEMV (kernels/moe/moe_grouped_fp4_gemv.cu).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace dsv41::kernels::detail {

struct Fp4Row32 {
  static constexpr int kElemsPerChunk = 32;
  static constexpr int kSubChunks = 2;
  // decode() yields e2m1 · 2^-14 (see below); the exact 2^14 goes onto each 16-value sum.
  static constexpr float kScalePostMul = 16384.0f;
  static constexpr bool kScaleSharedByRows = false;

  // Nibbles at bits [0,4) and [16,20) of v -> f16x2 by placing the code's exponent/mantissa bits
  // (e1 e0 m) at f16 bits 11..9 and its sign at bit 15. As f16 that reads 2^(E-15)·(1 + m/2) for
  // E > 0 and m · 2^-15 for E = 0, i.e. exactly e2m1(code) · 2^-14 for all 16 codes (±0 kept).
  __device__ __forceinline__ static float2 nibbles_to_float2(uint32_t v) {
    const uint32_t bits = ((v & 0x00070007u) << 9) | ((v & 0x00080008u) << 12);
    return __half22float2(*reinterpret_cast<const __half2*>(&bits));
  }
  // Sub-chunk `sub` = bytes [8 sub, 8 sub + 8) = columns [16 sub, 16 sub + 16); in a 32-bit word,
  // column 2b is the low and 2b + 1 the high nibble of byte b (even column = low nibble).
  __device__ __forceinline__ static void decode(const uint4& c, int sub, float (&v)[16]) {
    const uint32_t words[2] = {sub == 0 ? c.x : c.z, sub == 0 ? c.y : c.w};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {  // nibbles k and k + 4 of the word
        const float2 f = nibbles_to_float2(words[i] >> (4 * k));
        v[8 * i + k] = f.x;
        v[8 * i + k + 4] = f.y;
      }
    }
  }
  // scale [out, in/32]; chunk c is scale column c.
  static constexpr int kScaleStep = 32;
  __device__ __forceinline__ static const uint8_t* scale_ptr(const uint8_t* s, int64_t o, int64_t c,
                                                             int64_t in) {
    return s + o * (in / 32) + c;
  }
};

}  // namespace dsv41::kernels::detail
