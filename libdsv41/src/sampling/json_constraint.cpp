// JsonConstraint (see json_constraint.hpp).
#include "sampling/json_constraint.hpp"

#include <limits>

#include "core/check.hpp"
#include "sampling/logit_mask.hpp"

namespace dsv41::sampling {

namespace {
constexpr float kBanned = -std::numeric_limits<float>::infinity();
}

JsonConstraint::JsonConstraint(std::shared_ptr<const TokenVocabulary> vocab, int32_t think_end,
                               std::vector<std::string> reserved,
                               std::shared_ptr<const JsonSchema> schema)
    : vocab_(std::move(vocab)),
      think_end_(think_end),
      reasoning_(think_end >= 0),
      schema_(std::move(schema)),
      tracker_(schema_.get()) {
  DSV41_CHECK(vocab_ && vocab_->end_of_turn >= 0, kInvalidArgument,
              "JsonConstraint: vocabulary without an end-of-turn token");
  usable_.resize(vocab_->bytes.size());
  for (size_t id = 0; id < vocab_->bytes.size(); ++id) {
    const std::string& b = vocab_->bytes[id];
    bool ok = !b.empty();
    for (const std::string& r : reserved) ok = ok && b.find(r) == std::string::npos;
    usable_[id] = ok ? 1 : 0;
  }
}

std::vector<int32_t> JsonConstraint::allowed() const {
  if (grammar_.complete()) return {vocab_->end_of_turn};
  std::vector<int32_t> out;
  std::bitset<256> first = grammar_.next_bytes();
  if (schema_) first &= tracker_.next_bytes();
  for (size_t id = 0; id < vocab_->bytes.size(); ++id) {
    if (!usable_[id]) continue;
    const std::string& b = vocab_->bytes[id];
    if (!first.test(static_cast<uint8_t>(b[0]))) continue;
    JsonGrammar g = grammar_;
    if (!g.feed(b)) continue;
    if (schema_) {
      // Every byte passed the grammar, so the tracker may read the token whole.
      JsonSchemaTracker t = tracker_;
      if (!t.feed(std::string_view(b))) continue;
    }
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

void JsonConstraint::mask(std::span<float> logits) {
  if (reasoning_) {  // free text, but the turn may not end before the answer
    const auto eot = static_cast<size_t>(vocab_->end_of_turn);
    if (eot < logits.size()) logits[eot] = kBanned;
    return;
  }
  keep_only(logits, allowed(), "JSON constraint");
}

void JsonConstraint::accept(int32_t token) {
  if (reasoning_) {
    if (token == think_end_) reasoning_ = false;
    return;
  }
  if (grammar_.complete()) return;  // the end of turn
  const bool known = token >= 0 && static_cast<size_t>(token) < vocab_->bytes.size() &&
                     usable_[static_cast<size_t>(token)];
  JsonGrammar g = grammar_;
  JsonSchemaTracker t = tracker_;
  const std::string_view b =
      known ? std::string_view(vocab_->bytes[static_cast<size_t>(token)]) : std::string_view();
  DSV41_CHECK(known && g.feed(b) && (!schema_ || t.feed(b)), kInternal,
              "JSON constraint: token {} does not continue the object{}", token,
              schema_ ? " of the schema" : "");
  grammar_ = g;
  tracker_ = t;
}

}  // namespace dsv41::sampling
