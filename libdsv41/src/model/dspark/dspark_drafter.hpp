// DSpark draft production, one round (spec model-architecture.md §6.3): a block of K =
// dspark_block_size slots at positions [st.pos, st.pos + K) — slot 0 = embed(next), the others
// embed(dspark_noise_token_id) — runs through the S stages, whose queries attend to the stage's
// DSpark context (the last sliding_window committed positions, dspark_context.hpp) and to all K
// block keys (no causal mask inside the block); the final collapse, mtp.{S-1}.norm and the
// target's head give the base logits U_k; the Markov head then chains the draft tokens
//   id_0 = next, logits_k = U_k + M_h · M_e[id_k], id_{k+1} = argmax logits_k   (k = 0..K-1)
// and the confidence head gives c_k = sigmoid(w_c · [h_k ; M_e[id_k]]), the predicted probability
// that id_{k+1} is accepted once its prefix is. Plain fp32 loops: the executable spec.
// Under tensor parallelism (docs/tp.md "DSpark") each rank runs its shard of every stage (its
// attention heads and output groups, its routed experts, its shared-expert slice), the stage's
// attention and FFN outputs are all-reduced as a backbone layer's, and the base logits are
// all-gathered over the vocabulary shards; the Markov and confidence heads are replicated, so
// every rank chains the same drafts. Every rank must call draft() in lockstep.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/moe.hpp"
#include "model/sequence_state.hpp"

namespace dsv41 {

class Transformer;
struct DsparkStage;

struct DsparkProposal {
  std::vector<int32_t> tokens;     // id_1 .. id_K
  std::vector<float> confidence;   // c_0 .. c_{K-1}
  std::vector<float> base_logits;  // U [K, V] (before the Markov term)
  std::vector<float> hidden;       // h [K, D]: the collapsed block output
};

class DsparkDrafter {
 public:
  // t must have been loaded with DSpark (Transformer::load(..., dspark = true)) and outlive this.
  explicit DsparkDrafter(const Transformer& t);
  ~DsparkDrafter();

  // One round after `next` (the pending token, not yet in st). st must hold the DSpark context
  // of its last min(pos, sliding_window) positions (written by Transformer::forward); kInternal
  // otherwise. kInvalidArgument for next outside the vocabulary.
  DsparkProposal draft(const SequenceState& st, int32_t next) const;
  // The same round with explicit slot tokens [K] (slot 0 is the Markov chain's id_0); draft()
  // passes [next, noise, ..., noise]. Exposed for tests of the block's attention pattern.
  DsparkProposal draft_block(const SequenceState& st, std::span<const int32_t> slots) const;

  int block_size() const { return block_; }

 private:
  // One stage's attention sublayer on the block's normed inputs xn [K, hidden] -> out [K, hidden].
  void block_attention(const DsparkStage& stage, int s, const float* xn, int64_t pos0,
                       const SequenceState& st, float* out) const;

  const Transformer& t_;
  int block_ = 0;
  MoeShape moe_;
  std::unique_ptr<ExpertProvider> experts_;  // the stages' routed experts, layer = stage
};

}  // namespace dsv41
