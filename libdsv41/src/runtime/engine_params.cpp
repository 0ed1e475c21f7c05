// EngineParams::validate (dsv41/engine.hpp).
#include <string>

#include "dsv41/engine.hpp"

namespace dsv41 {

Status EngineParams::validate() const {
  auto bad = [](const std::string& m) { return Status(ErrorCode::kInvalidArgument, m); };
  if (max_sequences < 1)
    return bad("EngineParams.max_sequences = " + std::to_string(max_sequences) + " must be >= 1");
  if (max_batched_tokens < 1)
    return bad("EngineParams.max_batched_tokens = " + std::to_string(max_batched_tokens) +
               " must be >= 1");
  if (max_context < 2)
    return bad("EngineParams.max_context = " + std::to_string(max_context) + " must be >= 2");
  if (kv_bytes < 1)
    return bad("EngineParams.kv_bytes = " + std::to_string(kv_bytes) + " must be >= 1");
  if (prefix_cache_entries < 0)
    return bad("EngineParams.prefix_cache_entries = " + std::to_string(prefix_cache_entries) +
               " must be >= 0");
  if (max_queue < 1)
    return bad("EngineParams.max_queue = " + std::to_string(max_queue) + " must be >= 1");
  if (speculative_tokens < 0 || speculative_tokens > 15)
    return bad("EngineParams.speculative_tokens = " + std::to_string(speculative_tokens) +
               " must be in [0, 15]");
  if (speculative_method != "ngram" && speculative_method != "dspark")
    return bad("EngineParams.speculative_method = \"" + speculative_method +
               "\" must be \"ngram\" or \"dspark\"");
  if (!(speculative_confidence >= 0.0f && speculative_confidence <= 1.0f))
    return bad("EngineParams.speculative_confidence = " + std::to_string(speculative_confidence) +
               " must be in [0, 1]");
  return Status::ok();
}

}  // namespace dsv41
