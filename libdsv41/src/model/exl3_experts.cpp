// EXL3 routed experts in the MoE: ProjectionProvider -> ExpertProvider, bank opening (§4.4).
#include "model/exl3_experts.hpp"

#include <vector>

#include "core/check.hpp"
#include "exl3/expert_store.hpp"

namespace dsv41 {

using exl3::ExpertProj;

void ProjectionExperts::forward(int layer, int expert, const float* x, int64_t n,
                                const float* route_w, float* y, ThreadPool* pool) const {
  const exl3::ExpertShape gate = p_.shape(layer, expert, ExpertProj::kGate);
  const int64_t inter = gate.out;
  const auto rows = static_cast<size_t>(n);
  std::vector<float> g(rows * inter), u(rows * inter);
  p_.linear(layer, expert, ExpertProj::kGate, x, rows, g.data(), pool);  // g = x·W1ᵀ [n, inter]
  p_.linear(layer, expert, ExpertProj::kUp, x, rows, u.data(), pool);    // u = x·W3ᵀ [n, inter]
  swiglu_activate(g.data(), u.data(), n, inter, route_w, limit_);        // h in g
  p_.linear(layer, expert, ExpertProj::kDown, g.data(), rows, y, pool);  // y = h·W2ᵀ [n, D]
}

std::unique_ptr<exl3::ExpertBank> open_expert_bank(const std::string& dir, const ModelConfig& cfg,
                                                   const std::string& plan_choice) {
  const std::optional<std::string> path = exl3::find_plan_file(dir, plan_choice);
  if (!path) return nullptr;
  exl3::AllocationPlan plan = exl3::AllocationPlan::load(*path);
  const TextConfig& t = cfg.text;
  for (const auto& [layer, state] : plan.layers)
    DSV41_CHECK(layer < t.num_hidden_layers, kCorruptFile,
                "{}: plan field 'layers' names layer {}, but {}/config.json has "
                "num_hidden_layers = {}",
                plan.path, layer, dir, t.num_hidden_layers);
  exl3::ExpertBank::Options opt;
  opt.n_experts = t.n_routed_experts;
  opt.hidden = exl3::pad128(t.hidden_size);
  opt.inter = exl3::pad128(t.moe_intermediate_size);
  opt.dims_from =
      fmt::format("{}/config.json hidden_size {}, moe_intermediate_size {}, stored padded to 128",
                  dir, t.hidden_size, t.moe_intermediate_size);
  return exl3::ExpertBank::open(dir, std::move(plan), opt);
}

}  // namespace dsv41
