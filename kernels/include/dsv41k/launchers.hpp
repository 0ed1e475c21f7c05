// Every launcher of kernels/ (device code, no framework): raw device pointers, sizes, a stream,
// and a workspace only where an op needs scratch (then `<op>_workspace_bytes()` sits beside it).
// Launchers never allocate, read the environment or log; they return cudaErrorInvalidValue for
// shapes or alignments they do not support, else the launch status. Layouts: row-major, spec
// model-architecture.md §1.4 for the weight formats. See docs/kernels.md.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "dsv41k/gemm_x.hpp"

namespace dsv41::kernels {

// Programmatic dependent launch (common/launch.cuh): on by default; every launcher of this
// library then lets its grid start while the previous kernel on the stream finishes, and waits
// inside the kernel before touching that kernel's output. Off gives plain stream order (the A/B
// switch of the tunable DSV41_CUDA_PDL). A process-wide setting: set it before launching.
void set_programmatic_launch(bool on);
bool programmatic_launch();

// Most activation rows one quantised GEMV call takes (decode: 1 token + up to 15 drafts).
inline constexpr int kGemvMaxRows = 16;

// y[rows, out] = x[rows, in] · Wᵀ, fp32 in and out, fp32 accumulation.
//   w      F8_E4M3 [out, in] row-major (in bytes per row)
//   scale  F8_E8M0 [ceil(out/32), ceil(in/32)]: W[r, c] = e4m3(w[r, c]) · 2^(scale[r/32, c/32] -
//   127)
// Needs 1 <= rows <= kGemvMaxRows, in % 16 == 0, x and w 16-byte aligned, y not aliasing x.
cudaError_t fp8_block_gemv(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                           int rows, int64_t out, int64_t in, cudaStream_t stream);

// Block-diagonal (grouped) form, one launch for `groups` independent products of one weight
// tensor (the grouped low-rank output projection wo_a, spec §2.2 step 7):
//   y[t, g·out + o] = Σ_i W[g·out + o, i] · x[t, g·in + i]     g < groups, o < out, i < in
//   w  F8_E4M3 [groups·out, in], scale as above for groups·out rows; x [rows, groups·in],
//   y [rows, groups·out]. Each group sums exactly as fp8_block_gemv on its slice would when
// both calls pick the same k split. Needs the fp8_block_gemv rules, groups >= 1, out % 32 == 0
// when groups > 1 (a group starts on a scale row block) and groups·in <= 2^28.
cudaError_t fp8_block_gemv_grouped(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                                   int rows, int groups, int64_t out, int64_t in,
                                   cudaStream_t stream);

// Several FP8 block weights that read the same x [rows, in], in one launch (the projections of
// one normalised activation: wq_a, wkv, the compressor's wkv / wgate, ...): job j computes
// jobs[j].y [rows, jobs[j].out] = x · W_jᵀ with W_j = (jobs[j].w, jobs[j].scale) in the
// fp8_block_gemv format. Each job sums exactly as fp8_block_gemv on it alone would when both
// calls pick the same k split (the split here is chosen from the row groups of all jobs).
// jobs[0] (only) may set rope.inv_freq: it also rotates its output as heads of rope.head_dim:
// rope_rotate(y, rope.inv_freq, rows, out / head_dim, head_dim, rope_dim, pos0, 1, false) on
// the result, bit for bit, in the GEMV's epilogue (the query RoPE of wq_b at decode; needs
// out % head_dim == 0, 2 <= rope_dim <= head_dim, both even, pos0 >= 0).
// Needs 1 <= n_jobs <= kFp8GemvMaxJobs, the fp8_block_gemv rules for every job, outputs that
// overlap neither x nor each other.
inline constexpr int kFp8GemvMaxJobs = 8;
struct Fp8GemvRope {
  const float* inv_freq = nullptr;  // [rope_dim / 2] device; null: no rotation
  int head_dim = 0, rope_dim = 0;
  int64_t pos0 = 0;
};
struct Fp8GemvJob {
  const uint8_t* w = nullptr;
  const uint8_t* scale = nullptr;
  float* y = nullptr;
  int64_t out = 0;
  Fp8GemvRope rope;
};
cudaError_t fp8_block_gemv_multi(const float* x, const Fp8GemvJob* jobs, int n_jobs, int rows,
                                 int64_t in, cudaStream_t stream);

// Tensor-core form of fp8_block_gemv / fp8_block_gemv_grouped for 1..16 rows (linear/
// fp8_gemv_tc.cu): weights as exact f16 through mma.sync, x as three f16 parts of x · 2^-e per
// (row, 32-column block), fp32 accumulation; results meet the same per-element bound, summed in
// another order (deterministic for a shape). Two launches (the x split into `workspace`, then the
// product). groups as fp8_block_gemv_grouped (1 = the plain product). Needs 1 <= rows <= 16,
// in % 32 == 0, out % 32 == 0 when groups > 1, groups·in <= 2^28, x, w and workspace 16-byte
// aligned, y not aliasing x, workspace_bytes >= fp8_gemv_tc_workspace_bytes(groups·in).
size_t fp8_gemv_tc_workspace_bytes(int64_t x_cols);
cudaError_t fp8_block_gemv_tc(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                              int rows, int groups, int64_t out, int64_t in, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream);

// Same product for the released routed-expert format:
//   w      I8 [out, in/2], two E2M1 codes per byte, even column = low nibble
//   scale  F8_E8M0 [out, in/32]: W[r, c] = e2m1(code) · 2^(scale[r, c/32] - 127)
// Needs 1 <= rows <= kGemvMaxRows, in % 32 == 0, x and w 16-byte aligned, y not aliasing x.
cudaError_t fp4_expert_gemv(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                            int rows, int64_t out, int64_t in, cudaStream_t stream);

// The same two products for many rows (prefill chunks): tensor-core GEMM (mma.sync bf16, fp32
// accumulate; linear/quant_gemm.cuh). Weights decode exactly to bf16; x enters as `xp` says.
// Any rows >= 0 (<= 65535·64), in % 32 == 0, x and w 16-byte aligned, y not aliasing x, xp one of
// the three values. workspace (16-byte aligned, may be null with bytes 0): where a small grid
// splits k (gemm_k_splits), the splits' partial sums, summed into y by a second launch in split
// order; it may overlap neither x nor y.
cudaError_t fp8_block_gemm(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                           int64_t rows, int64_t out, int64_t in, GemmX xp, void* workspace,
                           size_t workspace_bytes, cudaStream_t stream);
cudaError_t fp4_expert_gemm(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                            int64_t rows, int64_t out, int64_t in, GemmX xp, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream);
// How many k ranges the GEMMs above (and bf16_gemm) split a [rows, in] x [out, in] product into
// with workspace_bytes of partials (1: no split). Grids of >= 264 blocks (128 weight rows x 64 or
// 128 x rows each) keep 1; smaller ones split so the grid reaches ~264 blocks, each range >= 8
// k steps of 32, at most 64 ranges and as many [rows, out] fp32 partials as the workspace holds.
// The result depends only on the arguments, so a given shape always sums in the same order.
int gemm_k_splits(int64_t rows, int64_t out, int64_t in, size_t workspace_bytes);

// Storage of a dense (unquantised) weight.
enum class DenseWeight : int { kF32 = 0, kBF16 = 1 };

// Same product for a BF16 or F32 weight W [out, in] row-major (router gate, head): fp32
// accumulation (order differs from Linear::forward: per-lane partial sums, then a warp tree).
// Needs 1 <= rows <= kGemvMaxRows, in % 8 == 0, x and w 16-byte aligned, y not aliasing x.
cudaError_t dense_gemv(const float* x, const void* w, DenseWeight format, float* y, int rows,
                       int64_t out, int64_t in, cudaStream_t stream);

// The BF16 product for many rows on the same tensor-core GEMM (the weight is already bf16).
// Any rows >= 0 (<= 65535·64), in % 32 == 0, x and w 16-byte aligned, y not aliasing x; workspace
// as fp8_block_gemm.
cudaError_t bf16_gemm(const float* x, const void* w, float* y, int64_t rows, int64_t out,
                      int64_t in, GemmX xp, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream);

// y[r, :] = x[r, :] · (mean(x[r, :]²) + eps)^-1/2 · w (w == nullptr: no weight). x, y [rows, n]
// fp32, may alias; w [n] fp32. The sum of squares is accumulated in fp64 like the CPU reference
// (model/rms_norm.hpp). Needs rows >= 0, n >= 1.
cudaError_t rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps,
                     cudaStream_t stream);

// ---- EXL3 (spec exl3-format.md §1–3; CPU reference libdsv41/src/exl3/) ----

// Codebook of one EXL3 tensor, same values as exl3::Codebook (0 = 3INST, 1 = MCG, 2 = MUL1).
enum class Exl3Codebook : int { k3Inst = 0, kMcg = 1, kMul1 = 2 };

// Ŵ fp16 bits [k, n] row-major (the inner, Hadamard-domain weight) from the trellis int16
// [k/16][n/16][16K] (C order), bit-exact with exl3::decode_inner. Needs k, n multiples of 16,
// K in 2..6, trellis 4-byte aligned.
cudaError_t exl3_decode(const uint8_t* trellis, uint16_t* w_hat, int64_t k, int64_t n, int K,
                        Exl3Codebook cb, cudaStream_t stream);

// One matrix of a batched EXL3 GEMV call (all device pointers). rows == 0 skips the matrix.
struct Exl3GemvMatrix {
  const uint8_t* trellis;  // int16 [k/16][n/16][16K], 16-byte aligned
  const uint16_t* suh;     // fp16 [k], 8-byte aligned
  const uint16_t* svh;     // fp16 [n], 8-byte aligned
  const float* x;          // fp32 [rows, k], 16-byte aligned
  float* y;                // fp32 [rows, n], 16-byte aligned, not aliasing x
  int rows;                // 0 .. kGemvMaxRows
};
inline constexpr int kExl3GemvMaxMatrices = 32;

// Workspace of exl3_gemv for this batch shape on the current device (k_splits as below): a
// counter per 128-column group followed by split-k partials. Zero it once after allocation
// (cudaMemset); every call leaves the counters at zero again. 0 = unsupported shape.
size_t exl3_gemv_workspace_bytes(int matrices, int64_t k, int64_t n, int k_splits = 0);

// For each matrix i < count: y = had128(had128(x ⊙ suh) · Ŵ) ⊙ svh (spec §1.1; no bias), Ŵ
// decoded on the fly from the trellis (K bits per weight, codebook cb), fp32 in and out. All
// matrices share k, n, K and cb (e.g. the gate and up projections of the routed experts of one
// step). `matrices` is a host array of `count` descriptors; k_splits = 0 picks the k split from
// the SM count, > 0 forces it (benchmarks). Needs 1 <= count <= kExl3GemvMaxMatrices, k and n
// multiples of 128 (<= 2^24), K in {2, 3, 5}, |xh| < 2^74, the alignments above, and a
// workspace of exl3_gemv_workspace_bytes(count, k, n, k_splits) bytes (16-byte aligned) used
// by no concurrent call. Accuracy: docs/kernels.md.
cudaError_t exl3_gemv(const Exl3GemvMatrix* matrices, int count, int64_t k, int64_t n, int K,
                      Exl3Codebook cb, int k_splits, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream);

}  // namespace dsv41::kernels
