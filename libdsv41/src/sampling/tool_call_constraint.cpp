// ToolCallConstraint (see tool_call_constraint.hpp).
#include "sampling/tool_call_constraint.hpp"

#include "core/check.hpp"
#include "sampling/logit_mask.hpp"

namespace dsv41::sampling {

ToolCallConstraint::ToolCallConstraint(std::shared_ptr<const TokenVocabulary> vocab,
                                       ToolCallGrammarSpec spec)
    : vocab_(std::move(vocab)), grammar_(std::move(spec)) {
  DSV41_CHECK(vocab_ && vocab_->tokenize && vocab_->end_of_turn >= 0, kInvalidArgument,
              "ToolCallConstraint: vocabulary without tokenizer or end-of-turn token");
}

// A literal next part: tokenize it once, hand its tokens out one per step.
void ToolCallConstraint::refill() {
  if (!queue_.empty() || grammar_.complete()) return;
  const std::string forced = grammar_.forced();
  if (forced.empty()) return;
  const std::vector<int32_t> ids = vocab_->tokenize(forced);
  DSV41_CHECK(!ids.empty(), kInternal, "tool-call constraint: literal '{}' tokenized to nothing",
              forced);
  DSV41_CHECK(grammar_.feed(forced), kInternal, "tool-call constraint: forced literal rejected");
  queue_.assign(ids.begin(), ids.end());
}

std::vector<int32_t> ToolCallConstraint::allowed() {
  refill();
  std::vector<int32_t> out;
  if (!queue_.empty()) return {queue_.front()};
  if (grammar_.complete() || ended_) return {vocab_->end_of_turn};
  for (size_t id = 0; id < vocab_->bytes.size(); ++id) {
    const std::string& b = vocab_->bytes[id];
    if (b.empty()) continue;
    ToolCallGrammar g = grammar_;
    if (g.feed(b)) out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

void ToolCallConstraint::mask(std::span<float> logits) {
  keep_only(logits, allowed(), "tool-call constraint");
}

void ToolCallConstraint::accept(int32_t token) {
  if (!queue_.empty()) {
    DSV41_CHECK(token == queue_.front(), kInternal,
                "tool-call constraint: sampled token {} instead of the forced {}", token,
                queue_.front());
    queue_.pop_front();
    return;
  }
  if (grammar_.complete()) {
    ended_ = true;
    return;
  }
  DSV41_CHECK(token >= 0 && static_cast<size_t>(token) < vocab_->bytes.size() &&
                  grammar_.feed(vocab_->bytes[token]),
              kInternal, "tool-call constraint: token {} does not continue the call", token);
}

}  // namespace dsv41::sampling
