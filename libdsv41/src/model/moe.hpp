// Mixture of experts (spec model-architecture.md §4): sqrtsoftplus/noaux_tc
// router, SwiGLU experts with the swiglu_limit clamp, one shared expert, fp32
// combine. Routed experts are computed through ExpertProvider so another weight
// format (EXL3) can replace the checkpoint's FP4 experts.
#pragma once

#include <cstdint>
#include <vector>

#include "config/model_config.hpp"
#include "model/linear.hpp"

namespace dsv41 {

class ThreadPool;

// One SwiGLU expert: w1 (gate) and w3 (up) [inter, D], w2 (down) [D, inter].
struct ExpertWeights {
  Linear w1, w2, w3;
};

// `layers.L.ffn.*`.
struct MoeWeights {
  std::vector<float> gate;               // ffn.gate.weight [E, D] (BF16 on disk)
  std::vector<float> bias;               // ffn.gate.bias [E]: selection only
  std::vector<float> bias_vl;            // ffn.gate.bias_vl [E]: selection at image-span positions
  ExpertWeights shared;                  // ffn.shared_experts, inter = n_shared_experts ·
                                         // moe_intermediate_size (a TP rank: its ShardPlan
                                         // shared_inter rows of w1/w3 and columns of w2)
  std::vector<ExpertWeights> experts;    // ffn.experts.{0..E-1} (FP4); a TP rank binds only
                                         // [expert_begin, expert_end), the rest stay unbound
  int expert_begin = 0, expert_end = 0;  // the routed experts this rank computes
};

struct MoeShape {
  int64_t dim = 0;    // hidden_size
  int n_experts = 0;  // n_routed_experts
  int64_t inter = 0;  // moe_intermediate_size (a routed expert's width); 0 = from the weights
  int top_k = 0;      // num_experts_per_tok
  float gate_temp = 1.0f;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;
  float swiglu_limit = 0.0f;  // <= 0: no clamp
};

// The §4 router/expert constants of `t` for a MoE of n_experts routed experts, top_k per token
// (the backbone's n_routed_experts / num_experts_per_tok, or DSpark's).
MoeShape moe_shape(const TextConfig& t, int n_experts, int top_k);

// Routed-expert compute: y[n, D] = (route_w[r] · SwiGLU(x[r]·W1ᵀ, x[r]·W3ᵀ)) ·
// W2ᵀ for the n rows x [n, D] that chose expert `expert` of layer `layer` (the
// weight multiplies BEFORE W2, §4.3).
class ExpertProvider {
 public:
  virtual ~ExpertProvider() = default;
  virtual void forward(int layer, int expert, const float* x, int64_t n, const float* route_w,
                       float* y, ThreadPool* pool) const = 0;
};

// ExpertProvider over the checkpoint's own expert weights (layers[L] = that
// layer's MoeWeights).
class CheckpointExperts : public ExpertProvider {
 public:
  CheckpointExperts(std::vector<const MoeWeights*> layers, float swiglu_limit)
      : layers_(std::move(layers)), limit_(swiglu_limit) {}
  void forward(int layer, int expert, const float* x, int64_t n, const float* route_w, float* y,
               ThreadPool* pool) const override;

 private:
  std::vector<const MoeWeights*> layers_;
  float limit_;
};

// The §4 activation on precomputed projections, in place: h[r, i] = route_w[r] ·
// SiLU(min(g, limit)) · clamp(u, ±limit) for g, u [n, inter] (g is overwritten with h).
// route_w may be null (weight 1); limit <= 0 disables the clamp. Other ExpertProviders (EXL3)
// call this between their own W1/W3 and W2 projections.
void swiglu_activate(float* g, const float* u, int64_t n, int64_t inter, const float* route_w,
                     float limit);

// The clamped SwiGLU expert on x [n, D] -> y [n, D]; route_w [n] or nullptr
// (weight 1).
void swiglu_expert(const ExpertWeights& e, const float* x, int64_t n, const float* route_w,
                   float limit, float* y, ThreadPool* pool);

// Router output for T tokens.
struct Routing {
  std::vector<int32_t> ids;          // [T, k], descending biased score
  std::vector<float> weights;        // [T, k], normalised (+1e-20) × routed_scaling_factor
  std::vector<float> biased_scores;  // [T, E]: sqrtsoftplus(a) + bias (the top-k input)
};

// §4 router on x [T, D] (the ffn_norm output); image_flags [T] or null selects
// bias_vl.
Routing route(const MoeWeights& w, const MoeShape& s, const float* x, int64_t T,
              const uint8_t* image_flags);

// Full MoE sublayer: y [T, D] = shared(x) + Σ_i routed_i(x). `routing`
// (optional) receives the router output for tracing. Only experts in
// [w.expert_begin, w.expert_end) are computed and w.shared may be a shard: on a
// tensor-parallel rank y is this rank's partial sum (routing is replicated).
void moe_forward(const MoeWeights& w, const MoeShape& s, int layer, const float* x, int64_t T,
                 const uint8_t* image_flags, const ExpertProvider& experts, ThreadPool* pool,
                 float* y, Routing* routing);

}  // namespace dsv41
