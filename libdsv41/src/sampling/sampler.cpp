// Sampler: the chain of sampler.hpp on a float copy of one position's logits.
#include "dsv41/sampler.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <random>

#include "core/check.hpp"
#include "sampling/penalties.hpp"
#include "sampling/rng.hpp"
#include "sampling/sampler_impl.hpp"
#include "sampling/truncation.hpp"

namespace dsv41 {

namespace {

constexpr float kBanned = -std::numeric_limits<float>::infinity();

uint64_t nondeterministic_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
}

void check_logits(std::span<const float> logits, int64_t vocab_size) {
  DSV41_CHECK(static_cast<int64_t>(logits.size()) == vocab_size, kInvalidArgument,
              "logits have {} entries, expected vocab_size {}", logits.size(), vocab_size);
  int64_t n_nan = 0, n_pos_inf = 0, n_neg_inf = 0;
  size_t first_nan = 0, first_pos_inf = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (std::isnan(v)) {
      if (n_nan++ == 0) first_nan = i;
    } else if (v == INFINITY) {
      if (n_pos_inf++ == 0) first_pos_inf = i;
    } else if (v == kBanned) {
      ++n_neg_inf;
    }
  }
  DSV41_CHECK(n_nan == 0, kInvalidArgument, "logits contain {} NaN value(s), the first at token {}",
              n_nan, first_nan);
  DSV41_CHECK(n_pos_inf == 0, kInvalidArgument,
              "logits contain {} +inf value(s), the first at token {}", n_pos_inf, first_pos_inf);
  DSV41_CHECK(n_neg_inf < vocab_size, kInvalidArgument,
              "all {} logits are -inf: no token can be sampled", vocab_size);
}

}  // namespace

int32_t Sampler::Impl::run_chain(std::span<const float> logits, std::vector<float>& work) const {
  check_logits(logits, vocab_size);
  work.assign(logits.begin(), logits.end());
  for (const auto& [id, bias] : params.logit_bias) work[id] += bias;
  if (ban_active())
    for (int32_t id : banned) work[id] = kBanned;
  sampling::apply_penalties(work, history, params.repetition_penalty, params.frequency_penalty,
                            params.presence_penalty);
  const float m = sampling::max_logit(work);
  DSV41_CHECK(m != kBanned, kInvalidArgument,
              "no token left after logit_bias{} and penalties: all {} logits are -inf "
              "(SamplerParams.logit_bias has {} entries)",
              ban_active() ? fmt::format(", the min_tokens ban of {} ids", banned.size()) : "",
              vocab_size, params.logit_bias.size());
  DSV41_CHECK(m != INFINITY, kInvalidArgument,
              "logit of token {} overflowed to +inf after logit_bias and penalties",
              sampling::argmax_lowest_id(work));
  if (greedy()) return sampling::argmax_lowest_id(work);
  // Shifting by the max before dividing keeps (logit - m) / T <= 0 for any tiny T, so
  // nothing overflows; softmax is shift-invariant, so the distribution is unchanged.
  for (float& v : work) {
    if (v != kBanned) v = (v - m) / params.temperature;
  }
  if (params.min_p > 0.0f) sampling::apply_min_p(work, params.min_p);
  if (params.top_k > 0) sampling::apply_top_k(work, params.top_k);
  if (params.top_p < 1.0f) sampling::apply_top_p(work, params.top_p);
  return -1;
}

Sampler::Sampler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Sampler::Sampler(Sampler&&) noexcept = default;
Sampler& Sampler::operator=(Sampler&&) noexcept = default;
Sampler::~Sampler() = default;

Result<Sampler> Sampler::create(const SamplerParams& params, int64_t vocab_size) {
  std::unique_ptr<Impl> impl;
  Status st = params.validate();
  if (!st) return st;
  st = detail::capture_status([&] {
    DSV41_CHECK(vocab_size >= 1 && vocab_size <= std::numeric_limits<int32_t>::max(),
                kInvalidArgument, "Sampler vocab_size = {} must be in [1, 2^31 - 1]", vocab_size);
    for (const auto& [id, bias] : params.logit_bias) {
      DSV41_CHECK(id < vocab_size, kInvalidArgument,
                  "SamplerParams.logit_bias has token id {} outside the vocabulary [0, {})", id,
                  vocab_size);
    }
    const uint64_t seed =
        params.seed ? static_cast<uint64_t>(*params.seed) : nondeterministic_seed();
    impl = std::make_unique<Impl>(params, vocab_size, seed);
  });
  if (!st) return st;
  return Sampler(std::move(impl));
}

Status Sampler::set_prompt(std::span<const int32_t> prompt) {
  return detail::capture_status([&] {
    DSV41_CHECK(impl_, kInvalidArgument, "Sampler used after it was moved from");
    impl_->history.set_prompt(prompt);
  });
}

Status Sampler::accept(int32_t token) {
  return detail::capture_status([&] {
    DSV41_CHECK(impl_, kInvalidArgument, "Sampler used after it was moved from");
    impl_->history.accept(token);
  });
}

Status Sampler::ban_until(std::span<const int32_t> ids, int64_t generated) {
  return detail::capture_status([&] {
    DSV41_CHECK(impl_, kInvalidArgument, "Sampler used after it was moved from");
    DSV41_CHECK(generated >= 0, kInvalidArgument, "Sampler::ban_until: generated = {} is negative",
                generated);
    for (size_t i = 0; i < ids.size(); ++i)
      DSV41_CHECK(ids[i] >= 0 && ids[i] < impl_->vocab_size, kInvalidArgument,
                  "Sampler::ban_until: ids[{}] = {} is outside the vocabulary [0, {})", i, ids[i],
                  impl_->vocab_size);
    impl_->banned.assign(ids.begin(), ids.end());
    impl_->ban_until = generated;
  });
}

Result<int32_t> Sampler::sample(std::span<const float> logits) {
  int32_t token = -1;
  Status st = detail::capture_status([&] {
    DSV41_CHECK(impl_, kInvalidArgument, "Sampler used after it was moved from");
    token = impl_->run_chain(logits, impl_->work);
    if (token >= 0) return;
    double total = 0.0;
    const std::vector<double> weight = sampling::exp_weights(impl_->work, total);
    // Inverse CDF in id order: the first token whose cumulative weight exceeds u * total. The
    // fallback (rounding pushed u * total past the final sum) is the last token with weight.
    const double target = impl_->rng.uniform() * total;
    double cumulative = 0.0;
    for (size_t i = 0; i < weight.size(); ++i) {
      if (weight[i] == 0.0) continue;
      cumulative += weight[i];
      token = static_cast<int32_t>(i);
      if (target < cumulative) break;
    }
  });
  if (!st) return st;
  return token;
}

Result<std::vector<float>> Sampler::probabilities(std::span<const float> logits) const {
  std::vector<float> probs;
  Status st = detail::capture_status([&] {
    DSV41_CHECK(impl_, kInvalidArgument, "Sampler used after it was moved from");
    std::vector<float> work;
    const int32_t greedy_token = impl_->run_chain(logits, work);
    probs.assign(impl_->vocab_size, 0.0f);
    if (greedy_token >= 0) {
      probs[greedy_token] = 1.0f;
      return;
    }
    double total = 0.0;
    const std::vector<double> weight = sampling::exp_weights(work, total);
    for (size_t i = 0; i < weight.size(); ++i) probs[i] = static_cast<float>(weight[i] / total);
  });
  if (!st) return st;
  return probs;
}

int64_t Sampler::vocab_size() const { return impl_ ? impl_->vocab_size : 0; }

const SamplerParams& Sampler::params() const {
  static const SamplerParams kMovedFrom;
  return impl_ ? impl_->params : kMovedFrom;
}

int64_t Sampler::num_generated() const { return impl_ ? impl_->history.num_generated() : 0; }

}  // namespace dsv41
