// Log-probabilities of generated tokens in OpenAI's two response shapes (api-and-clients.md §2.3,
// §2.9; docs/server.md "Log-probabilities"): chat `choices[].logprobs.content[]` entries and the
// legacy completions arrays (`tokens`, `token_logprobs`, `top_logprobs`, `text_offset`). The
// values are the engine's (GenerationEvent::logprob: the model's raw distribution).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/generation_backend.hpp"
#include "core/json_writer.hpp"

namespace dsv41::server {

// A token's text (its bytes decoded lossily: a piece of a UTF-8 character reads U+FFFD, as a
// one-token decode does) and raw bytes, looked up once per id. Does not own the backend: a run
// that held it could drop the last reference on the backend's own callback thread, whose
// destructor then joins that thread (std::terminate, seen in server_api_test). get() is called
// from the backend's token events only, while it is alive.
class TokenTexts {
 public:
  explicit TokenTexts(const GenerationBackend* backend) : backend_(backend) {}
  struct Text {
    std::string text, bytes;
  };
  const Text& get(int32_t id);

 private:
  const GenerationBackend* backend_;
  std::unordered_map<int32_t, Text> cache_;
};

// One token event's log-probabilities. no_value: a token with none (the first prompt token of
// an echo: nothing precedes it), written as null.
struct TokenLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;
  bool no_value = false;
};
// The event's, when it carries them.
std::optional<TokenLogprobs> logprobs_of(const GenerationEvent& ev);

// Chat: `{"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}, ...]}`.
void write_chat_logprobs(json::Writer& w, TokenTexts& texts,
                         const std::vector<TokenLogprobs>& tokens);

// Legacy completions: the arrays of `tokens` (from text offset `offset` on; advanced past them).
// top_logprobs entries map token text → logprob for the chosen token and the alternatives, or
// are null when no alternatives were asked (logprobs: 0).
void write_completion_logprobs(json::Writer& w, TokenTexts& texts,
                               const std::vector<TokenLogprobs>& tokens, bool with_top,
                               int64_t* offset);

}  // namespace dsv41::server
