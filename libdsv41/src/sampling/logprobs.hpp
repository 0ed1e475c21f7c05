// Log-probabilities of generated tokens for the OpenAI `logprobs` / `top_logprobs` fields
// (api-and-clients.md §2.3, §2.9; docs/sampling.md "Log-probabilities"). They are taken from the
// model's raw distribution at that position — log-softmax of the logits before penalties,
// logit_bias, temperature, truncation and constraints — as vLLM's default ("raw_logprobs") does,
// so they do not depend on the sampling settings and a greedy token is the top alternative.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dsv41/sampler.hpp"

namespace dsv41::sampling {

struct PositionLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // the top_n most likely, descending; ties: lower id first
};

// logits [V] of one position. log p(i) = logits[i] - max - log Σ_j exp(logits[j] - max), the
// sum in double (V = 129,280 terms). top_n is clamped to V. Non-finite logits: -inf entries
// (masked tokens) get logprob -inf; a NaN or +inf logit makes the row meaningless and every
// logprob NaN, which the caller reports as such (JSON null).
PositionLogprobs position_logprobs(std::span<const float> logits, int32_t chosen, int top_n);

}  // namespace dsv41::sampling
