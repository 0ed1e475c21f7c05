// Every launcher of kernels/ (device code, no framework): raw device pointers, sizes, a stream,
// and a workspace only where an op needs scratch (then `<op>_workspace_bytes()` sits beside it).
// Launchers never allocate, read the environment or log; they return cudaErrorInvalidValue for
// shapes or alignments they do not support, else the launch status. Layouts: row-major, spec
// model-architecture.md §1.4 for the weight formats. See docs/kernels.md.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dsv41::kernels {

// Most activation rows one quantised GEMV call takes (decode: 1 token + up to 15 drafts).
inline constexpr int kGemvMaxRows = 16;

// y[rows, out] = x[rows, in] · Wᵀ, fp32 in and out, fp32 accumulation.
//   w      F8_E4M3 [out, in] row-major (in bytes per row)
//   scale  F8_E8M0 [ceil(out/32), ceil(in/32)]: W[r, c] = e4m3(w[r, c]) · 2^(scale[r/32, c/32] -
//   127)
// Needs 1 <= rows <= kGemvMaxRows, in % 16 == 0, x and w 16-byte aligned, y not aliasing x.
cudaError_t fp8_block_gemv(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                           int rows, int64_t out, int64_t in, cudaStream_t stream);

// Same product for the released routed-expert format:
//   w      I8 [out, in/2], two E2M1 codes per byte, even column = low nibble
//   scale  F8_E8M0 [out, in/32]: W[r, c] = e2m1(code) · 2^(scale[r, c/32] - 127)
// Needs 1 <= rows <= kGemvMaxRows, in % 32 == 0, x and w 16-byte aligned, y not aliasing x.
cudaError_t fp4_expert_gemv(const float* x, const uint8_t* w, const uint8_t* scale, float* y,
                            int rows, int64_t out, int64_t in, cudaStream_t stream);

// y[r, :] = x[r, :] · (mean(x[r, :]²) + eps)^-1/2 · w (w == nullptr: no weight). x, y [rows, n]
// fp32, may alias; w [n] fp32. The sum of squares is accumulated in fp64 like the CPU reference
// (model/rms_norm.hpp). Needs rows >= 0, n >= 1.
cudaError_t rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps,
                     cudaStream_t stream);

}  // namespace dsv41::kernels
