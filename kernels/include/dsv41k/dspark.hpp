// Launchers of the DSpark draft module's own steps (spec model-architecture.md §6), each judged
// against its CPU reference in model/dspark/dspark_ops.hpp (tests/kernel/test_dspark_kernels.cpp).
// The stages' projections, norms, mHC sites and MoE are the backbone's kernels. Raw device
// pointers, sizes, a stream; no allocation. Every launcher returns cudaErrorInvalidValue before
// launching anything when an argument is outside its preconditions, else cudaGetLastError().
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dsv41::kernels {

// §6.2 target feature of one tap (= dsv41::hc_stream_mean, bit for bit):
//   out[t, :] = (Σ_j H[t, j, :]) / hc          H [T, hc, D]; out rows out_stride floats apart
// Needs T >= 0, 1 <= hc <= 8, D >= 1, out_stride >= D, non-null pointers.
cudaError_t hc_stream_mean(const float* H, int64_t T, int hc, int64_t D, float* out,
                           int64_t out_stride, cudaStream_t stream);

// Largest context + block keys of one dspark_block_attention call (its scores sit in shared
// memory: 8 K keys = 32 KB).
inline constexpr int64_t kDsparkMaxKeys = 8192;

// §6.3 block attention core of one stage (= dsv41::dspark_attend on the unpacked rows): query t of
// the K-row block attends to the n_ctx context rows at positions [first, first + n_ctx) then to
// all K block rows, one softmax with the sink, then the inverse RoPE at position pos0 + t.
//   q        [K, heads, head_dim] fp32 post-RoPE queries
//   ctx      [capacity, kv_packed_bytes(kWindowFp8, head_dim)] packed FP8 context ring, position p
//            in slot p % capacity; may be null when n_ctx == 0
//   block    [K, kv_packed_bytes(kWindowFp8, head_dim)] the block's packed FP8 K=V rows
//   sink [heads], inv_freq [rope_dim / 2], o [K, heads, head_dim] fp32
//   scale    the score factor (the reference's 1 / sqrt(fp32(head_dim)))
// Scores are fp32 dot products summed in another order than the reference (rounding-level
// differences); the softmax weights and the weighted sum follow its op sequence. Needs K >= 1,
// heads >= 1, head_dim a multiple of 32 in [32, 1024], rope_dim even in [2, head_dim], n_ctx >= 0,
// first >= 0, n_ctx + K <= kDsparkMaxKeys, capacity >= n_ctx (>= 1 with a context), non-null
// pointers (ctx aside), o not aliasing the inputs.
cudaError_t dspark_block_attention(const float* q, const uint8_t* ctx, int64_t capacity,
                                   int64_t first, int64_t n_ctx, const uint8_t* block,
                                   const float* sink, const float* inv_freq, float* o, int64_t K,
                                   int heads, int head_dim, int rope_dim, int64_t pos0, float scale,
                                   cudaStream_t stream);

// §6.3 one Markov step k of the draft chain, in one block:
//   ids[k + 1] = argmax_v u[v] + markov[v]   (= dsv41::dspark_markov_pick: the first maximum,
//                                              NaN never picked, 0 when nothing beats -inf)
//   conf[k]    = sigmoid(w · [h ; e])          (= dsv41::dspark_confidence, z summed in another
//                                              order)
//   u, markov [V]; h [D]; e [R]; w [D + R]; ids [k + 2] int32; conf [k + 1]
// Needs V in [1, 2^31), D >= 1, R >= 1, k >= 0, non-null pointers.
cudaError_t dspark_markov_step(const float* u, const float* markov, const float* h, const float* e,
                               const float* w, int64_t V, int64_t D, int64_t R, int k, int32_t* ids,
                               float* conf, cudaStream_t stream);

}  // namespace dsv41::kernels
