// Repetition / frequency / presence penalties over a TokenHistory (see penalties.hpp).
#include "sampling/penalties.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace dsv41::sampling {

void TokenHistory::set_prompt(std::span<const int32_t> prompt) {
  std::vector<int32_t> ids(prompt.begin(), prompt.end());
  for (size_t i = 0; i < ids.size(); ++i) {
    DSV41_CHECK(ids[i] >= 0 && ids[i] < vocab_size_, kInvalidArgument,
                "prompt token [{}] = {} is outside the vocabulary [0, {})", i, ids[i], vocab_size_);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  prompt_ids_ = std::move(ids);
}

void TokenHistory::accept(int32_t token) {
  DSV41_CHECK(token >= 0 && token < vocab_size_, kInvalidArgument,
              "accepted token {} is outside the vocabulary [0, {})", token, vocab_size_);
  ++output_counts_[token];
  ++num_generated_;
}

bool TokenHistory::in_prompt(int32_t id) const {
  return std::binary_search(prompt_ids_.begin(), prompt_ids_.end(), id);
}

namespace {

float repeat_penalized(float logit, float repetition) {
  // HF RepetitionPenaltyLogitsProcessor / vLLM: a positive logit shrinks towards 0, a negative
  // one grows away from 0, so r > 1 always lowers the token's probability.
  return logit > 0.0f ? logit / repetition : logit * repetition;
}

}  // namespace

void apply_penalties(std::span<float> logits, const TokenHistory& history, float repetition,
                     float frequency, float presence) {
  if (repetition != 1.0f) {
    for (int32_t id : history.prompt_ids()) logits[id] = repeat_penalized(logits[id], repetition);
    for (const auto& [id, count] : history.output_counts()) {
      if (!history.in_prompt(id)) logits[id] = repeat_penalized(logits[id], repetition);
    }
  }
  if (frequency != 0.0f || presence != 0.0f) {
    for (const auto& [id, count] : history.output_counts()) {
      logits[id] -= frequency * static_cast<float>(count);
      logits[id] -= presence;
    }
  }
}

}  // namespace dsv41::sampling
