// Launchers of the compressed-sparse-attention ops that feed window_sparse_attention (spec
// model-architecture.md §2.3-2.5), mirroring the CPU reference model/attention/compressor.cpp and
// indexer.cpp: raw device pointers, sizes, a stream; no allocation, no workspace. Invalid
// arguments return cudaErrorInvalidValue before anything is launched, else cudaGetLastError()
// after the launch. Layouts row-major, fp32 activations. See docs/kernels.md.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dsv41::kernels {

// §2.3 ratio > 1 pooling (= dsv41::compressor_pool, the loop of Compressor::run before its
// norm): for every group j and channel c, over the group's rows r = j·ratio .. j·ratio+ratio-1,
//   latent[j, c] = Σ_r kv[r, c] · (exp(gate[r, c] - m) / Σ_r' exp(gate[r', c] - m)),
//   m = max_r gate[r, c]; r ascending, fp32, the weight divided before the product.
//   kv, gate  [n_groups·ratio, D] fp32 (the open group's buffered rows first, then this call's)
//   latent    [n_groups, D] fp32, must not alias kv or gate
// Needs n_groups >= 0, 2 <= ratio <= 128, D >= 1, non-null pointers.
cudaError_t compressor_pool(const float* kv, const float* gate, float* latent, int64_t n_groups,
                            int ratio, int64_t D, cudaStream_t stream);

// §2.4 index scores (= the scoring loop of dsv41::Indexer::score after its projections):
//   q       [T, heads, D] fp32 post-RoPE queries, already FP4-index fake-quantised
//           (kv_quantize(kIndexFp4, ..., rows = T·heads, dim = D))
//   w       [T, heads] fp32 = x·weights_projᵀ (the kernel applies ·heads^-0.5 itself, one fp32
//           product, as the reference)
//   keys    [n, kv_packed_bytes(kIndexFp4, D)] packed index keys of the KV source (contiguous)
//   mask    [T, n] uint8 or null: 0 = outside the candidate blocks (score -inf)
//   scores  [T, n] fp32: S(t, j) = Σ_h (max(<q_h, k_j>, 0)·D^-0.5)·w_h·heads^-0.5 with h and c
//           ascending in fp32, -inf unless j < floor((pos0 + t + 1) / ratio) and mask != 0
// Needs 0 <= T <= 65535, 0 <= n <= 2^31, heads >= 1, D in {32, 64, 128, 256} (the key is held in
// registers; released 128, tiny 64), heads·D + heads <= 12288 (q and w in 48 KB of shared
// memory; released 32·128), pos0 >= 0, ratio >= 1, q/w/scores non-null, keys non-null when n > 0.
cudaError_t indexer_scores(const float* q, const float* w, const uint8_t* keys,
                           const uint8_t* mask, float* scores, int64_t T, int heads, int D,
                           int64_t n, int64_t pos0, int ratio, cudaStream_t stream);

// §2.5 candidate blocks (= dsv41::select_candidate_blocks): block score = max over the block's
// entries (-inf past n), the block of the newest visible entry floor((n_vis - 1)/block_size)
// pinned to +inf (none when n_vis = floor((pos0+t+1)/ratio) = 0), the top min(topk_blocks,
// n_blocks) blocks by (score descending, lower block first on ties) with a score > -inf kept.
//   scores        [T, n] fp32 (indexer_scores of the candidate source, no NaN)
//   mask          [T, n] uint8: 1 inside a kept block, else 0
//   block_scores  [T, ceil(n / block_size)] fp32 or null
// Needs 0 <= T, n <= INT32_MAX, block_size >= 1, topk_blocks >= 1, ratio >= 1, pos0 >= 0, mask
// and scores non-null when T·n > 0. Exact (radix select over the block scores, one block per row).
cudaError_t candidate_blocks(const float* scores, int64_t T, int64_t n, int64_t pos0, int ratio,
                             int topk_blocks, int block_size, uint8_t* mask, float* block_scores,
                             cudaStream_t stream);

}  // namespace dsv41::kernels
