// A tiny DSpark checkpoint for tests: the tiny8 oracle model (its files linked, its config with
// num_nextn_predict_layers = 3) plus a synthetic `mtp.*` shard. No public DSpark oracle exists
// (spec §10 items 2-4); the stages reuse tiny8 layers' attention / mHC / MoE tensors (so their
// scales are those of a real tiny block), the rest is seeded random: the draft module is
// structurally complete but untrained, so its drafts are mostly wrong, which the tests use.
#pragma once

#include <set>
#include <string>

namespace dsv41::test {

// Writes the checkpoint into a fresh directory under the system temp dir and returns it. Tensors
// named in `drop` are left out and those in `extra` added as F32 [1] (to test the loader's
// errors).
std::string make_tiny8_dspark(const std::set<std::string>& drop = {},
                              const std::set<std::string>& extra = {});

}  // namespace dsv41::test
