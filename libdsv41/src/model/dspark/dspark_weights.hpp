// The DSpark draft module `mtp.{s}.*` (spec model-architecture.md §1.5, §6.1): S stages (3
// released), each a window-only V4.1 block with its own MoE (dspark_n_routed_experts routed,
// top dspark_num_experts_per_tok, one shared expert); stage 0 adds the target-feature projection,
// the last stage the final norm, the Markov head and the confidence head. Embedding and head are
// the target's. Bound by ModelWeights::bind when asked for (ModelParams.dspark).
#pragma once

#include <vector>

#include "model/attention/attention_layer.hpp"
#include "model/linear.hpp"
#include "model/mhc.hpp"
#include "model/moe.hpp"

namespace dsv41 {

struct DsparkStage {
  std::vector<float> attn_norm, ffn_norm;  // [D]
  HcSiteWeights hc_attn, hc_ffn;
  AttentionLayer attn;  // `mtp.s.attn.*`, window only, main RoPE; layer id L + s
  MoeWeights ffn;       // `mtp.s.ffn.*`
};

struct DsparkWeights {
  std::vector<DsparkStage> stages;
  Linear main_proj;               // mtp.0.main_proj [D, n_taps·D]
  std::vector<float> main_norm;   // mtp.0.main_norm [D]
  std::vector<float> norm;        // mtp.{S-1}.norm [D]
  Linear markov_embed;            // mtp.{S-1}.markov_head.embed [V, R] (a row gather)
  Linear markov_head;             // mtp.{S-1}.markov_head.head [V, R]
  std::vector<float> confidence;  // mtp.{S-1}.confidence_head.proj [1, D + R]
};

}  // namespace dsv41
