// Grouped routed-expert FP4 GEMM for prefill (spec model-architecture.md §1.4, §4): one launch
// over 64-row bucket tiles (moe_expert_tiles); blockIdx.y picks the descriptor, blockIdx.x the
// 128-row weight tile, and the block runs the body of fp4_expert_gemm (linear/quant_gemm.cuh).
// Descriptors with rows == 0 (unused capacity) exit at once, so capacity-sized launches are
// graph-safe.
#include "common/launch.cuh"
#include "dsv41k/moe.hpp"
#include "linear/quant_gemm.cuh"

namespace dsv41::kernels {
namespace {

template <int kParts>
__global__ void __launch_bounds__(detail::kGemmThreads, 3)
    grouped_fp4_gemm_kernel(const MoeGemvDesc* __restrict__ desc, const float* __restrict__ x,
                            float* __restrict__ y, int64_t out, int64_t in) {
  detail::pdl_begin();
  const MoeGemvDesc d = desc[blockIdx.y];
  const int rows = min(d.rows, kMoeGemmTileRows);
  if (rows <= 0) return;  // uniform over the block
  detail::quant_gemm_block<detail::GemmFp4Row, kParts, kMoeGemmTileRows>(
      x + static_cast<int64_t>(d.x_row) * in, d.w, d.scale, y + static_cast<int64_t>(d.y_row) * out,
      rows, out, in, static_cast<int64_t>(blockIdx.x) * detail::kGemmBN, 0, in / detail::kGemmBK);
}

}  // namespace

cudaError_t moe_grouped_fp4_gemm(const MoeGemvDesc* desc, int n_desc, const float* x, float* y,
                                 int64_t out, int64_t in, GemmX xp, cudaStream_t stream) {
  const auto aligned16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  if (desc == nullptr || x == nullptr || y == nullptr || n_desc < 1 || n_desc > 65535 || out < 1 ||
      in < 32 || in % 32 != 0 || in > (int64_t{1} << 28) || !aligned16(x) || !aligned16(y) ||
      static_cast<const void*>(x) == y || static_cast<int>(xp) < 1 || static_cast<int>(xp) > 3)
    return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((out + detail::kGemmBN - 1) / detail::kGemmBN),
                  static_cast<unsigned>(n_desc));
  switch (xp) {
    case GemmX::kBf16:
      (void)detail::launch_kernel(grouped_fp4_gemm_kernel<1>, grid, detail::kGemmThreads, 0, stream,
                                  desc, x, y, out, in);
      break;
    case GemmX::kBf16x2:
      (void)detail::launch_kernel(grouped_fp4_gemm_kernel<2>, grid, detail::kGemmThreads, 0, stream,
                                  desc, x, y, out, in);
      break;
    case GemmX::kFp32:
      (void)detail::launch_kernel(grouped_fp4_gemm_kernel<3>, grid, detail::kGemmThreads, 0, stream,
                                  desc, x, y, out, in);
      break;
  }
  return cudaGetLastError();
}

}  // namespace dsv41::kernels
