// The non-streaming view of a completion: the OutputParser's events concatenated into one
// assistant message (api-and-clients.md §2.4; the streaming and non-streaming paths share the
// parser, §3.6).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/output_parser.hpp"

namespace dsv41::chat {

struct ParsedToolCall {
  std::string id;
  std::string name;
  std::string arguments_json;  // a JSON object as text: {"k": "v", "n": 1}
};

struct ParsedMessage {
  std::string reasoning_content;
  std::string content;
  std::vector<ParsedToolCall> tool_calls;
  std::vector<std::string> warnings;
  bool saw_eos = false;
};

// Folds events into a message (kToolCallStart opens a call, argument deltas append to it).
class MessageAccumulator {
 public:
  void apply(const ParseEvent& event);
  void apply(const std::vector<ParseEvent>& events) {
    for (const auto& e : events) apply(e);
  }
  ParsedMessage& message() { return message_; }

 private:
  ParsedMessage message_;
};

// Parses a whole completion in one feed (the non-streaming path).
ParsedMessage parse_completion(std::string_view text, const ParserOptions& options);

// {"reasoning_content", "content", "tool_calls": [{"id", "type", "function": {"name",
// "arguments"}}]} as compact JSON (the CLI's `dsv41 parse` output).
std::string parsed_message_json(const ParsedMessage& message);

}  // namespace dsv41::chat
