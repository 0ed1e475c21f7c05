// When a generated sequence ends: stop strings, stop token ids, EOS, max_tokens (OpenAI/vLLM
// request fields, api-and-clients.md §2.3). The incremental matcher lives in
// src/sampling/stop_matcher.hpp; semantics in docs/sampling.md §Stop rules.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dsv41/status.hpp"

namespace dsv41 {

// max_tokens value meaning "no limit" (the context size still caps the sequence).
inline constexpr int64_t kNoTokenLimit = -1;

struct StopParams {
  std::vector<std::string> stop;        // non-empty valid UTF-8 strings; may span tokens
  std::vector<int32_t> stop_token_ids;  // >= 0 (and < vocab size, checked by the matcher)
  int64_t max_tokens = kNoTokenLimit;   // generated tokens; kNoTokenLimit or >= 1
  bool ignore_eos = false;              // EOS does not stop (stop_token_ids still do)
  // Keep the matched stop string (or the stop token's text) in the output (vLLM field).
  bool include_stop_str_in_output = false;
  // Generated tokens before any stop rule but max_tokens applies (vLLM min_tokens): stop tokens
  // (EOS unless ignore_eos, stop_token_ids) are not sampled (Sampler::ban_until) and stop
  // strings only match when they end in a later token. 0 = off; <= max_tokens when both set.
  int64_t min_tokens = 0;

  // kInvalidArgument naming the field, e.g. "StopParams.stop[1] is empty".
  [[nodiscard]] Status validate() const;
};

enum class FinishReason {
  kNone,    // still generating
  kStop,    // EOS, a stop token id or a stop string
  kLength,  // max_tokens reached
};

// "stop", "length" (OpenAI finish_reason), or "" for kNone.
const char* finish_reason_name(FinishReason reason);

}  // namespace dsv41
