// Dense launchers of the tensor-core GEMM over quantised and BF16 weights (linear/quant_gemm.cuh):
// a grid of (128-row weight tiles, 64- or 128-row activation tiles), split over k when that grid
// is small (gemm_k_splits).
#include <algorithm>
#include <type_traits>

#include "common/launch.cuh"
#include "dsv41k/launchers.hpp"
#include "linear/quant_gemm.cuh"

namespace dsv41::kernels {
namespace {

// 128-row activation tiles halve the weight decodes per row but need this many blocks to keep
// ~4 per SM on 132 SMs (wq_a at a 2048 chunk: 10 × 16 = 160 blocks stays on 64-row tiles).
constexpr int64_t kLargeTileMinBlocks = 512;

// Split-K: a grid of fewer blocks than this walks k in ranges of at least kSplitMinSteps steps,
// one grid z per range, so that the serial k walk of each block shortens. At 64 rows every
// projection's grid is 3-256 blocks (wo_b [5120, 8192]: 40 blocks of 256 steps; the router gate
// [384, 5120] at 2048 rows: 96 blocks) and each k step is a memory round trip (~1 µs):
// "attn out proj" of a 64-token chunk took 1.33 ms per layer (H100, docs/perf.md "Stop 36").
// 2 blocks per SM on 132 SMs; on GB10's 48 SMs ~2 waves.
constexpr int64_t kSplitTargetBlocks = 264;
constexpr int64_t kSplitMinSteps = 8;
constexpr int64_t kMaxSplits = 64;

template <class Fmt, int kParts, int kBM>
__global__ void __launch_bounds__(detail::kGemmThreads, kBM == 64 ? 3 : 2)
    quant_gemm_kernel(const float* __restrict__ x, const uint8_t* __restrict__ w,
                      const uint8_t* __restrict__ scale, float* __restrict__ y, int64_t rows,
                      int64_t out, int64_t in) {
  detail::pdl_begin();
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kBM;
  const int64_t left = rows - m0;
  const int r = static_cast<int>(left < kBM ? left : kBM);
  // Split z of gridDim.z: steps [z · per, min(steps, (z + 1) · per)) into y slice z of rows · out.
  const int64_t steps = in / detail::kGemmBK, per = (steps + gridDim.z - 1) / gridDim.z;
  const int64_t z = blockIdx.z, s0 = z * per, s1 = min(steps, s0 + per);
  detail::quant_gemm_block<Fmt, kParts, kBM>(
      x + m0 * in, w, scale, y + z * rows * out + m0 * out, r, out, in,
      static_cast<int64_t>(blockIdx.x) * detail::kGemmBN, s0, s1);
}

// y[i] = Σ_z part[z · n + i] in z order (deterministic: one order for a given shape).
__global__ void split_sum_kernel(const float* __restrict__ part, int splits, int64_t n,
                                 float* __restrict__ y) {
  detail::pdl_begin();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    float acc = part[i];
    for (int z = 1; z < splits; ++z) acc += part[z * n + i];
    y[i] = acc;
  }
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

bool large_tiles(int64_t rows, int64_t out) {
  return ((out + detail::kGemmBN - 1) / detail::kGemmBN) * ((rows + 127) / 128) >=
         kLargeTileMinBlocks;
}

template <class Fmt, int kParts, int kBM>
void launch_tiles(const float* x, const uint8_t* w, const uint8_t* scale, float* y, int64_t rows,
                  int64_t out, int64_t in, int splits, float* part, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((out + detail::kGemmBN - 1) / detail::kGemmBN),
                  static_cast<unsigned>((rows + kBM - 1) / kBM), static_cast<unsigned>(splits));
  (void)detail::launch_kernel(quant_gemm_kernel<Fmt, kParts, kBM>, grid, detail::kGemmThreads, 0,
                              stream, x, w, scale, splits > 1 ? part : y, rows, out, in);
  if (splits > 1) {
    const int64_t n = rows * out;
    const auto blocks = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 4096));
    (void)detail::launch_kernel(split_sum_kernel, blocks, 256, 0, stream,
                                static_cast<const float*>(part), splits, n, y);
  }
}

template <class Fmt, int kParts>
void launch_parts(const float* x, const uint8_t* w, const uint8_t* scale, float* y, int64_t rows,
                  int64_t out, int64_t in, int splits, float* part, cudaStream_t stream) {
  if (large_tiles(rows, out))
    launch_tiles<Fmt, kParts, 128>(x, w, scale, y, rows, out, in, splits, part, stream);
  else
    launch_tiles<Fmt, kParts, 64>(x, w, scale, y, rows, out, in, splits, part, stream);
}

template <class Fmt>
cudaError_t launch(const float* x, const uint8_t* w, const uint8_t* scale, float* y, int64_t rows,
                   int64_t out, int64_t in, GemmX xp, void* workspace, size_t workspace_bytes,
                   cudaStream_t stream) {
  if (!gemm_args_ok(x, w, y, rows, out, in, xp)) return cudaErrorInvalidValue;
  if (scale == nullptr && !std::is_same_v<Fmt, detail::GemmBf16Row>) return cudaErrorInvalidValue;
  if (workspace == nullptr && workspace_bytes > 0) return cudaErrorInvalidValue;
  if ((reinterpret_cast<uintptr_t>(workspace) & 15) != 0) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const int splits = gemm_k_splits(rows, out, in, workspace_bytes);
  float* part = static_cast<float*>(workspace);
  if (splits > 1) {  // the partials may overlap neither x nor y
    const auto lo = reinterpret_cast<uintptr_t>(part);
    const uintptr_t hi = lo + static_cast<uintptr_t>(splits) * rows * out * 4;
    const auto disjoint = [&](const void* p, int64_t bytes) {
      const auto a = reinterpret_cast<uintptr_t>(p);
      return a + static_cast<uintptr_t>(bytes) <= lo || a >= hi;
    };
    if (!disjoint(x, rows * in * 4) || !disjoint(y, rows * out * 4)) return cudaErrorInvalidValue;
  }
  switch (xp) {
    case GemmX::kBf16:
      launch_parts<Fmt, 1>(x, w, scale, y, rows, out, in, splits, part, stream);
      break;
    case GemmX::kBf16x2:
      launch_parts<Fmt, 2>(x, w, scale, y, rows, out, in, splits, part, stream);
      break;
    case GemmX::kFp32:
      launch_parts<Fmt, 3>(x, w, scale, y, rows, out, in, splits, part, stream);
      break;
  }
  return cudaGetLastError();
}

}  // namespace

int gemm_k_splits(int64_t rows, int64_t out, int64_t in, size_t workspace_bytes) {
  if (rows < 1 || out < 1 || in < detail::kGemmBK) return 1;
  const int64_t bm = large_tiles(rows, out) ? 128 : 64;
  const int64_t blocks = ((out + detail::kGemmBN - 1) / detail::kGemmBN) * ((rows + bm - 1) / bm);
  if (blocks >= kSplitTargetBlocks) return 1;
  const int64_t slice = rows * out * 4;  // bytes of one split's partial y
  const int64_t by_grid = (kSplitTargetBlocks + blocks - 1) / blocks;
  const int64_t by_steps = in / detail::kGemmBK / kSplitMinSteps;
  const int64_t by_bytes = static_cast<int64_t>(workspace_bytes / static_cast<size_t>(slice));
  int64_t s = std::min({by_grid, by_steps, by_bytes, kMaxSplits});
  // quant_gemm_kernel gives split z the steps [z · per, (z + 1) · per), per = ceil(steps / s):
  // fewer splits until the last one starts inside k (160 steps in 17 splits of 10 would leave
  // the 17th none, and its prologue would load one step past the end of the rows).
  const int64_t steps = in / detail::kGemmBK;
  while (s > 1 && (s - 1) * ((steps + s - 1) / s) >= steps) --s;
  return s > 1 ? static_cast<int>(s) : 1;
}

cudaError_t fp8_block_gemm(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                           int64_t rows, int64_t out, int64_t in, GemmX xp, void* workspace,
                           size_t workspace_bytes, cudaStream_t stream) {
  return launch<detail::GemmFp8Block>(x, w, scale, y, rows, out, in, xp, workspace, workspace_bytes,
                                      stream);
}

cudaError_t fp4_expert_gemm(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                            int64_t rows, int64_t out, int64_t in, GemmX xp, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream) {
  return launch<detail::GemmFp4Row>(x, w, scale, y, rows, out, in, xp, workspace, workspace_bytes,
                                    stream);
}

cudaError_t bf16_gemm(const float* x, const void* w, float* y, int64_t rows, int64_t out,
                      int64_t in, GemmX xp, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream) {
  return launch<detail::GemmBf16Row>(x, static_cast<const uint8_t*>(w), nullptr, y, rows, out, in,
                                     xp, workspace, workspace_bytes, stream);
}

}  // namespace dsv41::kernels
