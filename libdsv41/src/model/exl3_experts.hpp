// Routed experts from EXL3 banks (spec exl3-format.md §4): the model-side adapter from the
// per-projection exl3::ProjectionProvider (EXL3 bank or release FP4, decoded on the fly) to the
// whole-expert ExpertProvider of the MoE (moe.hpp), and the load-time opening of a Spark
// checkpoint's plan + banks against the model config. See docs/formats/exl3.md "Integration".
#pragma once

#include <memory>
#include <string>

#include "config/model_config.hpp"
#include "exl3/expert_bank.hpp"
#include "exl3/projection_provider.hpp"
#include "model/moe.hpp"

namespace dsv41 {

// y[n, D] = (route_w ⊙ SwiGLU(x·W1ᵀ, x·W3ᵀ)) · W2ᵀ with each projection applied through `p`
// (model.cpp-style §4.3 semantics: clamp at swiglu_limit, weight before W2). `p` must outlive
// this object.
class ProjectionExperts final : public ExpertProvider {
 public:
  ProjectionExperts(const exl3::ProjectionProvider& p, float swiglu_limit)
      : p_(p), limit_(swiglu_limit) {}
  void forward(int layer, int expert, const float* x, int64_t n, const float* route_w, float* y,
               ThreadPool* pool) const override;

 private:
  const exl3::ProjectionProvider& p_;
  float limit_;
};

// The EXL3 expert bank of model directory `dir`, or nullptr when it has no `exl3/plan/`
// (a release checkpoint). `plan_choice`: see exl3::find_plan_file (empty = the only plan).
// Throws detail::Failure naming the plan / file / tensor: a plan layer outside
// [0, num_hidden_layers), an expert id >= n_routed_experts, a missing bank root, a planned expert
// in no bank file, a K that disagrees with the trellis shape, bank dims that are not the model's
// hidden_size / moe_intermediate_size (padded to 128).
std::unique_ptr<exl3::ExpertBank> open_expert_bank(const std::string& dir, const ModelConfig& cfg,
                                                   const std::string& plan_choice);

}  // namespace dsv41
