// Launchers of the vision tower's element-wise ops and attention (spec model-architecture.md
// §7.3-7.4), mirroring the CPU reference (libdsv41/src/vision/vision_tower.cpp,
// vision_attention.cpp, vision_rope.cpp, patch_merge.cpp): raw device pointers, sizes, a stream;
// no allocation, no workspace. Invalid arguments return cudaErrorInvalidValue before anything is
// launched, else cudaGetLastError() after the launch. Row-major fp32. See docs/kernels.md.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dsv41::kernels {

// y[t, i] += b[i] for y [rows, n] (the patch-embed and wqkv biases; add_bias).
cudaError_t vision_add_bias(float* y, const float* b, int64_t rows, int64_t n, cudaStream_t stream);

// x[t, i] = x[t, i] + (y[t, i] + b[i]) for x, y [rows, n]; b null: x[t, i] + y[t, i] (the
// residual adds of a block, after wo + bias and after w2).
cudaError_t vision_residual_add(float* x, const float* y, const float* b, int64_t rows, int64_t n,
                                cudaStream_t stream);

// 2-D RoPE of q and k in place (apply_vision_rope on every head of both):
//   qkv  [n, 3, heads, head_dim] (q | k | v per token; v untouched)
//   cos_t, sin_t  [n, head_dim / 2]: cos / sin of the angle table (vision_rope_angles), computed
//                 on the host with the reference's std::cos / std::sin so both use the same bits
// x[i], x[i + half] -> x[i]·c - x[i + half]·s, x[i + half]·c + x[i]·s (unfused products).
// Needs head_dim even, heads >= 1, n >= 0.
cudaError_t vision_rope(float* qkv, const float* cos_t, const float* sin_t, int64_t n, int heads,
                        int head_dim, cudaStream_t stream);

// act[t, i] = silu(gu[t, i]) · gu[t, inter + i], silu(x) = x / (1 + e^-x); gu [rows, 2·inter].
cudaError_t vision_silu_mul(const float* gu, float* act, int64_t rows, int64_t inter,
                            cudaStream_t stream);

// h = 0.5·h·(1 + erf(h / √2)) in place over `count` values (the aligner's exact GELU).
cudaError_t vision_gelu(float* h, int64_t count, cudaStream_t stream);

// The r×r patch merge (merge_patches): x [vit_h·vit_w, C] -> out [ceil(vit_h/r)·ceil(vit_w/r),
// C·r²] with out[cell, (c·r + dy)·r + dx] = x[(r·bi + dy)·vit_w + r·bj + dx, c], 0 outside the
// grid.
cudaError_t vision_merge(const float* x, float* out, int vit_h, int vit_w, int64_t C, int r,
                         cudaStream_t stream);

// Full bidirectional attention of every head over all n tokens (full_attention):
//   qkv  [n, 3, heads, head_dim] after RoPE;  out [n, heads, head_dim]
//   out[i, h] = Σ_j softmax_j(q_i·k_j / √head_dim) v_j, fp32, one pass with a running max
//   (the reference takes the max first: the same sums up to fp32 rounding).
// head_dim 16, 32 or 64 (the released 1024 / 16 heads = 64); n >= 0, heads >= 1.
cudaError_t vision_attention(const float* qkv, float* out, int64_t n, int heads, int head_dim,
                             cudaStream_t stream);

}  // namespace dsv41::kernels
