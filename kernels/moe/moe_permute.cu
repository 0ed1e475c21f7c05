// Token permutation of the routed experts, the row gather, and the grouped-GEMV descriptors of the
// buckets, one launch each (moe/permute_block.cuh holds the block-level code and why).
#include <algorithm>

#include "common/launch.cuh"
#include "dsv41k/moe.hpp"
#include "moe/permute_block.cuh"

namespace dsv41::kernels {
namespace {

constexpr int kPermuteThreads = kMoeMaxExperts;  // one thread per local expert

__global__ void __launch_bounds__(kPermuteThreads)
    permute_kernel(const int32_t* __restrict__ ids, const float* __restrict__ weights,
                   int n_entries, int k, int expert_begin, int n_local, int32_t* counts,
                   int32_t* offsets, int32_t* slot_token, float* slot_weight, int32_t* inv) {
  detail::pdl_begin();
  __shared__ detail::PermuteShared sh;
  detail::permute_block(ids, weights, n_entries, k, expert_begin, n_local, counts, offsets,
                        slot_token, slot_weight, inv, sh);
}

constexpr int64_t kGatherCols = 1024;

__global__ void gather_kernel(const float* __restrict__ x, const int32_t* __restrict__ slot_token,
                              const int32_t* __restrict__ n_slots, float* __restrict__ xs,
                              int64_t D) {
  detail::pdl_begin();
  const int64_t s = blockIdx.x;
  if (s >= *n_slots) return;
  const float* src = x + static_cast<int64_t>(slot_token[s]) * D;
  float* dst = xs + s * D;
  // blockIdx.y: a 1024-column slice (at decode 6 slots x 1 block left 20 serial copies per thread)
  const int64_t end = min(D, (static_cast<int64_t>(blockIdx.y) + 1) * kGatherCols);
  for (int64_t d = blockIdx.y * kGatherCols + threadIdx.x; d < end; d += blockDim.x)
    dst[d] = src[d];
}

constexpr int kDescThreads = kMoeMaxExperts;

// Block b writes set b's table (thread e: local expert e).
__global__ void __launch_bounds__(kDescThreads)
    descriptors_kernel(const int32_t* __restrict__ counts, const int32_t* __restrict__ offsets,
                       int n_local, detail::TileSets sets, int tile_rows, int64_t capacity) {
  detail::pdl_begin();
  __shared__ detail::DescribeShared sh;
  detail::describe_set(counts, offsets, n_local, sets.set[blockIdx.x], tile_rows, capacity, sh);
}

}  // namespace

cudaError_t moe_permute(const int32_t* ids, const float* weights, int64_t T, int k,
                        int expert_begin, int expert_end, int32_t* counts, int32_t* offsets,
                        int32_t* slot_token, float* slot_weight, int32_t* inv,
                        cudaStream_t stream) {
  if (ids == nullptr || counts == nullptr || offsets == nullptr || slot_token == nullptr ||
      inv == nullptr || (weights == nullptr) != (slot_weight == nullptr) || T < 0 || k < 1 ||
      k > kMoeMaxTopK || expert_begin < 0 || expert_end <= expert_begin ||
      expert_end - expert_begin > kMoeMaxExperts || T * k > 0x7FFFFFFF)
    return cudaErrorInvalidValue;
  return detail::launch_kernel(permute_kernel, 1, kPermuteThreads, 0, stream, ids, weights,
                               static_cast<int>(T * k), k, expert_begin, expert_end - expert_begin,
                               counts, offsets, slot_token, slot_weight, inv);
}

cudaError_t moe_gather(const float* x, const int32_t* slot_token, const int32_t* n_slots, float* xs,
                       int64_t capacity, int64_t D, cudaStream_t stream) {
  if (x == nullptr || slot_token == nullptr || n_slots == nullptr || xs == nullptr ||
      capacity < 0 || capacity > 0x7FFFFFFF || D < 1 || static_cast<const void*>(x) == xs)
    return cudaErrorInvalidValue;
  if (capacity == 0) return cudaSuccess;
  const int64_t col_blocks = (D + kGatherCols - 1) / kGatherCols;
  if (col_blocks > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(capacity), static_cast<unsigned>(col_blocks));
  return detail::launch_kernel(gather_kernel, grid, 256, 0, stream, x, slot_token, n_slots, xs, D);
}

int64_t moe_tile_capacity(int64_t T, int k, int n_local, int tile_rows) {
  if (T < 0 || k < 1 || n_local < 1 || tile_rows < 1) return 0;
  const int64_t slots = T * k;
  return std::max<int64_t>(1, std::min<int64_t>(n_local, slots) + slots / tile_rows);
}

int64_t moe_descriptor_capacity(int64_t T, int k, int n_local) {
  return moe_tile_capacity(T, k, n_local, kMoeGemvMaxRows);
}

cudaError_t moe_expert_tile_sets(const int32_t* counts, const int32_t* offsets, int n_local,
                                 const MoeTileSet* sets, int n_sets, int tile_rows,
                                 int64_t capacity, cudaStream_t stream) {
  detail::TileSets all;
  if (counts == nullptr || offsets == nullptr || !detail::pack_tile_sets(sets, n_sets, all) ||
      n_local < 1 || n_local > kMoeMaxExperts || capacity < 1 || tile_rows < 1)
    return cudaErrorInvalidValue;
  const unsigned threads = static_cast<unsigned>((n_local + 31) / 32 * 32);
  return detail::launch_kernel(descriptors_kernel, static_cast<unsigned>(n_sets), threads, 0,
                               stream, counts, offsets, n_local, all, tile_rows, capacity);
}

cudaError_t moe_expert_tiles(const int32_t* counts, const int32_t* offsets, int n_local,
                             const uint8_t* const* w_table, const uint8_t* const* scale_table,
                             int32_t y_row_shift, int tile_rows, MoeGemvDesc* desc,
                             int64_t capacity, cudaStream_t stream) {
  const MoeTileSet set{w_table, scale_table, y_row_shift, desc};
  return moe_expert_tile_sets(counts, offsets, n_local, &set, 1, tile_rows, capacity, stream);
}

cudaError_t moe_expert_descriptors(const int32_t* counts, const int32_t* offsets, int n_local,
                                   const uint8_t* const* w_table, const uint8_t* const* scale_table,
                                   int32_t y_row_shift, MoeGemvDesc* desc, int64_t capacity,
                                   cudaStream_t stream) {
  return moe_expert_tiles(counts, offsets, n_local, w_table, scale_table, y_row_shift,
                          kMoeGemvMaxRows, desc, capacity, stream);
}

}  // namespace dsv41::kernels
