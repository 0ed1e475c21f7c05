// Sampler::Impl, shared by sampler.cpp (the CPU chain) and device_sample_plan.cpp (the same
// chain's inputs handed to the CUDA kernel): parameters, token history, RNG. Internal.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dsv41/export.hpp"
#include "dsv41/sampler.hpp"
#include "sampling/penalties.hpp"
#include "sampling/rng.hpp"

namespace dsv41 {

// vLLM _SAMPLING_EPS: a temperature below it is greedy.
constexpr float kGreedyTemperature = 1e-5f;

struct DSV41_INTERNAL Sampler::Impl {
  SamplerParams params;
  int64_t vocab_size;
  sampling::TokenHistory history;
  sampling::Xoshiro256StarStar rng;
  std::vector<float> work;      // [vocab_size] scratch of sample()
  std::vector<int32_t> banned;  // ban_until: -inf while history.num_generated() < ban_until
  int64_t ban_until = 0;

  bool ban_active() const { return history.num_generated() < ban_until && !banned.empty(); }

  Impl(const SamplerParams& p, int64_t vocab, uint64_t seed)
      : params(p), vocab_size(vocab), history(vocab), rng(seed) {}

  bool greedy() const { return params.temperature < kGreedyTemperature; }

  // Steps 1-7 of the chain on a copy of `logits` in `work`. Returns the greedy token, or -1
  // when `work` holds the truncated, temperature-scaled logits to sample from.
  int32_t run_chain(std::span<const float> logits, std::vector<float>& work) const;
};

}  // namespace dsv41
