// Index top-k (spec model-architecture.md §2.4), the CUDA twin of dsv41::select_topk
// (model/attention/indexer.cpp): per query row, the k best of n scores by (score descending,
// lower id first on exact ties), -inf picks dropped, the kept ids ascending, -1 padded. Exact by
// construction: entry j is kept iff s_j > -inf and its rank (entries before it in that strict
// total order) is < min(k, n); the kept ids are written in ascending j through a block scan.
// One block per row; the row's scores are compared tile by tile from shared memory. O(n²) per
// row (not tuned: a radix select is the faster replacement with the same rule).
#include <cmath>
#include <cstdint>

#include "dsv41k/attention.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kScoreTile = 2048;

__global__ void select_topk_kernel(const float* scores, int64_t n, int k, int32_t* out) {
  __shared__ float tile[kScoreTile];
  __shared__ int warp_sums[kThreads / 32];
  __shared__ int running;
  const int64_t t = blockIdx.x;
  const float* s = scores + t * n;
  const int64_t take = n < k ? n : k;
  int32_t* o = out + t * k;
  if (threadIdx.x == 0) running = 0;
  __syncthreads();
  for (int64_t base = 0; base < n; base += kThreads) {
    const int64_t j = base + threadIdx.x;
    const float sj = j < n ? s[j] : -INFINITY;
    int64_t rank = 0;
    for (int64_t i0 = 0; i0 < n; i0 += kScoreTile) {
      const int64_t len = n - i0 < kScoreTile ? n - i0 : kScoreTile;
      __syncthreads();
      for (int64_t i = threadIdx.x; i < len; i += kThreads) tile[i] = s[i0 + i];
      __syncthreads();
      if (sj > -INFINITY && rank < take) {
        for (int64_t i = 0; i < len; ++i) {
          const float si = tile[i];
          rank += (si > sj || (si == sj && i0 + i < j)) ? 1 : 0;
        }
      }
    }
    const int keep = (j < n && sj > -INFINITY && rank < take) ? 1 : 0;
    // Block exclusive scan of keep (ascending j).
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const unsigned ballot = __ballot_sync(0xffffffffu, keep);
    const int in_warp = __popc(ballot & ((1u << lane) - 1u));
    if (lane == 0) warp_sums[warp] = __popc(ballot);
    __syncthreads();
    int before = running;
    for (int w = 0; w < warp; ++w) before += warp_sums[w];
    if (keep) o[before + in_warp] = static_cast<int32_t>(j);
    __syncthreads();
    if (threadIdx.x == 0) {
      int total = 0;
      for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
      running += total;
    }
    __syncthreads();
  }
  for (int64_t i = running + threadIdx.x; i < k; i += kThreads) o[i] = -1;
}

}  // namespace

cudaError_t select_topk(const float* scores, int64_t T, int64_t n, int k, int32_t* out,
                        cudaStream_t stream) {
  if (T < 0 || T > INT32_MAX || n < 0 || n > INT32_MAX || k < 1 || out == nullptr ||
      (n > 0 && T > 0 && scores == nullptr))
    return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  select_topk_kernel<<<static_cast<unsigned>(T), kThreads, 0, stream>>>(scores, n, k, out);
  return cudaGetLastError();
}

}  // namespace dsv41::kernels
