// The inputs of one Sampler::sample call for the CUDA sampling kernel (kernels/include/dsv41k/
// sampling.hpp), and the bookkeeping after it, so a sequence gives the same tokens on either
// backend. The RNG stays here: plan() peeks the uniform sample() would draw next, finish()
// consumes it only when sample() would have (a non-greedy call that succeeded). Internal; the
// structs mirror the kernel's without depending on CUDA (the CPU-only build has no kernels).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dsv41/sampler.hpp"

namespace dsv41::sampling {

// Flags = dsv41::kernels::kAdjust*: applied in this order to the listed token's logit.
constexpr uint32_t kPlanBias = 1;     // l += bias                       (logit_bias)
constexpr uint32_t kPlanRepeat = 2;   // l > 0 ? l / r : l * r           (prompt ∪ generated)
constexpr uint32_t kPlanPenalty = 4;  // l -= frequency_term; l -= presence (generated)

struct SampleAdjustment {
  int32_t id = 0;
  uint32_t flags = 0;
  float bias = 0.0f;
  float repetition = 1.0f;
  float frequency_term = 0.0f;  // frequency * float(count), the CPU's fp32 product
  float presence = 0.0f;
};

struct SamplePlan {
  bool greedy = false;
  float temperature = 1.0f;
  float min_p = 0.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;
  double uniform = 0.0;  // the next uniform of the Sampler's stream (not yet consumed)
  std::vector<SampleAdjustment> adjustments;  // ascending id, each id once
};

// What the device returned for one row (= dsv41::kernels::SampleResult; status 0 ok, 1 NaN,
// 2 +inf, 3 all -inf, 4 nothing left after logit_bias / penalties, 5 overflow to +inf; 6 is a
// kernel fault, reported as kInternal).
struct DeviceSampleOutcome {
  int32_t token = -1;
  int32_t status = 0;
  int32_t count = 0;
  int32_t first = -1;
};

class DeviceSampling {
 public:
  // The chain parameters, the sparse steps 1-2 (logit_bias + penalties of the history) and the
  // next uniform of s. Touches neither RNG nor history. Throws kInvalidArgument for a
  // moved-from Sampler.
  static SamplePlan plan(const Sampler& s);
  // The result sample() would have returned: the token, consuming the uniform for a
  // non-greedy plan; or the kInvalidArgument Status with sample()'s message, consuming nothing.
  [[nodiscard]] static Result<int32_t> finish(Sampler& s, const SamplePlan& plan,
                                              const DeviceSampleOutcome& outcome);
  // The kernel's steps 1-2 on the host (the reference the unit tests compare with the chain).
  static void apply_adjustments(std::span<float> logits, const SamplePlan& plan);
};

}  // namespace dsv41::sampling
