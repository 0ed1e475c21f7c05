// Grouped routed-expert EXL3 GEMV (spec exl3-format.md §3, model-architecture.md §4): one launch
// over the (expert, bucket tile) descriptors of moe_expert_tile_sets, whose w entries point at
// device Exl3MoeMatrix records. blockIdx.y picks the descriptor, blockIdx.x the 128-column group;
// the block runs exl3g::gemv_block (exl3/exl3_gemv_block.cuh) for the record's own K, so the
// experts of one layer (K 2/3/5 mixed by the allocation plan, spec §4.2) share one launch and
// the routing never leaves the device. No k split: a decode step already has 6 experts × 18-40
// column groups = 108-240 blocks for the H200's 132 SMs at 2 blocks each, and prefill tiles many
// more (the host list's exl3_gemv measured 1 split as the best choice for batches of 6-12
// matrices, docs/perf.md), so no workspace either.
#include <algorithm>

#include "common/launch.cuh"
#include "dsv41k/moe.hpp"
#include "moe/moe_exl3_desc.cuh"

namespace dsv41::kernels {
namespace {

using exl3g::kThreads;
using exl3g::WarpSmem;

// Shared memory of the largest body a launch may run: every K in 2..max_k (the K = 5, 16-row
// body has fewer trellis stages than K = 4, so the size is not monotonic in K).
template <int NB>
constexpr int block_bytes(int max_k) {
  int b = WarpSmem<2, NB>::kBlockBytes;
  if (max_k >= 3) b = std::max(b, WarpSmem<3, NB>::kBlockBytes);
  if (max_k >= 4) b = std::max(b, WarpSmem<4, NB>::kBlockBytes);
  if (max_k >= 5) b = std::max(b, WarpSmem<5, NB>::kBlockBytes);
  return b;
}

template <int NB>
__global__ void __launch_bounds__(kThreads, 2)
    grouped_exl3_gemv_kernel(const MoeGemvDesc* __restrict__ desc, const float* __restrict__ x,
                             int64_t x_cols, float* __restrict__ y, int64_t y_cols, int64_t k,
                             int64_t n, int max_k) {
  detail::pdl_begin();
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int last_flag;
  exl3g::MatrixIo io;
  int K = 0;
  if (!exl3g::descriptor_io(desc[blockIdx.y], 8 * NB, max_k, x, x_cols, y, y_cols, &io, &K))
    return;  // uniform over the block
  const int cg = static_cast<int>(blockIdx.x);
  exl3g::with_k(K, [&](auto kt) {
    exl3g::gemv_block<decltype(kt)::value, exl3d::kCbMul1, NB>(io, k, n, cg, 0, 1, 0, nullptr,
                                                               nullptr, smem, &last_flag);
  });
}

template <int NB>
cudaError_t launch(const MoeGemvDesc* desc, int n_desc, int max_k, const float* x, int64_t x_cols,
                   float* y, int64_t y_cols, int64_t k, int64_t n, cudaStream_t stream) {
  auto* kern = &grouped_exl3_gemv_kernel<NB>;
  const int smem = block_bytes<NB>(max_k);
  if (cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      e != cudaSuccess)
    return e;
  const dim3 grid(static_cast<unsigned>(n / 128), static_cast<unsigned>(n_desc));
  return detail::launch_kernel(kern, grid, kThreads, smem, stream, desc, x, x_cols, y, y_cols, k, n,
                               max_k);
}

}  // namespace

cudaError_t moe_grouped_exl3_gemv(const MoeGemvDesc* desc, int n_desc, int max_rows, int max_k,
                                  const float* x, int64_t x_cols, float* y, int64_t y_cols,
                                  int64_t k, int64_t n, cudaStream_t stream) {
  const auto aligned16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  const auto dim_ok = [](int64_t d) { return d >= 128 && d % 128 == 0 && d <= (int64_t{1} << 24); };
  if (desc == nullptr || x == nullptr || y == nullptr || n_desc < 1 || n_desc > 65535 ||
      max_rows < 1 || max_rows > kMoeGemvMaxRows || max_k < 2 || max_k > kMoeExl3MaxK ||
      !dim_ok(k) || !dim_ok(n) || x_cols < 4 || x_cols > k || x_cols % 4 != 0 || y_cols < 4 ||
      y_cols > n || y_cols % 4 != 0 || !aligned16(x) || !aligned16(y) ||
      static_cast<const void*>(x) == y)
    return cudaErrorInvalidValue;
  return max_rows > 8 ? launch<2>(desc, n_desc, max_k, x, x_cols, y, y_cols, k, n, stream)
                      : launch<1>(desc, n_desc, max_k, x, x_cols, y, y_cols, k, n, stream);
}

}  // namespace dsv41::kernels
