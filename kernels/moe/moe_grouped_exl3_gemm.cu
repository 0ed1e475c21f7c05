// Grouped routed-expert EXL3 GEMM for prefill chunks (spec exl3-format.md §3, model-architecture.md
// §4): one launch over 64-row bucket tiles (moe_expert_tiles with kMoeGemmTileRows) whose w entries
// point at Exl3MoeMatrix records; blockIdx.y picks the descriptor, blockIdx.x the 256-column group,
// and the block runs exl3g::gemm_block for the record's own K (each weight decoded once per 64
// rows). Null-w and rows-0 descriptors exit at once, so capacity-sized launches are graph-safe.
#include <algorithm>

#include "common/launch.cuh"
#include "dsv41k/moe.hpp"
#include "exl3/exl3_gemm_block.cuh"
#include "moe/moe_exl3_desc.cuh"

namespace dsv41::kernels {
namespace {

using exl3g::GemmSmem;

constexpr int block_bytes(int max_k) {
  int b = GemmSmem<2>::kBytes;
  if (max_k >= 3) b = std::max(b, GemmSmem<3>::kBytes);
  if (max_k >= 4) b = std::max(b, GemmSmem<4>::kBytes);
  if (max_k >= 5) b = std::max(b, GemmSmem<5>::kBytes);
  return b;
}

__global__ void __launch_bounds__(exl3g::kGemmThreads, 1)
    grouped_exl3_gemm_kernel(const MoeGemvDesc* __restrict__ desc, const float* __restrict__ x,
                             int64_t x_cols, float* __restrict__ y, int64_t y_cols, int64_t k,
                             int64_t n, int max_k) {
  detail::pdl_begin();
  extern __shared__ __align__(16) uint8_t smem[];
  exl3g::MatrixIo io;
  int K = 0;
  if (!exl3g::descriptor_io(desc[blockIdx.y], exl3g::kGemmRows, max_k, x, x_cols, y, y_cols, &io,
                            &K))
    return;  // uniform over the block
  const int cg = static_cast<int>(blockIdx.x);
  exl3g::with_k(K, [&](auto kt) {
    exl3g::gemm_block<decltype(kt)::value, exl3d::kCbMul1>(io, k, n, cg, smem);
  });
}

}  // namespace

cudaError_t moe_grouped_exl3_gemm(const MoeGemvDesc* desc, int n_desc, int max_k, const float* x,
                                  int64_t x_cols, float* y, int64_t y_cols, int64_t k, int64_t n,
                                  cudaStream_t stream) {
  const auto aligned16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  const auto dim_ok = [](int64_t d) { return d >= 128 && d % 128 == 0 && d <= (int64_t{1} << 24); };
  if (desc == nullptr || x == nullptr || y == nullptr || n_desc < 1 || n_desc > 65535 ||
      max_k < 2 || max_k > kMoeExl3MaxK || !dim_ok(k) || !dim_ok(n) || x_cols < 4 || x_cols > k ||
      x_cols % 4 != 0 || y_cols < 4 || y_cols > n || y_cols % 4 != 0 || !aligned16(x) ||
      !aligned16(y) || static_cast<const void*>(x) == y)
    return cudaErrorInvalidValue;
  const int smem = block_bytes(max_k);
  if (cudaError_t e = cudaFuncSetAttribute(&grouped_exl3_gemm_kernel,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      e != cudaSuccess)
    return e;
  const dim3 grid(static_cast<unsigned>((n + exl3g::kGemmCols - 1) / exl3g::kGemmCols),
                  static_cast<unsigned>(n_desc));
  return detail::launch_kernel(grouped_exl3_gemm_kernel, grid, exl3g::kGemmThreads, smem, stream,
                               desc, x, x_cols, y, y_cols, k, n, max_k);
}

}  // namespace dsv41::kernels
