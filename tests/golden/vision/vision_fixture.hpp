// A tiny vision checkpoint for tests: the tiny8 oracle model (its shards linked) with a small
// vision_config (hidden 32, 2 heads, 2 blocks, patch 2, 3x3 merge, 40-token spans, min 36 pixels)
// and a seeded random `vision.*` / `aligner.*` / `image_*` shard. No public oracle runs the
// vision tower (the HF port ignores it, spec §1 sources): the tests recompute its formulas from
// spec §7 in double precision and check the span's plumbing into the text model.
#pragma once

#include <set>
#include <string>

namespace dsv41::test {

struct TinyVision {
  static constexpr int kHidden = 32, kHeads = 2, kLayers = 2, kInter = 24, kPatch = 2;
  static constexpr int kDownsample = 3, kMaxTokens = 40, kMinPixels = 36;
  static constexpr int kTextDim = 96;  // tiny8 hidden_size
};

// Writes the checkpoint into a fresh temp directory and returns it. Tensors named in `drop` are
// left out; `zero_blocks` writes wo, its bias and w2 as zeros (every block is then the identity).
std::string make_tiny8_vision(const std::set<std::string>& drop = {}, bool zero_blocks = false);

}  // namespace dsv41::test
