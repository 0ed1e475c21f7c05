// Grouped routed-expert FP4 GEMV for decode (spec model-architecture.md §1.4, §4): one launch for
// many (expert weight, scale, x rows, y rows) descriptors. blockIdx.y picks the descriptor,
// blockIdx.x the row block; each block runs exactly the work of a fp4_expert_gemv block
// (linear/quant_gemv.cuh quant_gemv_block with the Fp4Row32 format), so the accumulation order
// per output equals fp4_expert_gemv's at the same (T, R, k split). Descriptors with rows == 0
// (empty buckets, unused capacity) exit at once.
#include <algorithm>

#include "dsv41k/moe.hpp"
#include "linear/fp4_row32.cuh"
#include "linear/quant_gemv.cuh"

namespace dsv41::kernels {
namespace {

using detail::Fp4Row32;
using detail::kGemvThreads;
using detail::kGemvWarps;

template <int T, int R, bool kStageX>
__global__ void __launch_bounds__(kGemvThreads, T == 1 ? 4 : 2)
    grouped_fp4_gemv_kernel(const MoeGemvDesc* __restrict__ desc, const float* __restrict__ x,
                            float* __restrict__ y, int64_t out, int64_t in, int ksplit) {
  const MoeGemvDesc d = desc[blockIdx.y];
  const int rows = min(d.rows, T);
  if (rows <= 0) return;  // uniform over the block
  detail::quant_gemv_block<Fp4Row32, T, R, kStageX>(
      x + static_cast<int64_t>(d.x_row) * in, d.w, d.scale, y + static_cast<int64_t>(d.y_row) * out,
      rows, out, in, ksplit, blockIdx.x);
}

template <int T, int R>
cudaError_t launch(const MoeGemvDesc* desc, int n_desc, const float* x, float* y, int64_t out,
                   int64_t in, cudaStream_t stream) {
  int dev = 0, sms = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
      e != cudaSuccess)
    return e;
  const int64_t row_groups = (out + R - 1) / R;
  // The k split sees every descriptor's row groups (they run side by side).
  const int ksplit = detail::gemv_ksplit(row_groups * n_desc, in / Fp4Row32::kElemsPerChunk, sms);
  const int64_t groups_per_block = kGemvWarps / ksplit;
  const int64_t blocks = (row_groups + groups_per_block - 1) / groups_per_block;
  if (blocks > 0x7FFFFFFF) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(n_desc));
  const int64_t x_bytes = int64_t{T} * in * 4;
  if (T <= 8 && x_bytes <= detail::gemv_stage_limit<T, R>()) {
    grouped_fp4_gemv_kernel<T, R, (T <= 8)>
        <<<grid, kGemvThreads, x_bytes, stream>>>(desc, x, y, out, in, ksplit);
  } else {
    grouped_fp4_gemv_kernel<T, R, false>
        <<<grid, kGemvThreads, 0, stream>>>(desc, x, y, out, in, ksplit);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t moe_grouped_fp4_gemv(const MoeGemvDesc* desc, int n_desc, int max_rows, const float* x,
                                 float* y, int64_t out, int64_t in, cudaStream_t stream) {
  const auto aligned16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  if (desc == nullptr || x == nullptr || y == nullptr || n_desc < 1 || n_desc > 65535 ||
      max_rows < 1 || max_rows > kMoeGemvMaxRows || out < 1 || in < 32 || in % 32 != 0 ||
      in > (int64_t{1} << 28) || !aligned16(x) || !aligned16(y) || static_cast<const void*>(x) == y)
    return cudaErrorInvalidValue;
  // Same T/R instances as dispatch_quant_gemv for FP4 (two sub-chunks: R = 2 from T = 2 on).
  if (max_rows <= 1) return launch<1, 2>(desc, n_desc, x, y, out, in, stream);
  if (max_rows <= 2) return launch<2, 2>(desc, n_desc, x, y, out, in, stream);
  if (max_rows <= 4) return launch<4, 2>(desc, n_desc, x, y, out, in, stream);
  if (max_rows <= 8) return launch<8, 2>(desc, n_desc, x, y, out, in, stream);
  return launch<16, 2>(desc, n_desc, x, y, out, in, stream);
}

}  // namespace dsv41::kernels
