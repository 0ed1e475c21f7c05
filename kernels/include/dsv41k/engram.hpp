// Launchers of the token-input ops (spec model-architecture.md §3 embedding, §5.3 Engram),
// mirroring the CPU reference (ModelWeights::embed_row, engram/engram_layer.cpp): raw device
// pointers, sizes, a stream; no allocation, no workspace. Invalid arguments return
// cudaErrorInvalidValue before anything is launched, else cudaGetLastError() after the launch.
// Layouts row-major, fp32 activations. See docs/kernels.md.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dsv41::kernels {

// §3: every one of the hc streams starts as the token's embedding row.
//   ids    [T] int32 (device), each in [0, vocab): an id outside gives NaN rows
//   table  BF16 bits [vocab, D] (embed.weight)
//   H      [T, hc, D] fp32: H[t, k, :] = fp32(table[ids[t], :]) for every k
// Needs T >= 0, 1 <= hc <= 8, D >= 1, vocab >= 1, non-null pointers.
cudaError_t embed_rows(const int32_t* ids, const uint16_t* table, float* H, int64_t T, int hc,
                       int64_t D, int64_t vocab, cudaStream_t stream);

// §7.4: embed_rows where image-span positions take their image embedding instead of the table
// row (CPU reference: the copy of image_embeds in Transformer::forward), bit-exact copies.
//   flags       [T] uint8 (device): non-zero = image-span position
//   image_rows  [T, D] fp32 (device), dense: row t is read only where flags[t] != 0
// Other arguments and checks as embed_rows; flags and image_rows must be non-null.
cudaError_t embed_rows_with_images(const int32_t* ids, const uint16_t* table, const uint8_t* flags,
                                   const float* image_rows, float* H, int64_t T, int hc, int64_t D,
                                   int64_t vocab, cudaStream_t stream);

// §5.3 row gather: E[t, j·head_dim + c] = e4m3(table[ids[t, j], c]) · 2^(scale[ids[t, j], c/32]
// - 127), exact.
//   ids          [T, n_cols] int64 (device) in [0, table_rows): an id outside gives NaN rows
//                (the host checks ids before the launch, as apply_engram does)
//   table        F8_E4M3 [table_rows, head_dim], table_scale F8_E8M0 [table_rows, head_dim/32]:
//                any memory the device can read (device memory, or mapped/unified host memory
//                for a table that stays on the host)
//   E            [T, n_cols·head_dim] fp32
// Needs T >= 0, n_cols >= 1, head_dim a positive multiple of 32, table_rows >= 1, non-null
// pointers.
cudaError_t engram_gather(const int64_t* ids, const uint8_t* table, const uint8_t* table_scale,
                          float* E, int64_t T, int n_cols, int head_dim, int64_t table_rows,
                          cudaStream_t stream);

// §5.3 gate and residual update on precomputed kv = W_kv·E (the caller's fp8_block_gemv):
//   H     [T, hc, D] fp32, in place: H[t, k] += gate_k · V
//   kv    [T, (hc + 1)·D] fp32: K_k = kv[t, k·D ..], V = kv[t, hc·D ..]
//   qk    [hc, D] fp32 = q_weight·k_weight (EngramWeights::qk)
//   image_flags [T] uint8 or null: gate 0 at image positions
//   dot_k = Σ_d H[k,d]·qk[k,d]·K_k[d] · rsqrt(mean H[k]² + eps) · rsqrt(mean K_k² + eps) / sqrt(D),
//   gate_k = sigmoid(copysign(sqrt(max(|dot_k|, 1e-6)), dot_k)); sums in fp64 as the reference.
// Needs T >= 0, 1 <= hc <= 8, D >= 1, H/kv/qk non-null, kv not aliasing H.
cudaError_t engram_gate(float* H, const float* kv, const float* qk, const uint8_t* image_flags,
                        int64_t T, int hc, int64_t D, float eps, cudaStream_t stream);

}  // namespace dsv41::kernels
