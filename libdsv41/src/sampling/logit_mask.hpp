// The mask step every TokenConstraint ends with (tool_call_constraint, json_constraint).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dsv41::sampling {

// Sets every logit but those of `allowed` to -inf. An allowed token whose logit was already -inf
// (a -inf logit_bias, the model's own) gets 0: the constraint must stay completable. Throws
// kInternal naming `who` when nothing is allowed or an id is outside the logits.
void keep_only(std::span<float> logits, const std::vector<int32_t>& allowed, const char* who);

}  // namespace dsv41::sampling
