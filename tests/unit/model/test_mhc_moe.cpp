// mHC (spec model-architecture.md §3) and MoE (§4) on hand-checkable inputs:
// Sinkhorn output, the comb orientation comb[j,k] (j = input stream), collapse,
// the pre/post formulas, router selection (bias selects, never weighs; bias_vl
// on image positions), weight normalisation and the SwiGLU clamp with the
// routing weight applied before W2.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <memory>

#include "loader/checkpoint.hpp"
#include "model/mhc.hpp"
#include "model/moe.hpp"

namespace dsv41 {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

TEST_CASE("model: Sinkhorn of equal logits is uniform, output is column-stochastic",
          "[unit][mhc]") {
  float logits[16] = {}, c[16];
  hc_sinkhorn(logits, 4, 20, 1e-6f, c);
  for (float v : c) REQUIRE(v == Approx(0.25f).epsilon(1e-5));
  const float skew[16] = {3, -1, 0, 2, 0.5f, 1, -2, 0, 1, 1, 1, 4, -3, 0, 2, 1};
  hc_sinkhorn(skew, 4, 20, 1e-6f, c);
  for (int k = 0; k < 4; ++k) {
    float col = 0, row = 0;
    for (int j = 0; j < 4; ++j) col += c[j * 4 + k], row += c[k * 4 + j];
    REQUIRE(col == Approx(1.0f).epsilon(1e-5));  // last step normalises columns
    REQUIRE(row == Approx(1.0f).epsilon(1e-3));
  }
}

TEST_CASE(
    "model: expand uses comb(j, k) with j the input stream, collapse "
    "weighs streams by pre",
    "[unit][mhc]") {
  const HcShape s{4, 2};
  float H[8] = {1, 2, 10, 20, 100, 200, 1000, 2000};  // stream j = [j-th pair]
  HcMixes m;
  m.post = {0.5f, 0, 0, 0};
  m.comb.assign(16, 0.0f);
  m.comb[0 * 4 + 1] = 1.0f;  // input stream 0 -> output stream 1
  m.comb[2 * 4 + 3] = 2.0f;  // input stream 2 -> output stream 3
  const float y[2] = {4, 8};
  float out[8];
  hc_expand(y, H, m, s, 1, out);
  const float want[8] = {2, 4, 1, 2, 0, 0, 200, 400};
  for (int i = 0; i < 8; ++i) REQUIRE(out[i] == want[i]);
  const float pre[4] = {1, 0, 0.5f, 0};
  float x[2];
  hc_collapse(H, pre, s, 1, x);
  REQUIRE(x[0] == 51.0f);
  REQUIRE(x[1] == 102.0f);
}

TEST_CASE("model: mixes with fn = 0 reduce to sigmoid(base) (pre + eps, 2·post)", "[unit][mhc]") {
  const HcShape s{4, 3, 20, 1e-6f, 1e-20f};
  HcSiteWeights w;
  w.fn.assign(24 * 12, 0.0f);
  w.scale = {1, 1, 1};
  for (int i = 0; i < 24; ++i) w.base.push_back(0.1f * static_cast<float>(i) - 1.0f);
  std::vector<float> H(12, 0.5f);
  HcMixes m = hc_mixes(w, s, H.data(), 1, nullptr);
  for (int j = 0; j < 4; ++j) {
    REQUIRE(m.pre[j] == Approx(sigmoid(w.base[j]) + 1e-6f));
    REQUIRE(m.post[j] == Approx(2.0f * sigmoid(w.base[4 + j])));
  }
  float c[16];
  hc_sinkhorn(w.base.data() + 8, 4, 20, 1e-6f, c);
  for (int i = 0; i < 16; ++i) REQUIRE(m.comb[i] == c[i]);
}

MoeShape shape3() {
  MoeShape s;
  s.dim = 2;
  s.n_experts = 3;
  s.top_k = 2;
  s.routed_scaling_factor = 1.5f;
  s.swiglu_limit = 10.0f;
  return s;
}

TEST_CASE(
    "model: router: bias selects but does not weigh, bias_vl on image "
    "positions",
    "[unit][moe]") {
  MoeWeights w;
  w.gate = {1, 0, 0, 1, 1, 1};  // a = [x0, x1, x0 + x1]
  w.bias = {0, 5, 0};           // forces expert 1 in
  w.bias_vl = {5, 0, 0};        // forces expert 0 in
  const float x[4] = {1, -2, 1, -2};
  const uint8_t image[2] = {0, 1};
  Routing r = route(w, shape3(), x, 2, image);
  auto sps = [](float a) { return std::sqrt(std::log1p(std::exp(a))); };
  const float s0 = sps(1), s1 = sps(-2), s2 = sps(-1);
  // Text token: biased = [s0, s1 + 5, s2] -> experts 1, 0.
  REQUIRE(r.ids[0] == 1);
  REQUIRE(r.ids[1] == 0);
  REQUIRE(r.weights[0] == Approx(1.5f * s1 / (s0 + s1)));
  REQUIRE(r.weights[1] == Approx(1.5f * s0 / (s0 + s1)));
  REQUIRE(r.biased_scores[1] == Approx(s1 + 5));
  // Image token: biased = [s0 + 5, s1, s2] -> experts 0, 2 (s2 > s1).
  REQUIRE(r.ids[2] == 0);
  REQUIRE(r.ids[3] == 2);
  REQUIRE(r.weights[2] == Approx(1.5f * s0 / (s0 + s2)));
}

// A one-file checkpoint with F32 expert weights, for Linear::bind.
struct ExpertFixture {
  std::filesystem::path dir;
  std::unique_ptr<Checkpoint> ck;
  ExpertWeights e;
  ExpertFixture(const std::vector<float>& w1, const std::vector<float>& w3,
                const std::vector<float>& w2, int64_t inter, int64_t dim) {
    dir = std::filesystem::temp_directory_path() / ("dsv41_moe_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    auto bytes = [](const std::vector<float>& v) {
      return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4);
    };
    write_safetensors((dir / "model.safetensors").string(),
                      {{"w1.weight", DType::kF32, {inter, dim}, bytes(w1)},
                       {"w3.weight", DType::kF32, {inter, dim}, bytes(w3)},
                       {"w2.weight", DType::kF32, {dim, inter}, bytes(w2)}});
    ck = Checkpoint::open(dir.string());
    QuantizationConfig q;
    e.w1 = Linear::bind(*ck, "w1", inter, dim, q);
    e.w3 = Linear::bind(*ck, "w3", inter, dim, q);
    e.w2 = Linear::bind(*ck, "w2", dim, inter, q);
  }
  ~ExpertFixture() { std::filesystem::remove_all(dir); }
};

TEST_CASE("model: expert: u clamped to ±limit, g only from above, weight before W2",
          "[unit][moe]") {
  // inter 2, dim 1: g = [20x, -20x], u = [30x, -30x]; W2 = [1, 1].
  ExpertFixture f({20, -20}, {30, -30}, {1, 1}, 2, 1);
  const float x[1] = {1};
  const float w[1] = {0.25f};
  float y[1];
  swiglu_expert(f.e, x, 1, w, 10.0f, y, nullptr);
  auto silu = [](float g) { return g / (1 + std::exp(-g)); };
  // unit 0: g = min(20, 10) = 10, u = 10; unit 1: g = -20 (no lower clamp), u =
  // -10.
  const float want = 0.25f * (silu(10) * 10 + silu(-20) * -10);
  REQUIRE(y[0] == Approx(want).epsilon(1e-6));
  swiglu_expert(f.e, x, 1, nullptr, 0.0f, y, nullptr);  // limit 0: no clamp
  REQUIRE(y[0] == Approx(silu(20) * 30 + silu(-20) * -30).epsilon(1e-6));
}

}  // namespace
}  // namespace dsv41
