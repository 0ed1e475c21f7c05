// Compressor of a KV-source layer (spec model-architecture.md §2.3): pools `ratio` consecutive
// tokens of the attention input into one 512-d latent (released sizes), carrying the open group
// across calls in CsaSourceState::pending_*.
//   ratio 1:  latent_t = norm_c(x_t·Wc_kvᵀ)
//   ratio r:  latent_j[c] = Σ_{t in group j} softmax_t(g_t[c])·kv_t[c] (fp32), then norm_c
// The indexer reads the pre-RoPE latents (indexer.hpp); append_compressed() then rotates them at
// position j·ratio (compress table) and FP4-quantises them (block 16, e4m3 scales, §2.7).
#pragma once

#include <cstdint>
#include <vector>

#include "model/linear.hpp"

namespace dsv41 {

class Checkpoint;
struct ModelConfig;
struct CsaSourceState;
class ThreadPool;

// Groups completed by one call: latents [n_groups, head_dim] for entries first_entry.. .
struct CompressedGroups {
  int64_t first_entry = 0;
  int64_t n_groups = 0;
  std::vector<float> latent;  // pre-RoPE, after compressor.norm
};

class Compressor {
 public:
  // `layers.{layer}.attn.compressor.{wkv, wgate (ratio > 1 only), norm}`.
  static Compressor bind(const Checkpoint& ck, const ModelConfig& cfg, int layer);

  int ratio() const { return ratio_; }
  // Read access for other backends (backend/cuda/forward): wgate_ is bound only for ratio > 1.
  const Linear& wkv() const { return wkv_; }
  const Linear& wgate() const { return wgate_; }
  const std::vector<float>& norm() const { return norm_; }
  float eps() const { return eps_; }
  // Consumes x [T, hidden] (tokens at st.next_pos()...), updates st.pending_*; returns the groups
  // this call completes (possibly none). Does not touch st.cache / st.n_entries; records the rows
  // in st.recent_* for rollback.
  CompressedGroups run(const float* x, int64_t T, CsaSourceState& st, ThreadPool* pool) const;

 private:
  int layer_ = -1;
  int ratio_ = 0;
  int64_t hidden_ = 0;
  int head_dim_ = 0;
  float eps_ = 0;
  Linear wkv_, wgate_;
  std::vector<float> norm_;
};

// §2.3 ratio > 1 pooling before the norm (the loop of Compressor::run, the spec of the CUDA
// kernel compressor_pool): for group j < n_groups and channel c, over rows r of the group,
//   latent[j, c] = Σ_r kv[j·ratio + r, c] · (exp(gate[.., c] - m) / Σ_r' exp(gate[.., c] - m)),
// m the group's max, r ascending, fp32. kv, gate [n_groups·ratio, D]; latent [n_groups, D].
void compressor_pool(const float* kv, const float* gate, int64_t n_groups, int ratio, int64_t D,
                     float* latent);

// Rotates g.latent entry k at position (first_entry+k)·ratio with `inv_freq` (rope slice = last
// rope_dim channels), FP4-quantises it and appends it packed to st.cache; bumps st.n_entries.
// prequant (optional, tests): receives the rotated entries before FP4 [n_groups, head_dim].
void append_compressed(const CompressedGroups& g, const float* inv_freq, int rope_dim,
                       CsaSourceState& st, std::vector<float>* prequant = nullptr);

}  // namespace dsv41
