// DeviceSampling: Sampler state -> SamplePlan, and a device outcome -> sample()'s result.
#include "sampling/device_sample_plan.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "core/check.hpp"
#include "sampling/sampler_impl.hpp"

namespace dsv41::sampling {

SamplePlan DeviceSampling::plan(const Sampler& s) {
  DSV41_CHECK(s.impl_, kInvalidArgument, "Sampler used after it was moved from");
  const Sampler::Impl& im = *s.impl_;
  const SamplerParams& p = im.params;
  SamplePlan plan;
  plan.greedy = im.greedy();
  plan.temperature = p.temperature;
  plan.min_p = p.min_p;
  plan.top_p = p.top_p;
  plan.top_k = p.top_k;
  Xoshiro256StarStar peek = im.rng;  // sample() draws after the chain succeeds
  plan.uniform = plan.greedy ? 0.0 : peek.uniform();
  // Per token, the operations of run_chain (bias) and apply_penalties (repetition over prompt ∪
  // generated when r != 1; frequency and presence over generated when either is non-zero).
  // Tokens are independent, so applying each token's list in that order reproduces the CPU.
  std::map<int32_t, SampleAdjustment> by_id;
  auto entry = [&](int32_t id) -> SampleAdjustment& {
    SampleAdjustment& a = by_id[id];
    a.id = id;
    return a;
  };
  for (const auto& [id, bias] : p.logit_bias) {
    SampleAdjustment& a = entry(id);
    a.flags |= kPlanBias;
    a.bias = bias;
  }
  if (im.ban_active()) {  // l += -inf: -inf whatever the bias (Sampler::ban_until)
    for (int32_t id : im.banned) {
      SampleAdjustment& a = entry(id);
      a.flags |= kPlanBias;
      a.bias = -std::numeric_limits<float>::infinity();
    }
  }
  const TokenHistory& h = im.history;
  if (p.repetition_penalty != 1.0f) {
    for (int32_t id : h.prompt_ids()) {
      SampleAdjustment& a = entry(id);
      a.flags |= kPlanRepeat;
      a.repetition = p.repetition_penalty;
    }
    for (const auto& [id, count] : h.output_counts()) {
      SampleAdjustment& a = entry(id);
      a.flags |= kPlanRepeat;
      a.repetition = p.repetition_penalty;
    }
  }
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    for (const auto& [id, count] : h.output_counts()) {
      SampleAdjustment& a = entry(id);
      a.flags |= kPlanPenalty;
      a.frequency_term = p.frequency_penalty * static_cast<float>(count);
      a.presence = p.presence_penalty;
    }
  }
  plan.adjustments.reserve(by_id.size());
  for (const auto& [id, a] : by_id) plan.adjustments.push_back(a);
  return plan;
}

void DeviceSampling::apply_adjustments(std::span<float> logits, const SamplePlan& plan) {
  for (const SampleAdjustment& a : plan.adjustments) {
    float l = logits[a.id];
    if (a.flags & kPlanBias) l += a.bias;
    if (a.flags & kPlanRepeat) l = l > 0.0f ? l / a.repetition : l * a.repetition;
    if (a.flags & kPlanPenalty) {
      l -= a.frequency_term;
      l -= a.presence;
    }
    logits[a.id] = l;
  }
}

Result<int32_t> DeviceSampling::finish(Sampler& s, const SamplePlan& plan,
                                       const DeviceSampleOutcome& o) {
  int32_t token = -1;
  Status st = detail::capture_status([&] {
    DSV41_CHECK(s.impl_, kInvalidArgument, "Sampler used after it was moved from");
    Sampler::Impl& im = *s.impl_;
    const int64_t V = im.vocab_size;
    // The messages of sampler.cpp (check_logits, run_chain), word for word.
    switch (o.status) {
      case 0:
        break;
      case 1:
        DSV41_FAIL(kInvalidArgument, "logits contain {} NaN value(s), the first at token {}",
                   o.count, o.first);
      case 2:
        DSV41_FAIL(kInvalidArgument, "logits contain {} +inf value(s), the first at token {}",
                   o.count, o.first);
      case 3:
        DSV41_FAIL(kInvalidArgument, "all {} logits are -inf: no token can be sampled", V);
      case 4:
        DSV41_FAIL(kInvalidArgument,
                   "no token left after logit_bias and penalties: all {} logits are -inf "
                   "(SamplerParams.logit_bias has {} entries)",
                   V, im.params.logit_bias.size());
      case 5:
        DSV41_FAIL(kInvalidArgument,
                   "logit of token {} overflowed to +inf after logit_bias and penalties", o.first);
      case 6:  // kSampleNoCandidate: a kernel fault, never the CPU Sampler's outcome
        DSV41_FAIL(kInternal,
                   "device sampling: the draw found no token with weight (a sampling kernel "
                   "fault)");
      default:
        DSV41_FAIL(kInternal, "device sampling: unknown status {}", o.status);
    }
    DSV41_CHECK(o.token >= 0 && o.token < V, kInternal,
                "device sampling: token {} outside the vocabulary [0, {})", o.token, V);
    if (!plan.greedy) {
      const double u = im.rng.uniform();
      DSV41_CHECK(u == plan.uniform, kInternal,
                  "device sampling: the plan's uniform is stale (the Sampler drew since)");
    }
    token = o.token;
  });
  if (!st.is_ok()) return st;
  return token;
}

}  // namespace dsv41::sampling
