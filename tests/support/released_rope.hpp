// The released model's RoPE tables (config.json: rope_theta 10000 for the window heads; the
// compressed branch's YaRN scaling, compress_rope_theta 160000; spec model-architecture.md §2.2),
// shared by the tests that rotate at the released dims.
#pragma once

#include <vector>

#include "config/model_config.hpp"
#include "model/attention/rope.hpp"

namespace dsv41::test {

inline RopeScaling released_yarn_scaling() {
  RopeScaling s;
  s.rope_type = "yarn";
  s.factor = 16;
  s.beta_fast = 32;
  s.beta_slow = 1;
  s.original_max_position_embeddings = 65536;
  return s;
}

// compress = false: the main table (theta 10000); true: the YaRN "compress" table.
inline std::vector<float> released_rope_table(bool compress, int rope_dim) {
  if (!compress) return rope_inv_freq_default(10000.0, rope_dim);
  return rope_inv_freq_yarn(160000.0, rope_dim, released_yarn_scaling());
}

}  // namespace dsv41::test
