// Weighted combine of the routed experts with the shared expert (spec model-architecture.md §4,
// CPU reference model/moe.cpp moe_forward): routed[t] starts at 0.0f and gets each expert's row
// added in ascending expert order (the CPU loops experts outermost), then y = routed + shared.
// Blocks of (token, 128 columns): warp 0 orders the token's local slots by expert id (stably, by
// rank), then each thread sums its column in that order with IEEE adds.
// No atomics. (One block per token left a 1-row decode step with one block of 20 dependent
// column iterations: 43 us under ncu on the H200, against a few us over 40 blocks.)
#include "common/launch.cuh"
#include "dsv41k/moe.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kThreads = 128;

__global__ void __launch_bounds__(kThreads)
    combine_kernel(const float* __restrict__ ys, const int32_t* __restrict__ ids,
                   const int32_t* __restrict__ inv, const float* shared, float* y, int k, int64_t D,
                   int64_t col_blocks) {
  detail::pdl_begin();
  __shared__ int slot[kMoeMaxTopK];
  __shared__ int n_local;
  const int64_t t = blockIdx.x / col_blocks;
  const int64_t d = (blockIdx.x % col_blocks) * kThreads + threadIdx.x;
  if (threadIdx.x < 32) {
    // Warp 0 orders the token's local slots: entry i (lanes i and i - 32) goes to position
    // #{local j : (ids_j, j) < (ids_i, i)}, the stable insertion sort's result without its
    // chain of 2k dependent global loads on one thread.
    static_assert(kMoeMaxTopK <= 64, "two entries per lane");
    const int lane = threadIdx.x;
    int s[2], id[2], pos[2] = {0, 0}, n = 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = lane + 32 * h;
      s[h] = i < k ? inv[t * k + i] : -1;
      id[h] = i < k ? ids[t * k + i] : 0;
    }
    for (int j = 0; j < k; ++j) {
      const int sj = __shfl_sync(0xFFFFFFFFu, j < 32 ? s[0] : s[1], j & 31);
      const int idj = __shfl_sync(0xFFFFFFFFu, j < 32 ? id[0] : id[1], j & 31);
      if (sj < 0) continue;
      ++n;
#pragma unroll
      for (int h = 0; h < 2; ++h)
        if (idj < id[h] || (idj == id[h] && j < lane + 32 * h)) ++pos[h];
    }
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if (s[h] >= 0) slot[pos[h]] = s[h];
    if (lane == 0) n_local = n;
  }
  __syncthreads();
  const int n = n_local;
  if (d >= D) return;
  float acc = 0.0f;
  for (int j0 = 0; j0 < n; j0 += 8) {  // 8 loads in flight before their ordered adds
    float v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j)
      v[j] = j0 + j < n ? ys[static_cast<int64_t>(slot[j0 + j]) * D + d] : 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (j0 + j < n) acc = __fadd_rn(acc, v[j]);
  }
  y[t * D + d] = shared ? __fadd_rn(acc, shared[t * D + d]) : acc;
}

}  // namespace

cudaError_t moe_combine(const float* ys, const int32_t* ids, const int32_t* inv,
                        const float* shared, float* y, int64_t T, int k, int64_t D,
                        cudaStream_t stream) {
  if (ys == nullptr || ids == nullptr || inv == nullptr || y == nullptr || T < 0 || k < 1 ||
      k > kMoeMaxTopK || D < 1 || T > 0x7FFFFFFF || static_cast<const void*>(ys) == y)
    return cudaErrorInvalidValue;
  const int64_t col_blocks = (D + kThreads - 1) / kThreads;
  if (T > 0x7FFFFFFF / col_blocks) return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  return detail::launch_kernel(combine_kernel, static_cast<unsigned>(T * col_blocks), kThreads, 0,
                               stream, ys, ids, inv, shared, y, k, D, col_blocks);
}

}  // namespace dsv41::kernels
