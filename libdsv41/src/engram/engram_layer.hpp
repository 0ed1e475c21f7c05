// CPU reference of the Engram gating op (spec model-architecture.md §5.3), applied before the
// block of an Engram layer to all hc streams. Per position t (H[t] is [hc, D], fp32):
//   E = concat_j row(hash_ids[t][j])                         [n_cols * head_dim], dequantised
//   kv = W_kv . E                                            [(hc + 1) * D]
//   K_k = kv[k*D .. (k+1)*D), V = kv[hc*D .. (hc+1)*D)        (one key per stream, one value)
//   dot_k = sum_d H[k,d] * q_w[k,d]*k_w[k,d] * K_k[d] * rsqrt(mean H[k]^2 + eps)
//           * rsqrt(mean K_k^2 + eps) / sqrt(D)
//   gate_k = sigmoid(copysign(sqrt(max(|dot_k|, 1e-6)), dot_k)), 0 at image-span positions
//   H[k] += gate_k * V
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/thread_pool.hpp"
#include "loader/checkpoint.hpp"

namespace dsv41::engram {

struct EngramDims {
  int64_t hidden = 0;      // D (hidden_size)
  int64_t hc = 0;          // hc_mult
  int64_t head_dim = 0;    // engram_head_dim, a multiple of 32
  int64_t n_cols = 0;      // (engram_max_ngram_size - 1) * engram_n_heads
  int64_t table_rows = 0;  // engram_num_embeddings[layer]
};

// Views into the mmapped checkpoint (valid while it lives) plus the fp32 q_w * k_w product.
struct EngramWeights {
  EngramDims dims;
  const uint8_t* embed = nullptr;        // F8_E4M3 [table_rows, head_dim]
  const uint8_t* embed_scale = nullptr;  // F8_E8M0 [table_rows, head_dim / 32]
  const uint8_t* wkv = nullptr;          // F8_E4M3 [(hc + 1) * D, n_cols * head_dim]
  const uint8_t* wkv_scale = nullptr;    // F8_E8M0 [ceil((hc+1)*D / 32), ceil(n_cols*hd / 32)]
  std::vector<float> qk;                 // [hc, D]: fp32(q_weight) * fp32(k_weight)
};

// Reads `layers.{layer}.engram.{embed.weight, embed.scale, wkv.weight, wkv.scale, q_weight,
// k_weight}`; throws (naming checkpoint, tensor, expected vs found) on a missing tensor or a
// wrong dtype/shape.
EngramWeights load_engram_weights(const Checkpoint& ckpt, int64_t layer, const EngramDims& dims);

// The three steps of apply_engram for one position, exported as the executable spec of the CUDA
// kernels (kernels/include/dsv41k/engram.hpp). No argument checks: apply_engram checks them.
//   gather_rows: e [n_cols * head_dim] = the dequantised rows ids[0 .. n_cols) (exact fp32)
//   project_kv:  kv [(hc + 1) * D] = W_kv . e, fp64 sums per 32-column block, rounded once
//   apply_gate:  h [hc, D] += gate_k * V for every stream k (fp64 statistics, fp32 update);
//                qk [hc, D]; image: gate 0
void gather_rows(const EngramWeights& w, const int64_t* ids, float* e);
void project_kv(const EngramWeights& w, const float* e, float* kv);
void apply_gate(float* h, const float* kv, const float* qk, int64_t hidden, int64_t hc, bool image,
                float eps);

// Updates H [T, hc, D] in place. hash_ids: [T, n_cols] row ids of this layer (NgramHasher
// output slab); is_image: [T] or empty; eps = rms_norm_eps (released 1e-20). Threads over
// positions when `pool` is given. Throws kInvalidArgument naming the position and column of a
// row id outside [0, table_rows), or on mismatched sizes.
void apply_engram(const EngramWeights& w, std::span<float> H, std::span<const int64_t> hash_ids,
                  std::span<const uint8_t> is_image, int64_t n_tokens, float eps,
                  ThreadPool* pool = nullptr);

}  // namespace dsv41::engram
