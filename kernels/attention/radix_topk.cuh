// Block-wide exact top-k selection shared by select_topk and candidate_blocks: order-preserving
// 32-bit keys and a radix select of the key of rank take-1 (descending), so that an entry is in
// the top `take` by (value descending, lower index first) iff key > tau, or key == tau and fewer
// than `need` lower-indexed entries have key == tau. Values must not be NaN.
#pragma once

#include <cstdint>

namespace dsv41::kernels::radix {

// Ascending key order = ascending float order; -0 and +0 share a key (they compare equal).
__device__ __forceinline__ uint32_t order_key(float v) {
  if (v == 0.0f) v = 0.0f;
  const uint32_t u = __float_as_uint(v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// tau / need for the values load(j), j < n, 0 <= take <= n. All threads of the block call it;
// hist is __shared__ int[256], the two outputs __shared__ too. Four passes over the values.
template <int kThreads, class Load>
__device__ void threshold(Load load, int64_t n, int take, int* hist, uint32_t* s_prefix,
                          int* s_need) {
  uint32_t prefix = 0, mask = 0;
  int need = take;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kThreads) hist[i] = 0;
    __syncthreads();
    for (int64_t j = threadIdx.x; j < n; j += kThreads) {
      const uint32_t key = order_key(load(j));
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 0xFFu], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int above = 0, d = 255;
      for (; d > 0; --d) {  // the digit whose bucket holds rank need-1 from the top
        if (above + hist[d] >= need) break;
        above += hist[d];
      }
      *s_prefix = prefix | (static_cast<uint32_t>(d) << shift);
      *s_need = need - above;
    }
    __syncthreads();
    prefix = *s_prefix;
    need = *s_need;
    mask |= 0xFFu << shift;
    __syncthreads();
  }
}

// Exclusive prefix of `flag` over the block's threads in order, and the block total.
template <int kThreads>
__device__ __forceinline__ int exclusive_scan(int flag, int* warp_sums, int* total) {
  constexpr int kWarps = kThreads / 32;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned ballot = __ballot_sync(0xffffffffu, flag);
  const int in_warp = __popc(ballot & ((1u << lane) - 1u));
  __syncthreads();  // warp_sums free from the previous use
  if (lane == 0) warp_sums[warp] = __popc(ballot);
  __syncthreads();
  int before = 0, sum = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) before += warp_sums[w];
    sum += warp_sums[w];
  }
  *total = sum;
  return before + in_warp;
}

}  // namespace dsv41::kernels::radix
