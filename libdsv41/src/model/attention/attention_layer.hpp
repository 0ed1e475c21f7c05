// One attention sublayer of the CPU reference (spec model-architecture.md §2.2-2.6), over a
// chunk of T new tokens at absolute positions [pos0, pos0+T): prefill, chunked prefill and decode
// are the same call and give the same numbers.
//
// Call sequence (per sequence, per forward call of T tokens):
//   RopeTables rope = RopeTables::from_config(cfg.text);              // once per model
//   std::vector<AttentionLayer> attn;                                  // once per model
//   for l: attn.push_back(AttentionLayer::bind(ck, cfg, l, rope));
//   AttentionSequenceState st; st.init(cfg);                           // once per sequence
//   StepSelections sel;                                                // every forward call:
//   sel.clear();
//   for l in 0..L-1 (in order; layer l reads what index/KV sources < l published this call):
//     attn[l].forward(x_l /*attn_norm output [T, hidden]*/, T, pos0, st, sel, out_l, pool);
//
// Roles (cfg.roles[l]): Swa = window only. Full = own compressor + indexer, publishes
// sel.index[l] (+ sel.candidates[l] at the candidate source) and grows st.source[l]. Reuse =
// st.source[kv_layer] with sel.index[index_layer]. Reindex = own queries over
// st.source[kv_layer] index keys restricted to sel.candidates[candidate_layer]; publishes
// sel.index[l].
#pragma once

#include <cstdint>
#include <vector>

#include "config/model_config.hpp"
#include "model/attention/attention_state.hpp"
#include "model/attention/compressor.hpp"
#include "model/attention/indexer.hpp"
#include "model/attention/rope.hpp"
#include "model/linear.hpp"
#include "model/shard_plan.hpp"

namespace dsv41 {

class Checkpoint;
class ThreadPool;

class AttentionLayer {
 public:
  // Binds `layers.{layer}.attn.{wq_a, q_norm, wq_b, wkv, kv_norm, wo_a, wo_b, attn_sink}` and
  // the compressor / indexer tensors of the layer's role. `rope` must outlive the layer.
  // plan (optional, docs/tp.md): a tensor-parallel rank keeps only its output groups and their
  // query heads (wq_b rows, attn_sink, wo_a rows, wo_b columns); forward() then returns this
  // rank's partial sum of the output, to be all-reduced. Null = the whole layer.
  static AttentionLayer bind(const Checkpoint& ck, const ModelConfig& cfg, int layer,
                             const RopeTables& rope, const ShardPlan* plan = nullptr);
  // The same for tensors under `prefix` ("mtp.0.attn.") with an explicit role (a DSpark stage:
  // window only, ratio 0, main RoPE; spec §6.1), sharded by `plan` as bind() does.
  static AttentionLayer bind_named(const Checkpoint& ck, const ModelConfig& cfg,
                                   const std::string& prefix, const LayerRole& role,
                                   const RopeTables& rope, const ShardPlan* plan = nullptr);

  const LayerRole& role() const { return role_; }

  // Read access for backends that run this layer on other hardware
  // (backend/cuda/forward/device_attention.hpp); same meaning as the members below.
  int local_heads() const { return local_heads_; }
  int local_groups() const { return local_groups_; }
  bool sharded() const { return local_heads_ != n_heads_; }
  int head_dim() const { return head_dim_; }
  int rope_dim() const { return rope_dim_; }
  int q_lora() const { return q_lora_; }
  int o_groups() const { return o_groups_; }
  int o_lora() const { return o_lora_; }
  int window() const { return window_; }
  int index_topk() const { return index_topk_; }
  int candidate_blocks() const { return cand_blocks_; }
  int candidate_block_size() const { return cand_block_size_; }
  int candidate_layer() const { return candidate_layer_; }
  bool uses_candidates() const { return uses_candidates_; }
  bool has_compressor() const { return has_compressor_; }
  bool has_indexer() const { return has_indexer_; }
  float eps() const { return eps_; }
  const float* inv_freq() const { return inv_freq_; }
  const float* inv_freq_compress() const { return inv_freq_compress_; }
  const Linear& wq_a() const { return wq_a_; }
  const Linear& wq_b() const { return wq_b_; }
  const Linear& wkv() const { return wkv_; }
  const Linear& wo_a() const { return wo_a_; }
  const Linear& wo_b() const { return wo_b_; }
  const std::vector<float>& q_norm() const { return q_norm_; }
  const std::vector<float>& kv_norm() const { return kv_norm_; }
  const std::vector<float>& sink() const { return sink_; }
  const Compressor& compressor() const { return compressor_; }
  const Indexer& indexer() const { return indexer_; }

  // x: attention input (attn_norm output) [T, hidden]; out: [T, hidden] (a sharded layer: the
  // partial sum over its heads' groups). Requires
  // pos0 == st.window[layer].next_pos (and, on KV sources, == st.source[layer].next_pos()).
  // trace (optional): index scores / candidate block scores of an index source.
  void forward(const float* x, int64_t T, int64_t pos0, AttentionSequenceState& st,
               StepSelections& sel, float* out, ThreadPool* pool,
               AttentionTrace* trace = nullptr) const;

 private:
  static AttentionLayer bind_role(const Checkpoint& ck, const ModelConfig& cfg,
                                  const std::string& prefix, const LayerRole& role,
                                  const RopeTables& rope, const ShardPlan* plan);
  // The compressed branch: fills sel (index sources) and returns the selection used.
  const IndexSelection* compressed_branch(const float* x, const float* qr, int64_t T, int64_t pos0,
                                          AttentionSequenceState& st, StepSelections& sel,
                                          ThreadPool* pool, AttentionTrace* trace) const;

  LayerRole role_;
  int64_t hidden_ = 0;
  int n_heads_ = 0, head_dim_ = 0, rope_dim_ = 0, q_lora_ = 0;
  int o_groups_ = 0, o_lora_ = 0, window_ = 0;
  // The shard this layer holds (ShardPlan): heads [head0_, head0_ + local_heads_) and output
  // groups [group0_, group0_ + local_groups_); the whole layer unless tensor-parallel.
  int head0_ = 0, local_heads_ = 0, group0_ = 0, local_groups_ = 0;
  int index_topk_ = 0, cand_blocks_ = 0, cand_block_size_ = 0;
  float eps_ = 0;
  const float* inv_freq_ = nullptr;           // this layer's q/k table (main or compress)
  const float* inv_freq_compress_ = nullptr;  // compressor / indexer table
  Linear wq_a_, wq_b_, wkv_, wo_a_, wo_b_;
  std::vector<float> q_norm_, kv_norm_, sink_;
  bool has_compressor_ = false, has_indexer_ = false;
  bool uses_candidates_ = false;  // index source after the candidate source (HF uses_candidates)
  int candidate_layer_ = -1;
  Compressor compressor_;
  Indexer indexer_;
};

}  // namespace dsv41
