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

// After a pass's histogram: the digit d of the bucket holding rank `need` (descending) and how
// many entries of that bucket still belong to the top, i.e. the largest d with
// Σ_{d' >= d} hist[d'] >= need (d = 0 when none), *s_prefix = prefix | d << shift and
// *s_need = need - Σ_{d' > d} hist[d']. Warp 0 scans: lane L owns digits 255 - 8L .. 248 - 8L (a
// serial walk of up to 256 shared loads by one thread cost ~2-5 us per pass at decode).
__device__ __forceinline__ void find_bucket(const int* hist, uint32_t prefix, int shift,
                                            int64_t need, uint32_t* s_prefix, int64_t* s_need) {
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  int local = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) local += hist[255 - 8 * lane - i];
  int incl = local;  // Σ of lanes 0..lane (digits 255 down to 248 - 8·lane), fits int: <= n
#pragma unroll
  for (int off = 1; off < 32; off *= 2) {
    const int v = __shfl_up_sync(0xffffffffu, incl, off);
    if (lane >= off) incl += v;
  }
  const unsigned reached = __ballot_sync(0xffffffffu, incl >= need);
  const int owner = reached ? __ffs(reached) - 1 : 31;
  if (lane != owner) return;
  int64_t above = incl - local;
  int d = 255 - 8 * lane;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int c = hist[d];
    if (i == 7 || above + c >= need) break;  // digit 0 when no bucket reaches need
    above += c;
    --d;
  }
  *s_prefix = prefix | (static_cast<uint32_t>(d) << shift);
  *s_need = need - above;
}

// tau / need for the keys visited by for_each_key, 0 <= take <= their count: tau is the key of
// rank take (1-based, descending; ties keep one key), need how many of the entries with key ==
// tau belong to the top `take`. for_each_key(f) calls f(key, valid) for every key the thread
// holds, the same number of times in every lane of a warp (add_count's ballots). All threads of
// the block call it; hist is __shared__ int[256], the two outputs __shared__ too. Four 8-bit
// passes over the keys.
template <int kThreads, class ForEachKey>
__device__ void threshold_visit(ForEachKey for_each_key, int64_t take, int* hist,
                                uint32_t* s_prefix, int64_t* s_need) {
  uint32_t prefix = 0, mask = 0;
  int64_t need = take;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kThreads) hist[i] = 0;
    __syncthreads();
    for_each_key([&](uint32_t k, bool valid) {
      add_count(hist, static_cast<int>((k >> shift) & 0xFFu), valid && (k & mask) == prefix);
    });
    __syncthreads();
    find_bucket(hist, prefix, shift, need, s_prefix, s_need);
    __syncthreads();
    prefix = *s_prefix;
    need = *s_need;
    mask |= 0xFFu << shift;
    __syncthreads();
  }
}

// threshold_visit over the keys key(j), j < n, strided over the block's threads.
template <int kThreads, class Key>
__device__ void threshold_keys(Key key, int64_t n, int64_t take, int* hist, uint32_t* s_prefix,
                               int64_t* s_need) {
  threshold_visit<kThreads>(
      [&](auto&& f) {
        for (int64_t base = 0; base < n; base += kThreads) {  // every lane of a warp in each round
          const int64_t j = base + threadIdx.x;
          f(j < n ? key(j) : 0u, j < n);
        }
      },
      take, hist, s_prefix, s_need);
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

// Exclusive prefix sum of `v` over the block's threads in order, and the block total.
template <int kThreads>
__device__ __forceinline__ int exclusive_sum(int v, int* warp_sums, int* total) {
  constexpr int kWarps = kThreads / 32;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int incl = v;
#pragma unroll
  for (int off = 1; off < 32; off *= 2) {
    const int u = __shfl_up_sync(0xffffffffu, incl, off);
    if (lane >= off) incl += u;
  }
  __syncthreads();  // warp_sums free from the previous use
  if (lane == 31) warp_sums[warp] = incl;
  __syncthreads();
  int before = 0, sum = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) before += warp_sums[w];
    sum += warp_sums[w];
  }
  *total = sum;
  return before + incl - v;
}

}  // namespace dsv41::kernels::radix
