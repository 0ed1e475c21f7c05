// Shared pieces of the two attention-core kernels (window_sparse_attention.cu: split-key CUDA-core
// flash decoding for few tokens; attend_tc.cu: tensor-core blocks for prefill chunks): the launch
// arguments, the FP8/FP4 value tables and the key list of a token (spec §2.2 steps 4-6).
//
// Key list of token t: a virtual array of window + topk slots; slot j < window = position
// first + j (FP8 ring slot p % capacity, or this call's packed row p - pos0), slot window + i =
// selection id i (FP4 compressed entry); unused slots (j >= positions in the window, id -1) are
// masked, an id >= n_entries marks the token bad (its rows become NaN; the reference throws).
#pragma once

#include <cmath>
#include <cstdint>

namespace dsv41::kernels::detail {

struct AttendArgs {
  const float* q;
  const uint8_t* new_packed;
  const uint8_t* ring;
  const uint8_t* compressed;
  const int32_t* index;
  const float* sink;
  float* o;
  float* part;  // [T, heads, splits] × (head_dim + 4): acc, m, l, 2 pad (splits > 1)
  int64_t T, n_entries, pos0;
  int H, D, W, capacity, topk, splits, tiles_per_split, n_tiles;
  float scale;
  // The split-key kernels apply the inverse RoPE of this table as they write o (rope.cuh
  // inverse_rope4, position pos0 + t) instead of a rope_rotate launch after them; attend_tc
  // ignores it (its caller launches rope_rotate).
  const float* inv_freq = nullptr;
  int rope_dim = 0;
};

__device__ __forceinline__ float e4m3_value(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 0xF, man = b & 7;
  if (exp == 15 && man == 7) return __int_as_float(0x7fc00000);
  const float v = exp == 0 ? ldexpf(static_cast<float>(man), -9)
                           : ldexpf(static_cast<float>(8 + man), exp - 10);
  return sign ? -v : v;
}

// e2m1: codes 0, 1 are 0, 0.5; code c >= 2 is (1 + (c & 1)/2)·2^((c >> 1) - 1); bit 3 = sign.
__device__ __forceinline__ float e2m1_value(int code) {
  const int c = code & 7;
  const float v = c < 2 ? 0.5f * static_cast<float>(c)
                        : ldexpf(1.0f + 0.5f * static_cast<float>(c & 1), (c >> 1) - 1);
  return (code & 8) ? -v : v;
}

// Fills the value tables (e4m3 [256], e2m1 [16], shared memory) with the block's threads.
__device__ __forceinline__ void fill_value_tables(float* e4m3, float* e2m1) {
  for (int i = threadIdx.x; i < 256; i += blockDim.x) e4m3[i] = e4m3_value(static_cast<uint8_t>(i));
  if (threadIdx.x < 16) e2m1[threadIdx.x] = e2m1_value(threadIdx.x);
}

// Packed row of slot j of token t (nullptr = masked); *fp8 = 1 for a window (FP8) row. An
// out-of-range selection id sets *bad.
__device__ __forceinline__ const uint8_t* key_slot(const AttendArgs& a, int64_t t, int j, int* fp8,
                                                   int* bad) {
  const int64_t pos = a.pos0 + t;
  const int64_t first = pos - a.W + 1 > 0 ? pos - a.W + 1 : 0;
  const int nw = static_cast<int>(pos - first + 1);
  const int fp8_bytes = a.D + a.D / 32, fp4_bytes = a.D / 2 + a.D / 16;
  *fp8 = 0;
  if (j < a.W) {
    if (j >= nw) return nullptr;
    const int64_t k = first + j;
    *fp8 = 1;
    return k >= a.pos0 ? a.new_packed + (k - a.pos0) * fp8_bytes
                       : a.ring + (k % a.capacity) * fp8_bytes;
  }
  if (j - a.W >= a.topk) return nullptr;
  const int32_t id = a.index[t * a.topk + (j - a.W)];
  if (id >= a.n_entries) {
    atomicOr(bad, 1);
    return nullptr;
  }
  return id >= 0 ? a.compressed + static_cast<int64_t>(id) * fp4_bytes : nullptr;
}

// Channels c .. c+3 (c % 4 == 0) of packed row p, decoded exactly as the reference (kv_quant):
// FP8 code · 2^(e8m0 - 127), or FP4 code · e4m3 scale. The 4 FP8 codes are one 32-bit load where
// aligned (rows of 528 bytes at the released dims), the 2 FP4 bytes one 16-bit load.
__device__ __forceinline__ float4 decode_key4(const uint8_t* p, bool fp8, int c, int D,
                                              const float* e4m3, const float* e2m1) {
  if (fp8) {
    const float s = ldexpf(1.0f, static_cast<int>(p[D + c / 32]) - 127);
    uint32_t b4;
    if ((reinterpret_cast<uintptr_t>(p + c) & 3) == 0) {
      b4 = *reinterpret_cast<const uint32_t*>(p + c);
    } else {
      b4 = p[c] | (p[c + 1] << 8) | (p[c + 2] << 16) | (static_cast<uint32_t>(p[c + 3]) << 24);
    }
    return make_float4(__fmul_rn(e4m3[b4 & 0xFF], s), __fmul_rn(e4m3[(b4 >> 8) & 0xFF], s),
                       __fmul_rn(e4m3[(b4 >> 16) & 0xFF], s), __fmul_rn(e4m3[b4 >> 24], s));
  }
  const float s = e4m3[p[D / 2 + c / 16]];
  const uint8_t* q = p + c / 2;
  const uint32_t b2 = (reinterpret_cast<uintptr_t>(q) & 1) == 0
                          ? *reinterpret_cast<const uint16_t*>(q)
                          : q[0] | (q[1] << 8);
  const uint8_t b0 = b2 & 0xFF, b1 = b2 >> 8;
  return make_float4(__fmul_rn(e2m1[b0 & 0xF], s), __fmul_rn(e2m1[b0 >> 4], s),
                     __fmul_rn(e2m1[b1 & 0xF], s), __fmul_rn(e2m1[b1 >> 4], s));
}

// The sink and the normalisation of one head: o = acc · w / (exp(sink - m) + l · w), w =
// exp(m_run - m), m = max(sink, m_run); NaN for a bad token.
__device__ __forceinline__ float finish_factor(float sink, float m_run, float l_run, bool bad) {
  const float m = fmaxf(sink, m_run);
  const float w = m_run == -INFINITY ? 0.0f : expf(m_run - m);
  const float denom = expf(sink - m) + l_run * w;
  return bad ? __int_as_float(0x7fc00000) : w / denom;
}

}  // namespace dsv41::kernels::detail
