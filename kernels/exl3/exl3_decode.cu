// EXL3 inner weight decode: trellis int16 [k/16][n/16][16K] -> Ŵ fp16 [k, n] row-major (spec
// exl3-format.md §1.2–1.5; CPU reference exl3::decode_inner, bit-exact). One warp per 16x16 tile;
// each lane decodes its eight stream elements with the same device code as exl3_gemv and writes
// them to their tile cells (§1.4). A reconstruct/test kernel, not a serving path.
#include <cuda_fp16.h>

#include "common/launch.cuh"
#include "dsv41k/launchers.hpp"
#include "exl3/exl3_decode.cuh"

namespace dsv41::kernels {
namespace {

constexpr int kDecodeWarps = 8;

template <int K, int CB>
__global__ void __launch_bounds__(32 * kDecodeWarps)
    exl3_decode_kernel(const uint32_t* __restrict__ trellis, uint16_t* __restrict__ w_hat,
                       int64_t tiles_k, int64_t tiles_n) {
  detail::pdl_begin();
  const int lane = threadIdx.x & 31;
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * kDecodeWarps + (threadIdx.x >> 5);
  if (tile >= tiles_k * tiles_n) return;
  const int64_t tk = tile / tiles_n, tn = tile % tiles_n;
  const uint32_t* words = trellis + tile * (8 * K);
  const exl3d::LaneWindow lw = exl3d::lane_window<K>(lane);
  uint32_t p[4];
  exl3d::decode_lane<K, CB>(__ldg(words + lw.i0), __ldg(words + lw.i1), __ldg(words + lw.i2),
                            lw.off, p);
  const int c = lane & 3, g = lane >> 2;
  const int64_t n = tiles_n * 16;
  uint16_t* base = w_hat + (tk * 16) * n + tn * 16;
  const int rows[4] = {2 * c, 2 * c + 1, 2 * c + 8, 2 * c + 9};
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const uint16_t v = static_cast<uint16_t>(p[j / 2] >> (16 * (j & 1)));
    base[rows[j & 3] * n + g + (j < 4 ? 0 : 8)] = v;
  }
}

template <int K>
cudaError_t launch_k(const uint32_t* t, uint16_t* w, int64_t tk, int64_t tn, Exl3Codebook cb,
                     cudaStream_t s) {
  const int64_t blocks = (tk * tn + kDecodeWarps - 1) / kDecodeWarps;
  if (blocks > 0x7FFFFFFF) return cudaErrorInvalidValue;
  const unsigned grid = static_cast<unsigned>(blocks);
  switch (cb) {
    case Exl3Codebook::kMul1:
      (void)detail::launch_kernel(exl3_decode_kernel<K, exl3d::kCbMul1>, grid, 32 * kDecodeWarps, 0,
                                  s, t, w, tk, tn);
      break;
    case Exl3Codebook::kMcg:
      (void)detail::launch_kernel(exl3_decode_kernel<K, exl3d::kCbMcg>, grid, 32 * kDecodeWarps, 0,
                                  s, t, w, tk, tn);
      break;
    default:
      (void)detail::launch_kernel(exl3_decode_kernel<K, exl3d::kCb3Inst>, grid, 32 * kDecodeWarps,
                                  0, s, t, w, tk, tn);
      break;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t exl3_decode(const uint8_t* trellis, uint16_t* w_hat, int64_t k, int64_t n, int K,
                        Exl3Codebook cb, cudaStream_t stream) {
  if (!trellis || !w_hat || k < 16 || n < 16 || k % 16 != 0 || n % 16 != 0 ||
      (reinterpret_cast<uintptr_t>(trellis) & 3) != 0 || static_cast<int>(cb) < 0 ||
      static_cast<int>(cb) > 2)
    return cudaErrorInvalidValue;
  const auto* t = reinterpret_cast<const uint32_t*>(trellis);
  const int64_t tk = k / 16, tn = n / 16;
  switch (K) {
    case 2:
      return launch_k<2>(t, w_hat, tk, tn, cb, stream);
    case 3:
      return launch_k<3>(t, w_hat, tk, tn, cb, stream);
    case 4:
      return launch_k<4>(t, w_hat, tk, tn, cb, stream);
    case 5:
      return launch_k<5>(t, w_hat, tk, tn, cb, stream);
    case 6:
      return launch_k<6>(t, w_hat, tk, tn, cb, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace dsv41::kernels
