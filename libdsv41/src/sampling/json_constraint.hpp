// TokenConstraint of a request with response_format json_object / json_schema (docs/sampling.md
// "JSON output"): the answer is one JSON object (JsonGrammar), then the end of turn. In thinking
// mode the reasoning runs unconstrained until the think-end token (the end of turn is kept out of
// it, so an answer always follows); the object starts after it. Tokens whose text holds a
// reserved marker (special tokens, DSML) are never part of the object, so the chat output parser
// reads the answer as content. With a compiled JsonSchema (json_schema.hpp) the object also keeps
// to the schema (JsonSchemaTracker beside the grammar); without one only the syntax is enforced
// (json_object, or a json_schema outside the enforced subset).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dsv41/engine.hpp"
#include "sampling/json_grammar.hpp"
#include "sampling/json_schema.hpp"
#include "sampling/json_schema_tracker.hpp"
#include "sampling/tool_call_constraint.hpp"

namespace dsv41::sampling {

class JsonConstraint final : public TokenConstraint {
 public:
  // think_end: the token that ends the reasoning (-1: the object starts at the first token).
  // reserved: substrings that bar a token from the object (e.g. "<｜", "<think>").
  // schema: null for syntax only.
  JsonConstraint(std::shared_ptr<const TokenVocabulary> vocab, int32_t think_end,
                 std::vector<std::string> reserved,
                 std::shared_ptr<const JsonSchema> schema = nullptr);
  void mask(std::span<float> logits) override;
  void accept(int32_t token) override;
  // The tokens mask() leaves open (for tests); every token while reasoning is not listed: then
  // only the end of turn is closed.
  std::vector<int32_t> allowed() const;
  bool reasoning() const { return reasoning_; }
  const JsonGrammar& grammar() const { return grammar_; }

 private:
  std::shared_ptr<const TokenVocabulary> vocab_;
  int32_t think_end_;
  std::vector<uint8_t> usable_;  // per id: non-empty and free of reserved markers
  bool reasoning_;
  JsonGrammar grammar_;
  std::shared_ptr<const JsonSchema> schema_;  // null: syntax only
  JsonSchemaTracker tracker_;                 // walks schema_ (unused without one)
};

}  // namespace dsv41::sampling
