// Sparse indexer of an index-source layer (spec model-architecture.md §2.4) and the two-level
// candidate top-k of the candidate source (§2.5).
//   keys (KV sources):  k_j = k_norm(latent_j·Wkᵀ), RoPE at j·ratio, FP4 block 32 (ue8m0)
//   queries:            qi = qr·Wi_qᵀ [index_n_heads, index_head_dim], RoPE at t, FP4 block 32
//   head weights:       w = (x·W_projᵀ)·index_n_heads^-0.5
//   score:              S(t, j) = Σ_h w_h·ReLU(<qi_h, k_j>)·index_head_dim^-0.5,
//                       -inf unless j < floor((t+1)/ratio)
#pragma once

#include <cstdint>
#include <vector>

#include "model/linear.hpp"

namespace dsv41 {

class Checkpoint;
struct ModelConfig;
struct CsaSourceState;
struct CompressedGroups;
class ThreadPool;

class Indexer {
 public:
  // `layers.{layer}.attn.indexer.{wq_b, weights_proj}` and, on KV sources, `{wk, k_norm}`.
  static Indexer bind(const Checkpoint& ck, const ModelConfig& cfg, int layer);

  bool owns_keys() const { return owns_keys_; }
  // Read access for other backends (backend/cuda/forward); wk_ / k_norm_ only on KV sources.
  int n_heads() const { return n_heads_; }
  int head_dim() const { return head_dim_; }
  int ratio() const { return ratio_; }
  float eps() const { return eps_; }
  const Linear& wq_b() const { return wq_b_; }
  const Linear& weights_proj() const { return weights_proj_; }
  const Linear& wk() const { return wk_; }
  const std::vector<float>& k_norm() const { return k_norm_; }
  // KV sources: appends the keys of the groups `g` (pre-RoPE latents) to st.cache, packed.
  // Call before append_compressed() (which bumps st.n_entries). prequant (optional, tests):
  // receives the rotated keys before FP4 [n_groups, index_head_dim].
  void append_keys(const CompressedGroups& g, const float* inv_freq, int rope_dim,
                   CsaSourceState& st, std::vector<float>* prequant = nullptr) const;
  // scores [T, keys.n_entries] for queries at pos0.. with normalised q latent qr [T, q_lora_rank]
  // and attention input x [T, hidden]; invisible entries are -inf.
  void score(const float* x, const float* qr, int64_t T, int64_t pos0, const float* inv_freq,
             int rope_dim, const CsaSourceState& keys, float* scores, ThreadPool* pool) const;

 private:
  int layer_ = -1;
  bool owns_keys_ = false;
  int n_heads_ = 0, head_dim_ = 0, ratio_ = 1;
  int64_t hidden_ = 0, q_lora_ = 0, latent_dim_ = 0;
  float eps_ = 0;
  Linear wq_b_, weights_proj_, wk_;
  std::vector<float> k_norm_;
};

// §2.4 scores from prepared queries (the scoring loop of Indexer::score, the spec of the CUDA
// kernel indexer_scores): q [T, H, D] post-RoPE FP4-index fake-quantised queries, w [T, H] raw
// weights_proj outputs (·H^-0.5 applied here, one fp32 product), keys [n, D] fp32 index keys,
// mask [T, n] or null (0 = -inf). S(t, j) = Σ_h (max(<q_h, k_j>, 0)·D^-0.5)·w_h·H^-0.5, h and
// c ascending, fp32; -inf unless j < floor((pos0 + t + 1) / ratio). scores [T, n].
void indexer_score_rows(const float* q, const float* w, const float* keys, const uint8_t* mask,
                        int64_t T, int H, int D, int64_t n, int64_t pos0, int ratio, float* scores,
                        ThreadPool* pool);

// Top min(k, n) entries of each score row; -inf picks dropped; out [T, k] ascending, -1 padded.
// Exact ties prefer the lower index (torch.topk on CPU keeps the first occurrence).
void select_topk(const float* scores, int64_t T, int64_t n, int k, int32_t* out);

// §2.5: block scores (max over block_size entries, -inf padded), the block of the query's newest
// visible entry floor((n_vis-1)/block_size) pinned to +inf (none when n_vis = 0), top
// min(topk_blocks, n_blocks) blocks with a finite-or-+inf score kept. n_vis[t] = floor((pos0+t+1)
// /ratio). mask [T, n] (1 = inside a kept block); block_scores [T, ceil(n/block_size)] or nullptr.
void select_candidate_blocks(const float* scores, int64_t T, int64_t n, int64_t pos0, int ratio,
                             int topk_blocks, int block_size, uint8_t* mask, float* block_scores);

}  // namespace dsv41
