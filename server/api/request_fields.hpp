// Request JSON → engine parameters: the sampling, stop, length and streaming fields shared by
// /v1/chat/completions and /v1/completions (api-and-clients.md §2.3, §2.9). Unknown fields are
// ignored; a known field of the wrong type or range throws kInvalidArgument "<field>: ...".
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>

#include "dsv41/engine.hpp"
#include "dsv41/sampler.hpp"
#include "dsv41/stop.hpp"

namespace dsv41::server {

enum class Endpoint { kChat, kCompletions };

struct GenerationFields {
  std::optional<std::string> model;
  SamplerParams sampling;
  StopParams stop;                    // max_tokens left at kNoTokenLimit here
  std::optional<int64_t> max_tokens;  // max_completion_tokens, else max_tokens
  bool stream = false;
  bool include_usage = false;
  bool continuous_usage = false;
  bool echo = false;  // completions only
  // -1: off. Chat: top_logprobs when logprobs is true; completions: logprobs (an integer).
  int top_logprobs = -1;
  bool parallel_tool_calls = true;  // chat only; false: the reply carries at most one tool call
};

// `vocab_size` bounds logit_bias keys and stop_token_ids.
GenerationFields parse_generation_fields(simdjson::dom::element root, Endpoint endpoint,
                                         int64_t vocab_size);

}  // namespace dsv41::server
