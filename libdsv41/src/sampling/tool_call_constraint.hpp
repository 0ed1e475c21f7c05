// TokenConstraint of a request with tool_choice required / named: the logits mask that keeps the
// generation inside ToolCallGrammar, then forces the end of turn (docs/sampling.md "Constrained
// tool calls"). Literal parts are forced as the tokenizer's own tokenization of the literal (one
// token per step); free parts allow every token whose bytes the grammar accepts.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dsv41/engine.hpp"
#include "sampling/tool_call_grammar.hpp"

namespace dsv41::sampling {

struct TokenVocabulary {
  std::vector<std::string> bytes;  // per id: the decoded text (a lossy decode never matches)
  int32_t end_of_turn = -1;        // the token forced after the call (the EOS id)
  // Tokenizes a literal (special tokens matched), thread-safe.
  std::function<std::vector<int32_t>(std::string_view)> tokenize;
};

class ToolCallConstraint final : public TokenConstraint {
 public:
  ToolCallConstraint(std::shared_ptr<const TokenVocabulary> vocab, ToolCallGrammarSpec spec);
  void mask(std::span<float> logits) override;
  void accept(int32_t token) override;
  const ToolCallGrammar& grammar() const { return grammar_; }
  // The tokens mask() leaves open (for tests): every id with a finite logit afterwards.
  std::vector<int32_t> allowed();

 private:
  void refill();
  std::shared_ptr<const TokenVocabulary> vocab_;
  ToolCallGrammar grammar_;
  std::deque<int32_t> queue_;  // forced tokens whose bytes the grammar has already consumed
  bool ended_ = false;         // the end-of-turn token was accepted
};

}  // namespace dsv41::sampling
