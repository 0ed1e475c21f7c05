// Candidate blocks (spec model-architecture.md §2.5), the CUDA twin of
// dsv41::select_candidate_blocks (model/attention/indexer.cpp), exact: block score = max of the
// block's scores (fp32 max is exact), the newest visible entry's block pinned to +inf, the top
// min(topk_blocks, n_blocks) blocks by (score descending, lower block first) with a score > -inf
// kept, the mask 1 on their entries. The block top-k is the radix select of radix_topk.cuh over
// block scores recomputed from the row on every pass (block_size reads each; no scratch). One
// block per query row.
#include <cmath>
#include <cstdint>

#include "attention/radix_topk.cuh"
#include "common/launch.cuh"
#include "dsv41k/csa.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 512;

__global__ void __launch_bounds__(kThreads)
    candidate_kernel(const float* scores, int64_t n, int64_t pos0, int ratio, int topk_blocks,
                     int block_size, uint8_t* mask, float* block_scores) {
  detail::pdl_begin();
  __shared__ int hist[256];
  __shared__ int warp_sums[kThreads / 32];
  __shared__ uint32_t s_tau;
  __shared__ int64_t s_need;
  const int64_t t = blockIdx.x;
  const float* s = scores + t * n;
  const int64_t nb = (n + block_size - 1) / block_size;
  const int64_t n_vis = (pos0 + t + 1) / ratio;
  const int64_t pinned =
      (n_vis > 0 && (n_vis - 1) / block_size < nb) ? (n_vis - 1) / block_size : -1;
  auto block_score = [=](int64_t b) {
    if (b == pinned) return INFINITY;
    float m = -INFINITY;
    const int64_t end = (b + 1) * block_size < n ? (b + 1) * block_size : n;
    for (int64_t j = b * block_size; j < end; ++j) m = fmaxf(m, s[j]);
    return m;
  };
  const int take = static_cast<int>(nb < topk_blocks ? nb : topk_blocks);
  radix::threshold<kThreads>(block_score, nb, take, hist, &s_tau, &s_need);
  const uint32_t tau = s_tau;
  const int need = static_cast<int>(s_need);  // <= take
  int eq_before = 0;
  for (int64_t base = 0; base < nb; base += kThreads) {
    const int64_t b = base + threadIdx.x;
    const float v = b < nb ? block_score(b) : -INFINITY;
    const uint32_t key = radix::order_key(v);
    const int eq = (b < nb && key == tau) ? 1 : 0;
    int eq_total = 0;
    const int eq_rank = eq_before + radix::exclusive_scan<kThreads>(eq, warp_sums, &eq_total);
    eq_before += eq_total;
    if (b < nb) {
      const bool keep = v > -INFINITY && (key > tau || (eq && eq_rank < need));
      if (block_scores != nullptr) block_scores[t * nb + b] = v;
      const int64_t end = (b + 1) * block_size < n ? (b + 1) * block_size : n;
      for (int64_t j = b * block_size; j < end; ++j) mask[t * n + j] = keep ? 1 : 0;
    }
  }
}

}  // namespace

cudaError_t candidate_blocks(const float* scores, int64_t T, int64_t n, int64_t pos0, int ratio,
                             int topk_blocks, int block_size, uint8_t* mask, float* block_scores,
                             cudaStream_t stream) {
  if (T < 0 || T > INT32_MAX || n < 0 || n > INT32_MAX || pos0 < 0 || ratio < 1 ||
      topk_blocks < 1 || block_size < 1 ||
      (T > 0 && n > 0 && (mask == nullptr || scores == nullptr)))
    return cudaErrorInvalidValue;
  if (T == 0 || n == 0) return cudaSuccess;
  return detail::launch_kernel(candidate_kernel, static_cast<unsigned>(T), kThreads, 0, stream,
                               scores, n, pos0, ratio, topk_blocks, block_size, mask, block_scores);
}

}  // namespace dsv41::kernels
