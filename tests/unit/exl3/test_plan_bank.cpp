// Allocation plan parsing, bank-root resolution (relative, absolute, re-rooted), bank resolution
// errors, per-rank expert ranges and the FP4 fallback of ExpertStore.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/check.hpp"
#include "core/thread_pool.hpp"
#include "exl3/allocation_plan.hpp"
#include "exl3/exl3_linear.hpp"
#include "exl3/expert_bank.hpp"
#include "exl3/expert_store.hpp"
#include "loader/checkpoint.hpp"
#include "support/tolerance.hpp"
#include "synth_exl3.hpp"

using namespace dsv41;
using namespace dsv41::exl3;
using Catch::Matchers::Contains;

namespace {

std::string plan_error(const std::string& json) {
  try {
    AllocationPlan::parse(json, "p.json");
  } catch (const detail::Failure& e) {
    return e.message();
  }
  return "";
}

// A model dir with one root `qn` holding layer 0 experts 0..3 at K2 (hidden 128, inter 128).
struct MiniModel {
  test::TempDir dir;
  MiniModel() {
    test::TensorSet set;
    for (int e = 0; e < 4; ++e) test::add_expert(set, 0, e, 128, 128, 2, 100 + 50 * e);
    set.write(dir.str("exl3/qn/K2/L00.part.safetensors"));
  }
  std::string open_error(const std::string& plan_json, int n_experts = 4) {
    try {
      ExpertBank::Options opt;
      opt.n_experts = n_experts;
      ExpertBank::open(dir.str(), AllocationPlan::parse(plan_json, "plan.json"), opt);
    } catch (const detail::Failure& e) {
      return e.message();
    }
    return "";
  }
};

}  // namespace

TEST_CASE("exl3 plan: fields, states and override order", "[unit][exl3]") {
  const AllocationPlan p = AllocationPlan::parse(
      R"({"layers": {"0": "K2", "3": "K5"}, "keep_native": {"0": [1, 2]},
          "expert_state": {"0": {"2": "K3"}}, "qdir": "qn:q31:/abs/q31s", "extra": 1})",
      "p.json");
  REQUIRE(p.qdir == std::vector<std::string>{"qn", "q31", "/abs/q31s"});
  REQUIRE(p.covers(0));
  REQUIRE(!p.covers(1));
  REQUIRE(p.state(0, 0) == "K2");
  REQUIRE(p.state(0, 1) == "native");
  REQUIRE(p.state(0, 2) == "K3");  // expert_state applies after keep_native
  REQUIRE(p.state(3, 7) == "K5");
  REQUIRE(state_bits("K5", "x") == 5);
  REQUIRE(state_bits("native", "x") == kNativeState);
}

TEST_CASE("exl3 plan: malformed plans are rejected by name", "[unit][exl3]") {
  REQUIRE_THAT(plan_error("{"), Contains("p.json: plan is not valid JSON"));
  REQUIRE_THAT(plan_error(R"({"qdir": "qn"})"), Contains("p.json: plan has no 'layers' field"));
  REQUIRE_THAT(plan_error(R"({"layers": {"0": "K2"}})"), Contains("'qdir'"));
  REQUIRE_THAT(plan_error(R"({"layers": {"0": "K9"}, "qdir": "qn"})"),
               Contains("plan field 'layers.0'") && Contains("state 'K9'"));
  REQUIRE_THAT(plan_error(R"({"layers": {"0": "Q3"}, "qdir": "qn"})"), Contains("state 'Q3'"));
  REQUIRE_THAT(plan_error(R"({"layers": {"x": "K2"}, "qdir": "qn"})"),
               Contains("key 'x' is not a non-negative integer"));
  REQUIRE_THAT(plan_error(R"({"layers": {"0": "K2"}, "expert_state": {"1": {"0": "K3"}},
                              "qdir": "qn"})"),
               Contains("'expert_state' names layer 1 which is not in 'layers'"));
  REQUIRE_THAT(plan_error(R"({"layers": {"0": "K2"}, "keep_native": {"0": "3"}, "qdir": "qn"})"),
               Contains("'keep_native.0' must be an array"));
  REQUIRE_THAT(
      plan_error(R"({"layers": {"0": "K2"}, "keep_native": {"0": [4294967296]}, "qdir": "qn"})"),
      Contains("'keep_native.0' holds expert id 4294967296, past the int range"));
  REQUIRE_THAT(plan_error(R"({"layers": {"0": "K2"}, "qdir": "qn::q31"})"),
               Contains("has an empty entry"));
  REQUIRE_THROWS_WITH(AllocationPlan::load("/nonexistent/plan.json"),
                      Contains("/nonexistent/plan.json: cannot read"));
}

TEST_CASE("exl3 bank roots: relative, absolute and re-rooted paths", "[unit][exl3]") {
  MiniModel m;
  std::filesystem::create_directories(m.dir.str("exl3/q31"));
  AllocationPlan p = AllocationPlan::parse(
      R"({"layers": {}, "qdir": "qn:exl3/q31:/model/exl3/q31:/elsewhere/qn"})", "plan.json");
  p.qdir.push_back(m.dir.str("exl3/qn"));  // absolute and existing: used as is
  const auto roots = resolve_bank_roots(p, m.dir.str());
  REQUIRE(roots.size() == 5);
  REQUIRE(roots[0].path == m.dir.str("exl3/qn"));
  REQUIRE(!roots[0].rerooted);
  REQUIRE(roots[1].path == m.dir.str("exl3/q31"));
  REQUIRE(roots[2].path == m.dir.str("exl3/q31"));  // launcher-style path, by its exl3/ suffix
  REQUIRE(roots[2].rerooted);
  REQUIRE(roots[3].path == m.dir.str("exl3/qn"));  // no exl3/ in it: by its last component
  REQUIRE(roots[3].rerooted);
  REQUIRE(roots[4].path == m.dir.str("exl3/qn"));
  REQUIRE(!roots[4].rerooted);

  const AllocationPlan missing =
      AllocationPlan::parse(R"({"layers": {}, "qdir": "qn:q99"})", "plan.json");
  REQUIRE_THROWS_WITH(resolve_bank_roots(missing, m.dir.str()),
                      Contains("plan.json: bank root 'q99'") && Contains(m.dir.str("exl3/q99")) &&
                          Contains("not a directory"));
}

TEST_CASE("exl3 bank: resolution errors", "[unit][exl3]") {
  MiniModel m;
  REQUIRE(m.open_error(R"({"layers": {"0": "K2"}, "qdir": "qn"})") == "");
  SECTION("an expert missing from every bank file") {
    REQUIRE_THAT(m.open_error(R"({"layers": {"0": "K2"}, "qdir": "qn"})", 5),
                 Contains("layer 0 expert 4 (state K2) is in no bank file") &&
                     Contains("K2/L00.part.safetensors"));
  }
  SECTION("a K without any bank file") {
    REQUIRE_THAT(m.open_error(R"({"layers": {"0": "K2"}, "expert_state": {"0": {"1": "K3"}},
                                   "qdir": "qn"})"),
                 Contains("layer 0 expert 1 (state K3) is in no bank file"));
  }
  SECTION("a trellis whose K disagrees with the plan") {
    test::TensorSet set;
    test::add_expert(set, 0, 1, 128, 128, 2, 7);  // a K2 expert filed under K5
    set.write(m.dir.str("exl3/qn/K5/L00.safetensors"));
    REQUIRE_THAT(m.open_error(R"({"layers": {"0": "K2"}, "expert_state": {"0": {"1": "K5"}},
                                   "qdir": "qn"})"),
                 Contains("'layers.0.ffn.experts.1.w1' has K = 2") &&
                     Contains("plan plan.json says K5 for layer 0 expert 1"));
  }
  SECTION("a missing bank root") {
    REQUIRE_THAT(m.open_error(R"({"layers": {"0": "K2"}, "qdir": "qn:q31"})"),
                 Contains("bank root 'q31'"));
  }
  SECTION("an expert lacking a projection") {
    test::TensorSet set;
    test::add_exl3(set, "layers.0.ffn.experts.1.w1", 128, 128, 3, 9);
    set.write(m.dir.str("exl3/qn/K3/L00.safetensors"));
    REQUIRE_THAT(m.open_error(R"({"layers": {"0": "K2"}, "expert_state": {"0": {"1": "K3"}},
                                   "qdir": "qn"})"),
                 Contains("no 'layers.0.ffn.experts.1.w3.trellis'"));
  }
  SECTION("an unknown projection and a malformed key") {
    test::TensorSet set;
    test::add_expert(set, 0, 1, 128, 128, 3, 9);
    set.add("layers.0.ffn.experts.1.w4.trellis", DType::kI16, {1}, std::vector<uint8_t>(2));
    set.write(m.dir.str("exl3/qn/K3/L00.safetensors"));
    const std::string plan = R"({"layers": {"0": "K2"}, "expert_state": {"0": {"1": "K3"}},
                                 "qdir": "qn"})";
    REQUIRE_THAT(m.open_error(plan), Contains("'layers.0.ffn.experts.1.w4.trellis': unknown "
                                              "projection"));
    set.remove("layers.0.ffn.experts.1.w4.trellis");
    set.add("layers.0.ffn.routed.1.w1.x", DType::kI16, {1}, std::vector<uint8_t>(2));
    set.write(m.dir.str("exl3/qn/K3/L00.safetensors"));
    REQUIRE_THAT(m.open_error(plan), Contains("bank key 'layers.0.ffn.routed.1.w1.x' is not"));
  }
  SECTION("dims that differ between experts") {
    test::TensorSet set;
    test::add_expert(set, 0, 1, 256, 128, 3, 9);
    set.write(m.dir.str("exl3/qn/K3/L00.safetensors"));
    REQUIRE_THAT(m.open_error(R"({"layers": {"0": "K2"}, "expert_state": {"0": {"1": "K3"}},
                                   "qdir": "qn"})"),
                 Contains("'layers.0.ffn.experts.1.w1' is (in 256, out 128), expected (in 128"));
  }
  SECTION("plan overrides naming an expert beyond the layer") {
    REQUIRE_THAT(m.open_error(R"({"layers": {"0": "K2"}, "expert_state": {"0": {"9": "K3"}},
                                   "qdir": "qn"})"),
                 Contains("expert_state names expert 9 of layer 0, but layers have 4 experts"));
  }
}

TEST_CASE("exl3 expert ranges per TP rank", "[unit][exl3]") {
  REQUIRE(expert_range(384, 1, 0).first == 0);
  REQUIRE(expert_range(384, 1, 0).last == 384);
  REQUIRE(expert_range(384, 2, 1).first == 192);
  REQUIRE(expert_range(384, 2, 1).last == 384);
  REQUIRE(expert_range(384, 3, 1).first == 128);
  REQUIRE(expert_range(384, 3, 1).last == 256);
  REQUIRE(expert_range(10, 3, 0).last == 3);
  REQUIRE(expert_range(10, 3, 2).first == 6);
  REQUIRE(expert_range(10, 3, 2).last == 10);
  REQUIRE_THROWS_WITH(expert_range(384, 2, 2), Contains("rank 2 of 2"));
  REQUIRE_THROWS_WITH(expert_range(384, 0, 0), Contains("expert range"));
}

TEST_CASE("exl3 expert store: native FP4 fallback and EXL3 experts", "[unit][exl3]") {
  MiniModel m;
  // Native checkpoint: layer 1 (absent from the plan) and layer 0 expert 3 (kept native).
  const int64_t in = 128, out = 64;
  test::TensorSet native;
  std::vector<uint8_t> scale(out * in / 32);
  for (size_t i = 0; i < scale.size(); ++i) scale[i] = static_cast<uint8_t>(125 + i % 4);
  for (int layer : {0, 1}) {
    native.add(fmt::format("layers.{}.ffn.experts.3.w1.weight", layer), DType::kI8, {out, in / 2},
               test::random_bytes(out * in / 2, 31 + layer));
    native.add(fmt::format("layers.{}.ffn.experts.3.w1.scale", layer), DType::kF8E8M0,
               {out, in / 32}, scale);
  }
  native.write(m.dir.str("model.safetensors"));
  auto ckpt = Checkpoint::open(m.dir.str());
  ExpertBank::Options opt;
  opt.n_experts = 4;
  auto bank = ExpertBank::open(
      m.dir.str(),
      AllocationPlan::parse(R"({"layers": {"0": "K2"}, "keep_native": {"0": [3]}, "qdir": "qn"})",
                            "plan.json"),
      opt);
  REQUIRE(bank->find(0, 3) == nullptr);
  ThreadPool pool(2);
  ExpertStore store(bank.get(), ckpt.get());
  REQUIRE(store.has(0, 0));
  REQUIRE(store.has(0, 3));
  REQUIRE(store.has(1, 3));
  REQUIRE(!store.has(1, 0));
  REQUIRE_THROWS_WITH(store.shape(1, 0, ExpertProj::kGate),
                      Contains("routed expert 0 of layer 1 is neither"));
  REQUIRE_THROWS_WITH(store.shape(1, 3, ExpertProj::kDown),
                      Contains("'layers.1.ffn.experts.3.w2.weight' not found"));
  const ExpertShape s = store.shape(1, 3, ExpertProj::kGate);
  REQUIRE(s.in == in);
  REQUIRE(s.out == out);

  std::vector<float> dense(out * in);
  const TensorView w = ckpt->get("layers.1.ffn.experts.3.w1.weight");
  dequant_fp4_rowblocked(w.data, scale.data(), out, in, 32, dense.data());
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  const size_t rows = 3;
  std::vector<float> x(rows * in), y(rows * out), want(rows * out);
  for (float& v : x) v = normal(rng);
  store.linear(1, 3, ExpertProj::kGate, x.data(), rows, y.data(), &pool);
  double ymax = 0;
  for (size_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0;
      for (int64_t i = 0; i < in; ++i) acc += double(x[r * in + i]) * dense[o * in + i];
      want[r * out + o] = static_cast<float>(acc);
      ymax = std::max(ymax, std::fabs(acc));
    }
  test::require_close("fp4 y", y, want, y.size(), 1e-5 * ymax);

  // EXL3 experts group by K; the K2 bank expert 0 applies through the same entry point.
  REQUIRE(bank->experts_by_k(0).at(2) == std::vector<int>{0, 1, 2});
  const ExpertShape g = store.shape(0, 0, ExpertProj::kDown);
  REQUIRE(g.in == 128);
  REQUIRE(g.out == 128);
}

TEST_CASE("exl3 expert store: model dims padded to 128 (spec §2.1) and their errors",
          "[unit][exl3]") {
  MiniModel m;
  ExpertBank::Options opt;
  opt.n_experts = 4;
  auto bank = ExpertBank::open(
      m.dir.str(),
      AllocationPlan::parse(R"({"layers": {"0": "K2"}, "keep_native": {"0": [3]}, "qdir": "qn"})",
                            "plan.json"),
      opt);
  REQUIRE(bank->hidden() == 128);
  REQUIRE(bank->inter() == 128);
  // hidden 96 and inter 64 are stored as 128 x 128: x is zero-extended, y cut to `out`.
  ExpertStore store(bank.get(), nullptr, ExpertDims{96, 64});
  const ExpertShape gate = store.shape(0, 1, ExpertProj::kGate);
  const ExpertShape down = store.shape(0, 1, ExpertProj::kDown);
  REQUIRE((gate.in == 96 && gate.out == 64));
  REQUIRE((down.in == 64 && down.out == 96));
  const std::vector<float> W = reconstruct_weight(bank->find(0, 1)->proj[0]);  // [128, 128]
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  const size_t rows = 2;
  std::vector<float> x(rows * 96), y(rows * 64, 7.0f), want(rows * 64);
  for (float& v : x) v = normal(rng);
  store.linear(0, 1, ExpertProj::kGate, x.data(), rows, y.data());
  double ymax = 0;
  for (size_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < 64; ++o) {
      double acc = 0;
      for (int64_t i = 0; i < 96; ++i) acc += double(x[r * 96 + i]) * W[i * 128 + o];
      want[r * 64 + o] = static_cast<float>(acc);
      ymax = std::max(ymax, std::fabs(acc));
    }
  test::require_close("padded y", y, want, y.size(), 1e-5 * ymax);

  REQUIRE_THROWS_WITH(ExpertStore(bank.get(), nullptr, ExpertDims{96, 0}),
                      Contains("model dims hidden 96 / inter 0 must both be set"));
  REQUIRE_THROWS_WITH(
      ExpertStore(bank.get(), nullptr, ExpertDims{200, 64}),
      Contains("bank experts are (hidden 128, inter 128) but the model needs hidden_size 200 and "
               "moe_intermediate_size 64 (stored padded to 128: hidden 256, inter 128)"));
}

TEST_CASE("exl3 plan file: found, chosen, or a named error", "[unit][exl3]") {
  test::TempDir d;
  REQUIRE(!find_plan_file(d.str(), "").has_value());  // not a Spark directory
  std::filesystem::create_directories(d.str("exl3/plan"));
  REQUIRE_THROWS_WITH(find_plan_file(d.str(), ""), Contains("exl3/plan: no plan *.json"));
  { std::ofstream(d.str("exl3/plan/b.json")) << "{}"; }
  REQUIRE(*find_plan_file(d.str(), "") == d.str("exl3/plan/b.json"));
  { std::ofstream(d.str("exl3/plan/a.json")) << "{}"; }
  REQUIRE_THROWS_WITH(find_plan_file(d.str(), ""), Contains("2 plans (a.json, b.json)"));
  REQUIRE(*find_plan_file(d.str(), "a") == d.str("exl3/plan/a.json"));
  REQUIRE(*find_plan_file(d.str(), "b.json") == d.str("exl3/plan/b.json"));
  REQUIRE(*find_plan_file(d.str(), d.str("exl3/plan/a.json")) == d.str("exl3/plan/a.json"));
  REQUIRE_THROWS_WITH(find_plan_file(d.str(), "c"),
                      Contains("EXL3 plan 'c' (DSV41_EXL3_PLAN / --plan) is neither a file nor"));
}
