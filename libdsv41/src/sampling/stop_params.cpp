// StopParams::validate (ranges of vLLM SamplingParams._verify_args) and finish_reason_name.
#include <string_view>

#include "core/check.hpp"
#include "dsv41/stop.hpp"
#include "sampling/stop_matcher.hpp"

namespace dsv41 {

Status StopParams::validate() const {
  return detail::capture_status([&] {
    for (size_t i = 0; i < stop.size(); ++i) {
      DSV41_CHECK(!stop[i].empty(), kInvalidArgument, "StopParams.stop[{}] is empty", i);
      const size_t bad = sampling::first_invalid_utf8(stop[i]);
      DSV41_CHECK(bad == stop[i].size(), kInvalidArgument,
                  "StopParams.stop[{}] is not valid UTF-8 (byte {} of {})", i, bad, stop[i].size());
    }
    for (size_t i = 0; i < stop_token_ids.size(); ++i) {
      DSV41_CHECK(stop_token_ids[i] >= 0, kInvalidArgument,
                  "StopParams.stop_token_ids[{}] = {} must be >= 0", i, stop_token_ids[i]);
    }
    DSV41_CHECK(max_tokens == kNoTokenLimit || max_tokens >= 1, kInvalidArgument,
                "StopParams.max_tokens = {} must be >= 1 (or kNoTokenLimit = -1)", max_tokens);
    DSV41_CHECK(min_tokens >= 0, kInvalidArgument, "StopParams.min_tokens = {} must be >= 0",
                min_tokens);
    DSV41_CHECK(max_tokens == kNoTokenLimit || min_tokens <= max_tokens, kInvalidArgument,
                "StopParams.min_tokens = {} must be <= max_tokens = {}", min_tokens, max_tokens);
  });
}

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
  }
  return "";
}

}  // namespace dsv41
