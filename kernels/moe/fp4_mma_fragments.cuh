// Pieces of the tensor-core routed-expert GEMVs (moe_grouped_fp4_gemv_tc.cu,
// moe_grouped_fp4_gemv_tc_decode.cu) that turn 16-byte rows of packed E2M1 codes (spec
// model-architecture.md §1.4) into mma.sync m16n8k16 A fragments.
//
// Lane (g, t) = (lane / 4, lane % 4) loads 16 bytes of one weight row at 32-column block kb + t
// (4 blocks per round: full 32-byte sectors); transpose4 within the group of 4 then leaves it word
// t (columns 8t .. 8t + 7) of each of the 4 blocks. One nibble pair of a word yields columns
// (c, c + 4) as f16x2, so MMA m takes the pairs (2m, 2m + 4) and (2m + 1, 2m + 5) as its logical
// k 2t, 2t + 1 and 8 + 2t, 9 + 2t; B must hold x in the same "pair order" (0, 4, 1, 5, 2, 6, 3, 7
// within each 8 columns).
#pragma once

#include <cstdint>

namespace dsv41::kernels::detail {

// Codes k and k + 4 of the 8 in `w` (bits 4k.. and 4k + 16..) as f16x2: the code's exponent /
// mantissa bits (e1 e0 m) at f16 bits 11..9 and its sign at bit 15 read as e2m1(code) · 2^-14
// for all 16 codes (Fp4Row32::nibbles_to_float2's placement; exact, ±0 kept).
__device__ __forceinline__ uint32_t fp4_nibble_pair(uint32_t w, int k) {
  const uint32_t v = w >> (4 * k);
  return ((v & 0x00070007u) << 9) | ((v & 0x00080008u) << 12);
}

// Lane t of a group of 4 holds w[j] = M[t][j]; afterwards w[u] = M[u][t] (two xor-shuffle
// stages, each moving two words: lanes t and t ^ 2 swap halves, then t and t ^ 1 swap the odd /
// even words).
__device__ __forceinline__ void fp4_transpose4(uint32_t (&w)[4], int t) {
  const bool t1 = (t & 2) != 0, t0 = (t & 1) != 0;
  {
    const uint32_t r0 = __shfl_xor_sync(0xFFFFFFFFu, t1 ? w[0] : w[2], 2);
    const uint32_t r1 = __shfl_xor_sync(0xFFFFFFFFu, t1 ? w[1] : w[3], 2);
    if (t1) {
      w[0] = r0;
      w[1] = r1;
    } else {
      w[2] = r0;
      w[3] = r1;
    }
  }
  {
    const uint32_t r0 = __shfl_xor_sync(0xFFFFFFFFu, t0 ? w[0] : w[1], 1);
    const uint32_t r1 = __shfl_xor_sync(0xFFFFFFFFu, t0 ? w[2] : w[3], 1);
    if (t0) {
      w[0] = r0;
      w[2] = r1;
    } else {
      w[1] = r0;
      w[3] = r1;
    }
  }
}

// The A fragment of MMA m (0, 1) from word w0 of row g and word w1 of row g + 8 (the register
// order of common/mma_sync.cuh).
__device__ __forceinline__ void fp4_a_fragment(uint32_t w0, uint32_t w1, int m, uint32_t (&a)[4]) {
  a[0] = fp4_nibble_pair(w0, 2 * m);
  a[1] = fp4_nibble_pair(w1, 2 * m);
  a[2] = fp4_nibble_pair(w0, 2 * m + 1);
  a[3] = fp4_nibble_pair(w1, 2 * m + 1);
}

}  // namespace dsv41::kernels::detail
