// Index top-k (spec model-architecture.md §2.4), the CUDA twin of dsv41::select_topk
// (model/attention/indexer.cpp): per query row, the k best of n scores by (score descending,
// lower id first on exact ties), -inf picks dropped, the kept ids ascending, -1 padded.
// Exact by construction (radix_topk.cuh): a radix select finds the cut key tau and how many
// tau-ties belong to the top min(k, n); one ordered pass keeps key > tau and the first `need`
// ties (block scan), drops -inf and writes the ids ascending. One block per row; rows of up to
// 8192 entries are held in registers, longer ones are read five times (the previous O(n²) rank
// count took milliseconds at the released n = 32768).
#include <cmath>
#include <cstdint>

#include "attention/radix_topk.cuh"
#include "common/launch.cuh"
#include "dsv41k/attention.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 512;

// Rows of up to kThreads · kPer entries: thread i holds the keys of entries [i·per, i·per + per)
// in registers, so the four radix passes read registers instead of the row, and the ordered
// output needs one block scan (of each thread's > tau and == tau counts) instead of two per 512
// entries. At decode (n = 1k-8k) a row took 50.3 us with the strided kernel, 14.3 us with this one
// (ncu, H200; docs/perf.md "Side streams and decode launch folds").
template <int kPer>
__global__ void __launch_bounds__(kThreads)
    select_topk_reg_kernel(const float* scores, int per, int64_t n, int k, int32_t* out) {
  detail::pdl_begin();
  __shared__ int hist[256];
  __shared__ int warp_sums[kThreads / 32];
  __shared__ uint32_t s_tau;
  __shared__ int64_t s_need;
  const float* s = scores + blockIdx.x * n;
  int32_t* o = out + blockIdx.x * static_cast<int64_t>(k);
  const int64_t first = static_cast<int64_t>(threadIdx.x) * per;
  uint32_t key[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i)
    key[i] = (i < per && first + i < n) ? radix::order_key(s[first + i]) : 0u;
  const int mine = static_cast<int>(max(int64_t{0}, min(int64_t{per}, n - first)));
  const int take = static_cast<int>(n < k ? n : k);
  radix::threshold_visit<kThreads>(
      [&](auto&& f) {
#pragma unroll
        for (int i = 0; i < kPer; ++i) f(key[i], i < mine);
      },
      take, hist, &s_tau, &s_need);
  const uint32_t tau = s_tau;
  const int need = static_cast<int>(s_need);  // <= take
  // -inf has the smallest key of any non-NaN value: its entries are never kept, even as ties.
  const uint32_t neg_inf = radix::order_key(-INFINITY);
  int gt = 0, eq = 0;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    gt += (i < mine && key[i] > tau) ? 1 : 0;
    eq += (i < mine && key[i] == tau) ? 1 : 0;
  }
  // Counts packed as eq << 16 | gt: a block total is <= n <= kThreads · kPer < 2^16.
  int total = 0;
  const int before = radix::exclusive_sum<kThreads>((eq << 16) | gt, warp_sums, &total);
  const bool ties_kept = tau != neg_inf;
  int eq_rank = before >> 16;
  int at = (before & 0xFFFF) + (ties_kept ? min(eq_rank, need) : 0);
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    if (i >= mine) continue;
    bool keep = key[i] > tau;
    if (key[i] == tau) keep = ties_kept && eq_rank++ < need;
    if (keep) o[at++] = static_cast<int32_t>(first + i);
  }
  const int kept = (total & 0xFFFF) + (ties_kept ? min(total >> 16, need) : 0);
  for (int i = kept + threadIdx.x; i < k; i += kThreads) o[i] = -1;
}

// Longer rows: strided passes over the row in global memory (L2 after the first pass).
__global__ void __launch_bounds__(kThreads)
    select_topk_kernel(const float* scores, int64_t n, int k, int32_t* out) {
  detail::pdl_begin();
  __shared__ int hist[256];
  __shared__ int warp_sums[kThreads / 32];
  __shared__ uint32_t s_tau;
  __shared__ int64_t s_need;
  const float* s = scores + blockIdx.x * n;
  int32_t* o = out + blockIdx.x * static_cast<int64_t>(k);
  const int take = static_cast<int>(n < k ? n : k);
  radix::threshold<kThreads>([s](int64_t j) { return s[j]; }, n, take, hist, &s_tau, &s_need);
  const uint32_t tau = s_tau;
  const int need = static_cast<int>(s_need);  // <= take
  int kept = 0, eq_before = 0;
  for (int64_t base = 0; base < n; base += kThreads) {
    const int64_t j = base + threadIdx.x;
    const float v = j < n ? s[j] : -INFINITY;
    const uint32_t key = radix::order_key(v);
    const int eq = (j < n && key == tau) ? 1 : 0;
    int eq_total = 0, keep_total = 0;
    const int eq_rank = eq_before + radix::exclusive_scan<kThreads>(eq, warp_sums, &eq_total);
    const int keep = (j < n && v > -INFINITY && (key > tau || (eq && eq_rank < need))) ? 1 : 0;
    const int at = kept + radix::exclusive_scan<kThreads>(keep, warp_sums, &keep_total);
    if (keep) o[at] = static_cast<int32_t>(j);
    kept += keep_total;
    eq_before += eq_total;
  }
  for (int i = kept + threadIdx.x; i < k; i += kThreads) o[i] = -1;
}

}  // namespace

cudaError_t select_topk(const float* scores, int64_t T, int64_t n, int k, int32_t* out,
                        cudaStream_t stream) {
  if (T < 0 || T > INT32_MAX || n < 0 || n > INT32_MAX || k < 1 || out == nullptr ||
      (n > 0 && T > 0 && scores == nullptr))
    return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  const int per = static_cast<int>((n + kThreads - 1) / kThreads);
  if (per <= 4)
    return detail::launch_kernel(select_topk_reg_kernel<4>, static_cast<unsigned>(T), kThreads, 0,
                                 stream, scores, per, n, k, out);
  if (per <= 16)
    return detail::launch_kernel(select_topk_reg_kernel<16>, static_cast<unsigned>(T), kThreads, 0,
                                 stream, scores, per, n, k, out);
  return detail::launch_kernel(select_topk_kernel, static_cast<unsigned>(T), kThreads, 0, stream,
                               scores, n, k, out);
}

}  // namespace dsv41::kernels
