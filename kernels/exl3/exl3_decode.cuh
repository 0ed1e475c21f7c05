// Device pieces of the EXL3 trellis decode shared by exl3_decode.cu and exl3_gemv.cu (spec
// exl3-format.md §1.2–1.5, kernel notes §3.2): one lane of a warp decodes the eight stream
// elements 8L .. 8L+7 of a 16x16 tile, which are exactly its two m16n8k16 fragments (§1.4).
// CPU reference: libdsv41/src/exl3/trellis_tile.cpp, codebook.cpp.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace dsv41::kernels::exl3d {

// Codebook ids as exl3::Codebook (0 = 3INST, 1 = MCG, 2 = MUL1).
inline constexpr int kCb3Inst = 0, kCbMcg = 1, kCbMul1 = 2;

// Stream bit b of the window of the lane's first state: the window of state t ends at bit
// (t+1)K (exclusive), so it starts at (8L+1)K - 16, taken modulo the 256K-bit ring.
template <int K>
__host__ __device__ constexpr int lane_first_bit(int lane) {
  const int b = (8 * lane + 1) * K - 16;
  return b < 0 ? b + 256 * K : b;
}

// True when some lane's 7K + 16 bits do not fit the two words that hold its first bit.
template <int K>
__host__ __device__ constexpr bool needs_third_word() {
  for (int lane = 0; lane < 32; ++lane)
    if ((lane_first_bit<K>(lane) & 31) + 7 * K + 16 > 64) return true;
  return false;
}

// Where one lane's bits sit inside a tile's 8K words (constant across tiles).
struct LaneWindow {
  int i0, i1, i2;  // word indices (ring order, wrapped)
  int off;         // bit of word i0 (from the MSB) where the first window starts
};

template <int K>
__device__ __forceinline__ LaneWindow lane_window(int lane) {
  const int b = lane_first_bit<K>(lane), w = 8 * K;
  const int i0 = b >> 5;
  return {i0, (i0 + 1) % w, (i0 + 2) % w, b & 31};
}

// The eight 16-bit states of the lane (§1.3) from its words: R = the 64 stream bits starting at
// the lane's first window (MSB first); state j is R's 16 bits at offset jK, a constant shift.
template <int K>
__device__ __forceinline__ void lane_states(uint32_t w0, uint32_t w1, uint32_t w2, int off,
                                            uint32_t (&st)[8]) {
  static_assert(K >= 1 && K <= 6, "8 states of one lane span 7K + 16 <= 64 bits");
  const uint32_t hi = __funnelshift_l(w1, w0, off);
  const uint32_t lo = needs_third_word<K>() ? __funnelshift_l(w2, w1, off) : (w1 << off);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int s = 48 - j * K;  // right shift of R that puts window j at bits 0..15
    uint32_t v;
    if (s >= 32)
      v = hi >> (s - 32);
    else if (s <= 16)
      v = lo >> s;
    else
      v = __funnelshift_r(lo, hi, s);
    st[j] = v & 0xFFFFu;
  }
}

// Two states -> f16x2 bits (state a in the low half), bit-exact with codebook_eval (§1.5).
template <int CB>
__device__ __forceinline__ uint32_t decode_pair(uint32_t a, uint32_t b) {
  if constexpr (CB == kCbMul1) {
    // dp4a sums the four bytes of x onto 0x6400, which read as f16 is exactly 1024 + s; then one
    // f16 fma (1024 + s) * k_inv + k_bias with a single rounding, as the CPU LUT.
    const uint32_t ra = __dp4a(a * 0x83DCD12Du, 0x01010101u, 0x6400u);
    const uint32_t rb = __dp4a(b * 0x83DCD12Du, 0x01010101u, 0x6400u);
    const uint32_t p = __byte_perm(ra, rb, 0x5410);
    const __half2 r =
        __hfma2(*reinterpret_cast<const __half2*>(&p), __half2half2(__ushort_as_half(0x1EEE)),
                __half2half2(__ushort_as_half(0xC931)));
    return *reinterpret_cast<const uint32_t*>(&r);
  } else {
    const uint32_t mul = CB == kCbMcg ? 0xCBAC1FEDu : 89226354u;
    const uint32_t add = CB == kCbMcg ? 0u : 64248484u;
    const uint32_t xa = ((a * mul + add) & 0x8FFF8FFFu) ^ 0x3B603B60u;
    const uint32_t xb = ((b * mul + add) & 0x8FFF8FFFu) ^ 0x3B603B60u;
    const uint32_t lo = __byte_perm(xa, xb, 0x5410), hi = __byte_perm(xa, xb, 0x7632);
    const __half2 r =
        __hadd2(*reinterpret_cast<const __half2*>(&lo), *reinterpret_cast<const __half2*>(&hi));
    return *reinterpret_cast<const uint32_t*>(&r);
  }
}

// Decoded pairs of the lane: p[q] = f16x2 of stream elements (2q, 2q+1) of the lane's eight.
// With c = lane % 4, g = lane / 4, element j sits at tile cell (row = k, col = n):
// j0 (2c, g), j1 (2c+1, g), j2 (2c+8, g), j3 (2c+9, g), j4..j7 the same with col g + 8.
template <int K, int CB>
__device__ __forceinline__ void decode_lane(uint32_t w0, uint32_t w1, uint32_t w2, int off,
                                            uint32_t (&p)[4]) {
  uint32_t st[8];
  lane_states<K>(w0, w1, w2, off, st);
#pragma unroll
  for (int q = 0; q < 4; ++q) p[q] = decode_pair<CB>(st[2 * q], st[2 * q + 1]);
}

}  // namespace dsv41::kernels::exl3d
