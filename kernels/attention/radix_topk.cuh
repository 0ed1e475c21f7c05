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

// hist[d] += 1 for the lanes with valid set; all 32 lanes of the warp must call it. Lanes with
// the same digit are counted together (peaked inputs put most keys into a few digits; one shared
// atomic per lane would serialise on them).
__device__ __forceinline__ void add_count(int* hist, int d, bool valid) {
  const unsigned active = __ballot_sync(0xffffffffu, valid);
  if (!valid) return;
  const unsigned peers = __match_any_sync(active, d);
  if ((threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&hist[d], __popc(peers));
}

// tau / need for the keys key(j), j < n, 0 <= take <= n: tau is the key of rank take (1-based,
// descending; ties keep one key), need how many of the entries with key == tau belong to the
// top `take`. All threads of the block call it; hist is __shared__ int[256], the two outputs
// __shared__ too. Four 8-bit passes over the keys.
template <int kThreads, class Key>
__device__ void threshold_keys(Key key, int64_t n, int64_t take, int* hist, uint32_t* s_prefix,
                               int64_t* s_need) {
  uint32_t prefix = 0, mask = 0;
  int64_t need = take;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kThreads) hist[i] = 0;
    __syncthreads();
    for (int64_t base = 0; base < n; base += kThreads) {  // every lane of a warp in each round
      const int64_t j = base + threadIdx.x;
      const uint32_t k = j < n ? key(j) : 0u;
      add_count(hist, static_cast<int>((k >> shift) & 0xFFu), j < n && (k & mask) == prefix);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int64_t above = 0;
      int d = 255;
      for (; d > 0 && above + hist[d] < need; --d) above += hist[d];  // the bucket of rank need
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

// threshold_keys over the values load(j) (order_key of each; no NaN).
template <int kThreads, class Load>
__device__ void threshold(Load load, int64_t n, int64_t take, int* hist, uint32_t* s_prefix,
                          int64_t* s_need) {
  threshold_keys<kThreads>([&load](int64_t j) { return order_key(load(j)); }, n, take, hist,
                           s_prefix, s_need);
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
