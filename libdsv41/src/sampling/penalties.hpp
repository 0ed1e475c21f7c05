// The token history of one sequence and the three penalties computed from it (vLLM
// `apply_penalties`, vllm/model_executor/layers/utils.py; OpenAI presence/frequency semantics).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace dsv41::sampling {

class TokenHistory {
 public:
  explicit TokenHistory(int64_t vocab_size) : vocab_size_(vocab_size) {}

  // Replaces the prompt. Throws kInvalidArgument naming the first position whose id is outside
  // [0, vocab_size); the previous prompt is kept then.
  void set_prompt(std::span<const int32_t> prompt);
  // Counts one generated token. Throws kInvalidArgument for an id outside [0, vocab_size).
  void accept(int32_t token);

  // Distinct prompt ids, ascending.
  const std::vector<int32_t>& prompt_ids() const { return prompt_ids_; }
  // Generated id -> number of occurrences (> 0).
  const std::unordered_map<int32_t, int64_t>& output_counts() const { return output_counts_; }
  bool in_prompt(int32_t id) const;
  int64_t num_generated() const { return num_generated_; }

 private:
  int64_t vocab_size_;
  std::vector<int32_t> prompt_ids_;
  std::unordered_map<int32_t, int64_t> output_counts_;
  int64_t num_generated_ = 0;
};

// In place on logits[vocab_size], in vLLM's order:
//   repetition: for t in prompt ∪ generated: logit > 0 ? logit / r : logit * r
//   frequency:  for t in generated: logit -= f * count(t)
//   presence:   for t in generated: logit -= p
// Cost O(distinct tokens in the history), not O(vocab). -inf stays -inf.
void apply_penalties(std::span<float> logits, const TokenHistory& history, float repetition,
                     float frequency, float presence);

}  // namespace dsv41::sampling
