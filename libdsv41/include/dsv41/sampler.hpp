// Sampler: turns the logits of one position into a token, with the OpenAI/vLLM sampling fields
// (api-and-clients.md §2.3) and a reproducible seeded RNG. See docs/sampling.md.
//
// Chain, in this order (vLLM v1 `vllm/v1/sample/sampler.py` Sampler docstring steps 5-7 and
// `vllm/v1/worker/gpu/sample/sampler.py` Sampler.sample, checked 2026-12):
//   1. logit_bias        logit[t] += bias[t]
//   2. penalties         repetition (prompt + generated), then frequency, then presence
//   3. greedy            temperature < 1e-5: argmax of 1-2 (ties -> lowest id), steps 4-8 skipped
//   4. temperature       logit /= temperature
//   5. min_p             drop t with p[t] < min_p * max(p)
//   6. top_k             drop t with logit[t] < k-th largest logit (ties at the boundary kept)
//   7. top_p             drop the least likely tokens whose cumulative mass <= 1 - top_p
//   8. sample            softmax over the survivors, inverse CDF with one 53-bit uniform
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "dsv41/status.hpp"

namespace dsv41 {

namespace sampling {
class DeviceSampling;  // internal: the chain's inputs for the CUDA sampling kernel
}

// A token's log-probability at one position under the model's raw distribution (log-softmax of
// the logits before any stage of the chain below), for the OpenAI logprobs fields.
struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;  // <= 0; -inf for a token the logits rule out, NaN for a non-finite row
};

// Plain data; defaults = vLLM SamplingParams defaults (= no-op for every stage but sampling).
struct SamplerParams {
  float temperature = 1.0f;             // >= 0, finite; < 1e-5 means greedy (vLLM _SAMPLING_EPS)
  int32_t top_k = 0;                    // 0 or -1 = off (vLLM accepts both); else >= 1
  float top_p = 1.0f;                   // (0, 1]; 1 = off
  float min_p = 0.0f;                   // [0, 1]; 0 = off
  float repetition_penalty = 1.0f;      // > 0, finite; 1 = off (HF/vLLM: divide logit > 0,
                                        // multiply logit <= 0, tokens of prompt + generated)
  float presence_penalty = 0.0f;        // [-2, 2]; logit -= p * (count > 0), generated tokens only
  float frequency_penalty = 0.0f;       // [-2, 2]; logit -= f * count, generated tokens only
  std::map<int32_t, float> logit_bias;  // token id -> additive bias; -inf bans the token;
                                        // NaN / +inf rejected; ids checked against the vocab
  std::optional<int64_t> seed;          // absent: seeded from std::random_device

  // kInvalidArgument naming the first offending field, e.g.
  // "SamplerParams.top_p = 1.5 must be in (0, 1]". Does not know the vocab (see Sampler::create).
  [[nodiscard]] Status validate() const;
};

// Sampling state of one sequence: the parameters, the token history the penalties need, and the
// RNG. Move-only. Not thread-safe: one sequence = one Sampler = one thread at a time. Distinct
// Samplers share nothing and may run concurrently.
class Sampler {
 public:
  // validate() plus logit_bias ids in [0, vocab_size); vocab_size in [1, 2^31).
  [[nodiscard]] static Result<Sampler> create(const SamplerParams& params, int64_t vocab_size);

  Sampler(Sampler&&) noexcept;
  Sampler& operator=(Sampler&&) noexcept;
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;
  ~Sampler();

  // Replaces the prompt tokens (repetition penalty only). kInvalidArgument naming the position
  // of an id outside [0, vocab_size); the previous prompt is kept in that case.
  [[nodiscard]] Status set_prompt(std::span<const int32_t> prompt);
  // Appends one generated token (all three penalties). kInvalidArgument for an id outside
  // [0, vocab_size); nothing is recorded in that case.
  [[nodiscard]] Status accept(int32_t token);
  // While fewer than `generated` tokens were accepted, `ids` get logit -inf in step 1 (with
  // logit_bias): StopParams.min_tokens keeps the stop tokens out (vLLM's min-tokens logits
  // processor). Replaces an earlier ban. kInvalidArgument for an id outside the vocabulary or
  // a negative count (nothing changed).
  [[nodiscard]] Status ban_until(std::span<const int32_t> ids, int64_t generated);

  // Runs the chain on `logits` (one position, vocab_size floats) and draws a token. Does not
  // call accept(). kInvalidArgument for a wrong size, any NaN or +inf logit, all logits -inf, or
  // no token left after logit_bias/penalties. A non-greedy call consumes exactly one 64-bit RNG
  // output; greedy and failed calls consume none.
  [[nodiscard]] Result<int32_t> sample(std::span<const float> logits);
  // The distribution sample() draws from for these logits (vocab_size floats, sum 1; greedy:
  // one-hot at the argmax). Same errors as sample(); touches neither RNG nor history.
  [[nodiscard]] Result<std::vector<float>> probabilities(std::span<const float> logits) const;

  int64_t vocab_size() const;
  const SamplerParams& params() const;
  // Number of tokens passed to accept().
  int64_t num_generated() const;

 private:
  friend class sampling::DeviceSampling;
  struct Impl;
  explicit Sampler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dsv41
