// Dense launchers of the tensor-core GEMM over quantised and BF16 weights (linear/quant_gemm.cuh):
// a grid of (128-row weight tiles, 64- or 128-row activation tiles).
#include <type_traits>

#include "common/launch.cuh"
#include "dsv41k/launchers.hpp"
#include "linear/quant_gemm.cuh"

namespace dsv41::kernels {
namespace {

// 128-row activation tiles halve the weight decodes per row but need this many blocks to keep
// ~4 per SM on 132 SMs (wq_a at a 2048 chunk: 10 × 16 = 160 blocks stays on 64-row tiles).
constexpr int64_t kLargeTileMinBlocks = 512;

template <class Fmt, int kParts, int kBM>
__global__ void __launch_bounds__(detail::kGemmThreads, kBM == 64 ? 3 : 2)
    quant_gemm_kernel(const float* __restrict__ x, const uint8_t* __restrict__ w,
                      const uint8_t* __restrict__ scale, float* __restrict__ y, int64_t rows,
                      int64_t out, int64_t in) {
  detail::pdl_begin();
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kBM;
  const int64_t left = rows - m0;
  const int r = static_cast<int>(left < kBM ? left : kBM);
  detail::quant_gemm_block<Fmt, kParts, kBM>(x + m0 * in, w, scale, y + m0 * out, r, out, in,
                                             static_cast<int64_t>(blockIdx.x) * detail::kGemmBN);
}

bool gemm_args_ok(const float* x, const uint8_t* w, const float* y, int64_t rows, int64_t out,
                  int64_t in, GemmX xp) {
  const auto aligned16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  const int parts = static_cast<int>(xp);
  return x && w && y && rows >= 0 && out >= 1 && in >= 32 && in % 32 == 0 &&
         in <= (int64_t{1} << 28) && aligned16(x) && aligned16(w) &&
         static_cast<const void*>(x) != y && parts >= 1 && parts <= 3 &&
         (out + detail::kGemmBN - 1) / detail::kGemmBN <= 0x7FFFFFFF && (rows + 63) / 64 <= 65535;
}

template <class Fmt, int kParts, int kBM>
void launch_tiles(const float* x, const uint8_t* w, const uint8_t* scale, float* y, int64_t rows,
                  int64_t out, int64_t in, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((out + detail::kGemmBN - 1) / detail::kGemmBN),
                  static_cast<unsigned>((rows + kBM - 1) / kBM));
  (void)detail::launch_kernel(quant_gemm_kernel<Fmt, kParts, kBM>, grid, detail::kGemmThreads, 0,
                              stream, x, w, scale, y, rows, out, in);
}

template <class Fmt, int kParts>
void launch_parts(const float* x, const uint8_t* w, const uint8_t* scale, float* y, int64_t rows,
                  int64_t out, int64_t in, cudaStream_t stream) {
  const int64_t large_blocks =
      ((out + detail::kGemmBN - 1) / detail::kGemmBN) * ((rows + 127) / 128);
  if (large_blocks >= kLargeTileMinBlocks)
    launch_tiles<Fmt, kParts, 128>(x, w, scale, y, rows, out, in, stream);
  else
    launch_tiles<Fmt, kParts, 64>(x, w, scale, y, rows, out, in, stream);
}

template <class Fmt>
cudaError_t launch(const float* x, const uint8_t* w, const uint8_t* scale, float* y, int64_t rows,
                   int64_t out, int64_t in, GemmX xp, cudaStream_t stream) {
  if (!gemm_args_ok(x, w, y, rows, out, in, xp)) return cudaErrorInvalidValue;
  if (scale == nullptr && !std::is_same_v<Fmt, detail::GemmBf16Row>) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  switch (xp) {
    case GemmX::kBf16:
      launch_parts<Fmt, 1>(x, w, scale, y, rows, out, in, stream);
      break;
    case GemmX::kBf16x2:
      launch_parts<Fmt, 2>(x, w, scale, y, rows, out, in, stream);
      break;
    case GemmX::kFp32:
      launch_parts<Fmt, 3>(x, w, scale, y, rows, out, in, stream);
      break;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t fp8_block_gemm(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                           int64_t rows, int64_t out, int64_t in, GemmX xp, cudaStream_t stream) {
  return launch<detail::GemmFp8Block>(x, w, scale, y, rows, out, in, xp, stream);
}

cudaError_t fp4_expert_gemm(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                            int64_t rows, int64_t out, int64_t in, GemmX xp, cudaStream_t stream) {
  return launch<detail::GemmFp4Row>(x, w, scale, y, rows, out, in, xp, stream);
}

cudaError_t bf16_gemm(const float* x, const void* w, float* y, int64_t rows, int64_t out,
                      int64_t in, GemmX xp, cudaStream_t stream) {
  return launch<detail::GemmBf16Row>(x, static_cast<const uint8_t*>(w), nullptr, y, rows, out, in,
                                     xp, stream);
}

}  // namespace dsv41::kernels
