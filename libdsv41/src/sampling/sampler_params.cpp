// SamplerParams::validate: ranges of vLLM SamplingParams._verify_args (vllm/sampling_params.py),
// each failure naming the field and its value.
#include <cmath>

#include "core/check.hpp"
#include "dsv41/sampler.hpp"

namespace dsv41 {

Status SamplerParams::validate() const {
  return detail::capture_status([&] {
    DSV41_CHECK(std::isfinite(temperature) && temperature >= 0.0f, kInvalidArgument,
                "SamplerParams.temperature = {} must be finite and >= 0 (0 = greedy)", temperature);
    DSV41_CHECK(top_k >= -1, kInvalidArgument,
                "SamplerParams.top_k = {} must be 0 or -1 (off) or >= 1", top_k);
    DSV41_CHECK(top_p > 0.0f && top_p <= 1.0f, kInvalidArgument,
                "SamplerParams.top_p = {} must be in (0, 1]", top_p);
    DSV41_CHECK(min_p >= 0.0f && min_p <= 1.0f, kInvalidArgument,
                "SamplerParams.min_p = {} must be in [0, 1]", min_p);
    DSV41_CHECK(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f, kInvalidArgument,
                "SamplerParams.repetition_penalty = {} must be finite and > 0 (1 = off)",
                repetition_penalty);
    DSV41_CHECK(presence_penalty >= -2.0f && presence_penalty <= 2.0f, kInvalidArgument,
                "SamplerParams.presence_penalty = {} must be in [-2, 2]", presence_penalty);
    DSV41_CHECK(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f, kInvalidArgument,
                "SamplerParams.frequency_penalty = {} must be in [-2, 2]", frequency_penalty);
    for (const auto& [id, bias] : logit_bias) {
      DSV41_CHECK(id >= 0, kInvalidArgument,
                  "SamplerParams.logit_bias has token id {}; ids must be >= 0", id);
      DSV41_CHECK(!std::isnan(bias) && bias != INFINITY, kInvalidArgument,
                  "SamplerParams.logit_bias[{}] = {} must be a number below +inf (-inf bans "
                  "the token)",
                  id, bias);
    }
  });
}

}  // namespace dsv41
