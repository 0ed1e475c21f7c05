#include "model/moe.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/check.hpp"

namespace dsv41 {

MoeShape moe_shape(const TextConfig& t, int n_experts, int top_k) {
  MoeShape m;
  m.dim = t.hidden_size;
  m.inter = t.moe_intermediate_size;
  m.n_experts = n_experts;
  m.top_k = top_k;
  m.gate_temp = static_cast<float>(t.gate_temp);
  m.norm_topk_prob = t.norm_topk_prob;
  m.routed_scaling_factor = static_cast<float>(t.routed_scaling_factor);
  m.swiglu_limit = static_cast<float>(t.swiglu_limit);
  return m;
}
namespace {

// torch.nn.functional.softplus (beta 1, threshold 20): identity above 20.
float softplus(float a) { return a > 20.0f ? a : std::log1p(std::exp(a)); }

float silu(float g) { return g / (1.0f + std::exp(-g)); }

}  // namespace

void swiglu_activate(float* g, const float* u, int64_t n, int64_t inter, const float* route_w,
                     float limit) {
  for (int64_t r = 0; r < n; ++r) {
    const float w = route_w ? route_w[r] : 1.0f;
    for (int64_t i = 0; i < inter; ++i) {
      float gi = g[r * inter + i], ui = u[r * inter + i];
      if (limit > 0.0f) {  // §4: u to ±limit, g only from above
        ui = std::clamp(ui, -limit, limit);
        gi = std::min(gi, limit);
      }
      g[r * inter + i] = silu(gi) * ui * w;  // the routing weight multiplies BEFORE W2
    }
  }
}

void swiglu_expert(const ExpertWeights& e, const float* x, int64_t n, const float* route_w,
                   float limit, float* y, ThreadPool* pool) {
  const int64_t inter = e.w1.out_features();
  std::vector<float> g(n * inter), u(n * inter);
  e.w1.forward(x, n, g.data(), pool);  // g = x·W1ᵀ [n, inter]
  e.w3.forward(x, n, u.data(), pool);  // u = x·W3ᵀ [n, inter]
  swiglu_activate(g.data(), u.data(), n, inter, route_w, limit);
  e.w2.forward(g.data(), n, y, pool);  // y = h·W2ᵀ [n, D]
}

void CheckpointExperts::forward(int layer, int expert, const float* x, int64_t n,
                                const float* route_w, float* y, ThreadPool* pool) const {
  DSV41_CHECK(layer >= 0 && layer < static_cast<int>(layers_.size()) && layers_[layer], kInternal,
              "CheckpointExperts: layer {} has no MoE weights", layer);
  const MoeWeights& w = *layers_[layer];
  DSV41_CHECK(expert >= 0 && expert < static_cast<int>(w.experts.size()), kInternal,
              "CheckpointExperts: layer {} has no expert {}", layer, expert);
  DSV41_CHECK(w.experts[expert].w1.bound(), kInternal,
              "CheckpointExperts: layer {} expert {} is supplied by another provider (EXL3), not "
              "the checkpoint",
              layer, expert);
  swiglu_expert(w.experts[expert], x, n, route_w, limit_, y, pool);
}

Routing route(const MoeWeights& w, const MoeShape& s, const float* x, int64_t T,
              const uint8_t* image_flags) {
  const int E = s.n_experts, k = s.top_k;
  const int64_t D = s.dim;
  Routing r;
  r.ids.resize(T * k);
  r.weights.resize(T * k);
  r.biased_scores.resize(T * E);
  std::vector<float> score(E);
  std::vector<int> order(E);
  for (int64_t t = 0; t < T; ++t) {
    const float* xt = x + t * D;
    const std::vector<float>& bias = (image_flags && image_flags[t]) ? w.bias_vl : w.bias;
    float* biased = r.biased_scores.data() + t * E;
    for (int e = 0; e < E; ++e) {
      const float* g = w.gate.data() + e * D;
      double acc = 0.0;
      for (int64_t d = 0; d < D; ++d) acc += static_cast<double>(xt[d]) * g[d];
      score[e] = std::sqrt(softplus(static_cast<float>(acc) / s.gate_temp));  // sqrtsoftplus
      biased[e] = score[e] + bias[e];
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
      return biased[a] != biased[b] ? biased[a] > biased[b] : a < b;
    });
    float sum = 0.0f;
    for (int i = 0; i < k; ++i) sum += score[order[i]];
    for (int i = 0; i < k; ++i) {
      r.ids[t * k + i] = order[i];
      float wi = score[order[i]];
      if (s.norm_topk_prob) wi /= (sum + 1e-20f);
      r.weights[t * k + i] = wi * s.routed_scaling_factor;
    }
  }
  return r;
}

void moe_forward(const MoeWeights& w, const MoeShape& s, int layer, const float* x, int64_t T,
                 const uint8_t* image_flags, const ExpertProvider& experts, ThreadPool* pool,
                 float* y, Routing* routing) {
  const int64_t D = s.dim;
  const int k = s.top_k;
  Routing r = route(w, s, x, T, image_flags);
  // Routed part, expert by expert (gather the rows that chose it, compute,
  // scatter-add).
  std::vector<float> routed(T * D, 0.0f);
  std::vector<float> xs, ws, ys;
  DSV41_CHECK(0 <= w.expert_begin && w.expert_begin < w.expert_end && w.expert_end <= s.n_experts,
              kInternal, "layer {}: expert range [{}, {}) outside [0, {})", layer, w.expert_begin,
              w.expert_end, s.n_experts);
  for (int e = w.expert_begin; e < w.expert_end; ++e) {
    std::vector<int64_t> rows;
    ws.clear();
    for (int64_t t = 0; t < T; ++t)
      for (int i = 0; i < k; ++i)
        if (r.ids[t * k + i] == e) {
          rows.push_back(t);
          ws.push_back(r.weights[t * k + i]);
        }
    if (rows.empty()) continue;
    const int64_t n = static_cast<int64_t>(rows.size());
    xs.resize(n * D);
    ys.resize(n * D);
    for (int64_t i = 0; i < n; ++i) std::copy_n(x + rows[i] * D, D, xs.data() + i * D);
    experts.forward(layer, e, xs.data(), n, ws.data(), ys.data(), pool);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t d = 0; d < D; ++d) routed[rows[i] * D + d] += ys[i * D + d];
  }
  swiglu_expert(w.shared, x, T, nullptr, s.swiglu_limit, y,
                pool);  // shared expert, weight 1
  for (int64_t i = 0; i < T * D; ++i) y[i] = routed[i] + y[i];
  if (routing) *routing = std::move(r);
}

}  // namespace dsv41
