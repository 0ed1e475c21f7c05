// SequenceState: everything one sequence carries between forward calls (spec
// model-architecture.md §2.6): the attention state of every layer / KV source,
// the token history and image-span flags that the Engram n-gram hash looks back
// over (§5.2), and the position.
#pragma once

#include <cstdint>
#include <vector>

#include "model/attention/attention_state.hpp"
#include "model/dspark/dspark_context.hpp"

namespace dsv41 {

struct ModelConfig;

struct SequenceState {
  AttentionSequenceState attn;
  std::vector<int32_t> tokens;       // [pos]: every token fed so far
  std::vector<uint8_t> image_flags;  // [pos]: 1 = image-span position (Engram DEAD, bias_vl)
  int64_t pos = 0;                   // absolute position of the next token
  DsparkContext dspark;              // models loaded with DSpark only (Transformer::new_sequence)

  // cfg must be validated; opts.pool shares a KV byte budget (null = private, unbounded).
  void init(const ModelConfig& cfg, StateOptions opts = {});
  void reset();
  // Undoes the last n positions (attention state, token history): see
  // AttentionSequenceState::rollback.
  void rollback(int64_t n);
};

}  // namespace dsv41
