// Transformer: the CPU reference forward pass of the DeepSeek-V4.1 text model
// (spec model-architecture.md §3 schedule): embed -> 4 hc streams -> per layer
// [Engram] -> attn site -> ffn site -> final collapse with the last ffn `pre`
// -> norm -> fp32 head. One call processes T new tokens at [state.pos,
// state.pos + T): one-shot prefill, chunked prefill and decode are all calls of
// forward(). Plain fp32 loops; matmuls and per-token loops split across a
// ThreadPool.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "config/model_config.hpp"
#include "core/thread_pool.hpp"
#include "engram/ngram_hash.hpp"
#include "exl3/expert_bank.hpp"
#include "exl3/expert_store.hpp"
#include "loader/checkpoint.hpp"
#include "model/mhc.hpp"
#include "model/model_weights.hpp"
#include "model/moe.hpp"
#include "model/sequence_state.hpp"
#include "model/shard_plan.hpp"

namespace dsv41 {

namespace parallel {
class TpComm;
}

// Every golden debug tensor of one layer for T tokens
// (tests/fixtures/golden/tiny40/README.md).
struct LayerTrace {
  std::vector<float> engram_out;  // [T, hc, D], Engram layers only: the
                                  // attention site's input H
  HcMixes mix_attn, mix_ffn;
  std::vector<float> attn_collapsed, attn_normed, attn_out;  // [T, D]
  std::vector<float> ffn_collapsed, ffn_normed, ffn_out;     // [T, D]
  Routing routing;
  AttentionTrace attention;  // index sources: indexer scores (+ candidate block scores)
};

class Transformer {
 public:
  // Opens DIR (config.json, the sharded checkpoint, tokenizer.json when the
  // model has Engram layers), validates the config, binds every tensor and runs
  // the load-time checks (Engram table rows = sum of primes, token-map size =
  // engram_compressed_vocab_size). threads 0 = all cores. Throws
  // detail::Failure naming the file / key / tensor.
  //
  // A Spark checkpoint (DIR/exl3/plan/ exists) takes its routed experts from the EXL3 banks the
  // plan selects (decoded on the fly, spec exl3-format.md §4) and the rest from the release FP4
  // tensors; `exl3_plan` picks the plan when there are several (exl3::find_plan_file). Plan/bank
  // errors name the plan, the bank file or the tensor.
  //
  // comm (optional, must outlive the model): tensor parallelism (docs/tp.md). With world W > 1
  // this rank binds only its ShardPlan shard, all-reduces the attention and FFN outputs of
  // every layer and all-gathers the logits; every rank must make the same forward() calls
  // with the same inputs, in the same order, and gets the same logits.
  //
  // dspark: also bind the DSpark draft module `mtp.*` (§6); every forward() then writes the
  // sequence's DSpark context (model/dspark/dspark_context.hpp). Under tensor parallelism the
  // stages are sharded like the backbone layers (model/dspark/dspark_drafter.hpp).
  static std::unique_ptr<Transformer> load(const std::string& dir, size_t threads,
                                           parallel::TpComm* comm = nullptr,
                                           const std::string& exl3_plan = "", bool dspark = false);

  const ModelConfig& config() const { return cfg_; }
  const Checkpoint& checkpoint() const { return *ck_; }
  const ModelWeights& weights() const { return *w_; }
  const ShardPlan& plan() const { return w_->plan; }
  // The communicator given to load() (null at world 1): the CUDA forward of a tensor-parallel
  // rank runs its collectives over it too.
  parallel::TpComm* comm() const { return comm_; }
  const engram::NgramHasher* hasher() const { return hasher_.get(); }
  // The EXL3 banks in use, nullptr for a release checkpoint.
  const exl3::ExpertBank* expert_bank() const { return bank_.get(); }
  ThreadPool& pool() const { return *pool_; }
  int hc() const { return shape_.hc; }
  int64_t dim() const { return shape_.dim; }
  const HcShape& hc_shape() const { return shape_; }

  // opts.pool: the KV byte budget shared with other sequences (null = private, unbounded).
  // Under tensor parallelism both ranks must call forward() in lockstep: the runtime's rank 0
  // mirrors its backend calls to the follower (runtime/mirrored_backend.hpp).
  SequenceState new_sequence(StateOptions opts = {}) const;
  // Routed experts through `p` (must outlive the model); nullptr restores the
  // load-time default (checkpoint or EXL3 banks).
  void set_expert_provider(const ExpertProvider* p) { experts_ = p ? p : default_experts_.get(); }
  // The routed-expert provider in use (the checkpoint's, the EXL3 banks', or the one set above).
  const ExpertProvider& expert_provider() const { return *experts_; }

  // logits [T, vocab] (fp32) of the T tokens `ids` appended at state.pos;
  // image_flags [T] or empty (image-span positions: bias_vl routing, Engram dead). Advances
  // state.pos by T. image_embeds (§7.4 step 4): empty, or [n_flagged, D] input embeddings that
  // replace the token embedding at the flagged positions, in order (vision::VisionTower::span
  // rows); kInvalidArgument naming both counts when the sizes disagree.
  std::vector<float> forward(SequenceState& st, std::span<const int32_t> ids,
                             std::span<const uint8_t> image_flags = {},
                             std::span<const float> image_embeds = {}) const;

  // Engram hash row ids of positions [t0, t1) of the state's history:
  // [n_engram, t1-t0, cols].
  std::vector<int64_t> engram_ids(const SequenceState& st, int64_t t0, int64_t t1) const;

  // ONE decoder layer on T tokens at [pos0, pos0 + T): H [T, hc, D] in/out
  // (residual entering the layer -> leaving it), pre [T, hc] in/out (previous
  // site's pre -> this layer's ffn pre). hash_ids [T, cols] of this layer
  // (Engram layers), image_flags [T] or null. Attention reads and grows st.attn
  // and sel (see attention_layer.hpp). trace (optional) records every tensor.
  // tap (optional, §6.2): after Engram, the mean over the hc streams of rows [tap->t0, T) of
  // the residual entering the attention site goes to tap->feat[t - t0, k·D .. (k+1)·D).
  struct DsparkTap {
    float* feat;  // [T - t0, n_taps·D]
    int64_t n_taps;
    int64_t k;  // this layer's index in dspark_target_layer_ids
    int64_t t0;
  };
  void run_layer(int layer, int64_t T, int64_t pos0, float* H, std::vector<float>& pre,
                 const int64_t* hash_ids, const uint8_t* image_flags, SequenceState& st,
                 StepSelections& sel, LayerTrace* trace, const DsparkTap* tap = nullptr) const;

  // logits [T, V] = head(norm(collapse(H, pre))).
  std::vector<float> head(const float* H, const std::vector<float>& pre, int64_t T) const;
  // logits [T, V] = head(xn) of normed rows xn [T, D]; under tensor parallelism each rank
  // computes its vocabulary rows and the ranks all-gather them (every rank gets all of them).
  std::vector<float> head_logits(const float* xn, int64_t T) const;
  // The one reduction point of a sub-layer: y [n] summed over the ranks (no-op at world 1).
  // Throws the TpComm's Status naming the layer and site.
  void all_reduce(float* y, int64_t n, int layer, const char* site) const;

 private:
  Transformer() = default;
  void engram(int layer, int64_t T, float* H, const int64_t* hash_ids,
              const uint8_t* image_flags) const;
  // §6.2: the DSpark context rows of positions [pos0 + t0, pos0 + T) from the target features
  // feat [T - t0, n_taps·D].
  void write_dspark_context(SequenceState& st, const float* feat, int64_t T, int64_t t0,
                            int64_t pos0) const;

  ModelConfig cfg_;
  std::unique_ptr<Checkpoint> ck_;
  std::unique_ptr<ModelWeights> w_;
  std::unique_ptr<engram::NgramHasher> hasher_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<exl3::ExpertBank> bank_;
  std::unique_ptr<exl3::ExpertStore> store_;  // bank + native FP4, per projection
  std::unique_ptr<ExpertProvider> default_experts_;
  parallel::TpComm* comm_ = nullptr;  // null or world 1: no collectives
  const ExpertProvider* experts_ = nullptr;
  HcShape shape_;
  MoeShape moe_;
  std::vector<int> engram_slot_;  // layer -> index in engram_layer_ids, -1 if none
};

// The image inputs of a forward call (shared by the CPU and CUDA forwards): flags [T] or empty,
// embeds empty or [n_flagged, D]. Throws kInvalidArgument naming both counts.
void check_image_inputs(std::span<const uint8_t> image_flags, std::span<const float> image_embeds,
                        int64_t T, int64_t D);

}  // namespace dsv41
