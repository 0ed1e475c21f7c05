// ModelWeights: every tensor of the text model bound by its released name (spec
// model-architecture.md §1.5) with dtype/shape checks, as zero-copy views into
// the mmapped checkpoint (small fp32 tensors are converted once). bind() also
// proves the inventory: every checkpoint tensor is either used or in a
// knowingly ignored group (DSpark `mtp.*` unless bound, `vision.*`, `aligner.*`, `image_*`);
// anything else is an error naming the tensor and its file.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/model_config.hpp"
#include "engram/engram_layer.hpp"
#include "loader/checkpoint.hpp"
#include "model/attention/attention_layer.hpp"
#include "model/dspark/dspark_weights.hpp"
#include "model/linear.hpp"
#include "model/mhc.hpp"
#include "model/moe.hpp"
#include "model/shard_plan.hpp"

namespace dsv41 {

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;  // [D]
  HcSiteWeights hc_attn, hc_ffn;
  AttentionLayer attn;  // binds and runs the attention sublayer (attention/)
  MoeWeights ffn;
  std::unique_ptr<engram::EngramWeights> engram;  // `engram.*` (§5), null unless roles[L].engram
};

// Tensor groups present in a released checkpoint that the text model does not
// read.
struct IgnoredGroup {
  std::string prefix;  // "mtp.", "vision.", "aligner.", "image_"
  size_t count = 0;
  uint64_t bytes = 0;
};

struct ModelWeights {
  std::unique_ptr<RopeTables> rope;  // the AttentionLayers point into it (stable address)
  ShardPlan plan;                    // what this rank holds (world 1: everything)
  TensorView embed;                  // embed.weight [V, D] BF16 (rows gathered on lookup)
  std::vector<float> norm;           // norm.weight [D]
  Linear head;                       // head.weight rows plan.vocab of [V, D] BF16, fp32 logits
  std::vector<LayerWeights> layers;
  std::unique_ptr<DsparkWeights> dspark;  // `mtp.*` when bound with dspark = true, else null
  std::vector<IgnoredGroup> ignored;

  // (layer, expert) -> whether another ExpertProvider (the EXL3 banks) supplies that routed
  // expert: its `layers.L.ffn.experts.E.*` tensors are then not bound (MoeWeights::experts[E]
  // stays unbound) and, if the checkpoint has them anyway, counted in the ignored group
  // kExternalExpertsGroup instead of failing the inventory (the Spark loader skips them too).
  using ExternalExperts = std::function<bool(int layer, int expert)>;
  static constexpr const char* kExternalExpertsGroup = "layers.L.ffn.experts.E (EXL3-supplied)";

  // Throws detail::Failure naming the tensor and file: missing, wrong
  // dtype/shape, or a tensor that no part of the text model uses. plan (optional): bind only
  // this tensor-parallel rank's shard (docs/tp.md); other ranks' experts are counted in the
  // inventory but not bound. external: experts supplied elsewhere (above). dspark: also bind the
  // DSpark draft module `mtp.*` (§6; kUnsupported without num_nextn_predict_layers or under
  // tensor parallelism); otherwise `mtp.*` is an ignored group.
  static std::unique_ptr<ModelWeights> bind(const Checkpoint& ck, const ModelConfig& cfg,
                                            const ShardPlan* plan = nullptr,
                                            const ExternalExperts& external = {},
                                            bool dspark = false);

  // dst [D] = embed.weight[id] in fp32.
  void embed_row(int32_t id, float* dst) const;
};

}  // namespace dsv41
