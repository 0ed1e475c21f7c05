// Grouped routed-expert FP4 GEMV for decode (spec model-architecture.md §1.4, §4): one launch for
// many (expert weight, scale, x rows, y rows) descriptors. blockIdx.y picks the descriptor,
// blockIdx.x the row block; each block runs exactly the work of a fp4_expert_gemv block
// (linear/quant_gemv.cuh quant_gemv_block with the Fp4Row32 format), so the accumulation order
// per output equals fp4_expert_gemv's at the same (T, R, k split). Descriptors with rows == 0
// (empty buckets, unused capacity) exit at once.
#include <algorithm>

#include "common/launch.cuh"
#include "dsv41k/moe.hpp"
#include "linear/fp4_row32.cuh"
#include "linear/quant_gemv.cuh"

namespace dsv41::kernels {
namespace {

using detail::Fp4Row32;
using detail::kGemvThreads;
using detail::kGemvWarps;

// kGathered: x rows through slot_token (moe_grouped_fp4_gemv_gathered); a separate instance so
// the plain launches carry none of it (the sm_121 16-row instance spilled 168 bytes with it).
template <int T, int R, bool kStageX, bool kGathered>
__global__ void __launch_bounds__(kGemvThreads, 4)
    grouped_fp4_gemv_kernel(const MoeGemvDesc* __restrict__ desc, const float* __restrict__ x,
                            const int32_t* __restrict__ slot_token, float* __restrict__ y,
                            int64_t out, int64_t in, int ksplit) {
  detail::pdl_begin();
  const MoeGemvDesc d = desc[blockIdx.y];
  const int rows = min(d.rows, T);
  if (rows <= 0) return;  // uniform over the block
  // slot_token (kStageX): the descriptor's rows are the tokens slot_token[x_row ..] of x.
  constexpr bool mapped = kStageX && kGathered;
  detail::quant_gemv_block<Fp4Row32, T, R, kStageX>(
      mapped ? x : x + static_cast<int64_t>(d.x_row) * in, d.w, d.scale,
      y + static_cast<int64_t>(d.y_row) * out, rows, out, in, ksplit, blockIdx.x, in, out,
      detail::GemvRope{}, mapped ? slot_token + d.x_row : nullptr);
}

// Body of a descriptor with `rows` rows: the smallest instance t >= rows, x staged when t <=
// stage_rows (the launch's dynamic shared memory holds stage_rows rows).
// slot_token: as grouped_fp4_gemv_kernel, used only where x is staged (the gathered launcher
// guarantees it for every instance it can pick).
template <int t>
__device__ __forceinline__ void grouped_body(const MoeGemvDesc& d, const float* x,
                                             const int32_t* slot_token, float* y, int rows,
                                             int stage_rows, int64_t out, int64_t in, int ksplit) {
  const float* xd = x + static_cast<int64_t>(d.x_row) * in;
  float* yd = y + static_cast<int64_t>(d.y_row) * out;
  if (t <= 8 && t <= stage_rows)
    detail::quant_gemv_block<Fp4Row32, t, 2, (t <= 8)>(
        slot_token != nullptr ? x : xd, d.w, d.scale, yd, rows, out, in, ksplit, blockIdx.x, in,
        out, detail::GemvRope{}, slot_token != nullptr ? slot_token + d.x_row : nullptr);
  else
    detail::quant_gemv_block<Fp4Row32, t, 2, false>(xd, d.w, d.scale, yd, rows, out, in, ksplit,
                                                    blockIdx.x, in, out);
}

// Several rows per bucket possible: the instance is picked per descriptor from its own rows
// (decode buckets hold 1-3 of the 6-96 slots; the launch-wide max_rows instance made every
// bucket pay for 16 rows: 79 ms of routed experts per 16-row step over 40 layers, H200).
// Accumulation order per output does not depend on the instance (docs/kernels.md).
template <int kMaxT, bool kGathered>
__global__ void __launch_bounds__(kGemvThreads, 2)
    grouped_fp4_gemv_rows_kernel(const MoeGemvDesc* __restrict__ desc, const float* __restrict__ x,
                                 const int32_t* __restrict__ slot_token, float* __restrict__ y,
                                 int64_t out, int64_t in, int ksplit, int stage_rows) {
  detail::pdl_begin();
  const MoeGemvDesc d = desc[blockIdx.y];
  const int rows = min(d.rows, kMaxT);
  if (rows <= 0) return;  // uniform over the block
  if constexpr (!kGathered) slot_token = nullptr;
  if (rows == 1)
    grouped_body<1>(d, x, slot_token, y, rows, stage_rows, out, in, ksplit);
  else if (rows == 2 || kMaxT == 2)
    grouped_body<2>(d, x, slot_token, y, rows, stage_rows, out, in, ksplit);
  else if constexpr (kMaxT >= 4) {
    if (rows <= 4 || kMaxT == 4)
      grouped_body<4>(d, x, slot_token, y, rows, stage_rows, out, in, ksplit);
    else if constexpr (kMaxT >= 8) {
      if (rows <= 8 || kMaxT == 8)
        grouped_body<8>(d, x, slot_token, y, rows, stage_rows, out, in, ksplit);
      else if constexpr (kMaxT >= 16)
        grouped_body<16>(d, x, slot_token, y, rows, stage_rows, out, in, ksplit);
    }
  }
}

int ksplit_for(int64_t row_groups, int n_desc, int64_t in, cudaError_t* err) {
  int dev = 0, sms = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return *err = e, 1;
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
      e != cudaSuccess)
    return *err = e, 1;
  // The k split sees every descriptor's row groups (they run side by side).
  return detail::gemv_ksplit(row_groups * n_desc, in / Fp4Row32::kElemsPerChunk, sms);
}

template <int T, int R>
cudaError_t launch(const MoeGemvDesc* desc, int n_desc, const float* x, const int32_t* slot_token,
                   float* y, int64_t out, int64_t in, cudaStream_t stream) {
  const int64_t row_groups = (out + R - 1) / R;
  cudaError_t err = cudaSuccess;
  const int ksplit = ksplit_for(row_groups, n_desc, in, &err);
  if (err != cudaSuccess) return err;
  const int64_t groups_per_block = kGemvWarps / ksplit;
  const int64_t blocks = (row_groups + groups_per_block - 1) / groups_per_block;
  if (blocks > 0x7FFFFFFF) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(n_desc));
  const int64_t x_bytes = detail::staged_x_bytes(T, in);
  if (T <= 8 && x_bytes <= detail::gemv_stage_limit<T, R>()) {
    const auto kernel = slot_token != nullptr ? grouped_fp4_gemv_kernel<T, R, (T <= 8), true>
                                              : grouped_fp4_gemv_kernel<T, R, (T <= 8), false>;
    (void)detail::launch_kernel(kernel, grid, kGemvThreads, x_bytes, stream, desc, x, slot_token, y,
                                out, in, ksplit);
  } else {  // never gathered (moe_grouped_fp4_gemv_gathered_supported)
    (void)detail::launch_kernel(grouped_fp4_gemv_kernel<T, R, false, false>, grid, kGemvThreads, 0,
                                stream, desc, x, nullptr, y, out, in, ksplit);
  }
  return cudaGetLastError();
}

// Rows of x the rows kernel of kMaxT stages (every inlined instance has its own static reduction
// buffer, kGemvWarps·t·2 floats, 1984 B for t = 1..16: the staged rows must fit the 48 KB default
// beside all of them).
template <int kMaxT>
int rows_stage_rows(int64_t in) {
  constexpr int64_t kStatic = int64_t{kGemvWarps} * 2 * 4 * (2 * kMaxT - 1);
  int stage_rows = 0;
  for (int t = 1; t <= 8 && t <= kMaxT; t *= 2)
    if (detail::staged_x_bytes(t, in) <= detail::kGemvStageXBytes - kStatic) stage_rows = t;
  return stage_rows;
}

template <int kMaxT>
cudaError_t launch_rows(const MoeGemvDesc* desc, int n_desc, const float* x,
                        const int32_t* slot_token, float* y, int64_t out, int64_t in,
                        cudaStream_t stream) {
  const int64_t row_groups = (out + 1) / 2;
  cudaError_t err = cudaSuccess;
  const int ksplit = ksplit_for(row_groups, n_desc, in, &err);
  if (err != cudaSuccess) return err;
  const int64_t groups_per_block = kGemvWarps / ksplit;
  const int64_t blocks = (row_groups + groups_per_block - 1) / groups_per_block;
  if (blocks > 0x7FFFFFFF) return cudaErrorInvalidValue;
  const int stage_rows = rows_stage_rows<kMaxT>(in);
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(n_desc));
  // Gathered instances only where every inlined instance can stage x (kMaxT <= 8).
  const auto kernel = kMaxT <= 8 && slot_token != nullptr
                          ? grouped_fp4_gemv_rows_kernel<kMaxT, (kMaxT <= 8)>
                          : grouped_fp4_gemv_rows_kernel<kMaxT, false>;
  return detail::launch_kernel(kernel, grid, kGemvThreads, detail::staged_x_bytes(stage_rows, in),
                               stream, desc, x, slot_token, y, out, in, ksplit, stage_rows);
}

}  // namespace

namespace {

bool grouped_args_ok(const MoeGemvDesc* desc, int n_desc, int max_rows, const float* x, float* y,
                     int64_t out, int64_t in) {
  const auto aligned16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  return desc != nullptr && x != nullptr && y != nullptr && n_desc >= 1 && n_desc <= 65535 &&
         max_rows >= 1 && max_rows <= kMoeGemvMaxRows && out >= 1 && in >= 32 && in % 32 == 0 &&
         in <= (int64_t{1} << 28) && aligned16(x) && aligned16(y) &&
         static_cast<const void*>(x) != y;
}

// Same T/R instances as dispatch_quant_gemv for FP4 (two sub-chunks: R = 2 from T = 2 on); from 2
// rows on the instance is chosen per descriptor.
cudaError_t dispatch(const MoeGemvDesc* desc, int n_desc, int max_rows, const float* x,
                     const int32_t* slot_token, float* y, int64_t out, int64_t in,
                     cudaStream_t stream) {
  if (max_rows <= 1) return launch<1, 2>(desc, n_desc, x, slot_token, y, out, in, stream);
  if (max_rows <= 2) return launch_rows<2>(desc, n_desc, x, slot_token, y, out, in, stream);
  if (max_rows <= 4) return launch_rows<4>(desc, n_desc, x, slot_token, y, out, in, stream);
  if (max_rows <= 8) return launch_rows<8>(desc, n_desc, x, slot_token, y, out, in, stream);
  return launch_rows<16>(desc, n_desc, x, slot_token, y, out, in, stream);
}

}  // namespace

cudaError_t moe_grouped_fp4_gemv(const MoeGemvDesc* desc, int n_desc, int max_rows, const float* x,
                                 float* y, int64_t out, int64_t in, cudaStream_t stream) {
  if (!grouped_args_ok(desc, n_desc, max_rows, x, y, out, in)) return cudaErrorInvalidValue;
  return dispatch(desc, n_desc, max_rows, x, nullptr, y, out, in, stream);
}

bool moe_grouped_fp4_gemv_gathered_supported(int max_rows, int64_t in) {
  if (max_rows < 1 || max_rows > kMoeGemvMaxRows || in < 32 || in % 32 != 0 ||
      in > (int64_t{1} << 28))
    return false;
  if (max_rows <= 1) return detail::staged_x_bytes(1, in) <= detail::gemv_stage_limit<1, 2>();
  if (max_rows <= 2) return rows_stage_rows<2>(in) >= 2;
  if (max_rows <= 4) return rows_stage_rows<4>(in) >= 4;
  return max_rows <= 8 && rows_stage_rows<8>(in) >= 8;
}

cudaError_t moe_grouped_fp4_gemv_gathered(const MoeGemvDesc* desc, int n_desc, int max_rows,
                                          const float* x, const int32_t* slot_token, float* y,
                                          int64_t out, int64_t in, cudaStream_t stream) {
  if (slot_token == nullptr || !grouped_args_ok(desc, n_desc, max_rows, x, y, out, in) ||
      !moe_grouped_fp4_gemv_gathered_supported(max_rows, in))
    return cudaErrorInvalidValue;
  return dispatch(desc, n_desc, max_rows, x, slot_token, y, out, in, stream);
}

}  // namespace dsv41::kernels
