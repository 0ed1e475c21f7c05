// [golden] A tiny model whose routed experts are EXL3 (tiny_exl3_model.hpp) against its dense
// twin: bank/plan detection at load, the MoE expert level, end-to-end logits, and the named
// load errors of a Spark directory (through the public Model::load).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <random>

#include "dsv41/model.hpp"
#include "model/exl3_experts.hpp"
#include "model/transformer.hpp"
#include "tiny_exl3_model.hpp"

namespace dsv41 {
namespace {

using test::TinyExl3Model;

// tiny8 prompt1 (37 tokens, tests/fixtures/golden/tiny8/golden.json).
const std::vector<int32_t> kPrompt = {
    0,   593, 59,  305, 260, 84,  71,  260, 561, 69,  574, 260, 358, 575, 86,  16,  594, 50, 585,
    410, 82,  355, 267, 420, 273, 260, 540, 354, 369, 421, 564, 526, 14,  314, 420, 595, 596};

// End-to-end tolerance of the EXL3 model vs its dense twin. The EXL3 path multiplies in the
// Hadamard domain in fp32 (had(had(x⊙suh)·Ŵ)⊙svh), the twin by the fp32-rounded W: per expert
// they differ by <= 7e-7 of max|y| (the expert-level test). On logits of magnitude ~7 that is
// ~5e-6 at most positions (median; kTypicalTol), with larger excursions (measured 4.3e-4 at
// position 6, 2e-5..1e-4 at positions 1-11, back to ~5e-6 after): layer 2's attention input differs
// by 1.8e-6 and its output by 4.5e-4 at positions 6-11 only, a knife-edge of the quantised KV state
// (docs/formats/exl3.md "Integration", docs/testing.md for tiny40); kLogitsTol is tiny8's
// documented cross-implementation tolerance (tests/fixtures/golden/tiny8/README.md, abs 2e-3,
// argmax identical).
constexpr float kLogitsTol = 2e-3f;
constexpr float kTypicalTol = 2e-5f;

// Records every routed-expert call, then forwards to the model's own provider.
class CountingExperts final : public ExpertProvider {
 public:
  explicit CountingExperts(const ExpertProvider& inner) : inner_(inner) {}
  void forward(int layer, int expert, const float* x, int64_t n, const float* route_w, float* y,
               ThreadPool* pool) const override {
    calls[{layer, expert}] += n;
    inner_.forward(layer, expert, x, n, route_w, y, pool);
  }
  mutable std::map<std::pair<int, int>, int64_t> calls;  // (layer, expert) -> rows

 private:
  const ExpertProvider& inner_;
};

std::vector<float> run(const Transformer& m, int64_t chunk) {
  SequenceState st = m.new_sequence();
  std::vector<float> out;
  for (size_t at = 0; at < kPrompt.size(); at += static_cast<size_t>(chunk)) {
    const size_t n = std::min(kPrompt.size() - at, static_cast<size_t>(chunk));
    const std::vector<float> l = m.forward(st, std::span<const int32_t>(kPrompt.data() + at, n));
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

std::vector<int64_t> argmax_rows(const std::vector<float>& logits, int64_t V) {
  std::vector<int64_t> out;
  for (size_t r = 0; r * V < logits.size(); ++r) {
    const float* row = logits.data() + r * V;
    out.push_back(std::max_element(row, row + V) - row);
  }
  return out;
}

TEST_CASE("exl3 model: a Spark directory takes the planned experts from the banks",
          "[golden][exl3]") {
  TinyExl3Model tiny;
  REQUIRE(tiny.bank_k.size() == 22);  // layers 0, 7: 6 each; layers 2, 5: 5 each (kTinyPlan)
  auto m = Transformer::load(tiny.exl3_dir, 1);
  const exl3::ExpertBank* bank = m->expert_bank();
  REQUIRE(bank != nullptr);
  CHECK(bank->expert_count() == tiny.bank_k.size());
  CHECK(bank->hidden() == 128);  // hidden 96 stored padded to 128
  CHECK(bank->inter() == 128);
  for (int l = 0; l < TinyExl3Model::kLayers; ++l) {
    for (int e = 0; e < TinyExl3Model::kExperts; ++e) {
      INFO("layer " << l << " expert " << e);
      const auto it = tiny.bank_k.find({l, e});
      const exl3::BankExpert* be = bank->find(l, e);
      const bool from_bank = it != tiny.bank_k.end();
      REQUIRE((be != nullptr) == from_bank);
      // Bank experts are not bound from the checkpoint (it has no FP4 tensors for them).
      CHECK(m->weights().layers[l].ffn.experts[e].w1.bound() == !from_bank);
      if (!from_bank) continue;
      CHECK(be->K == it->second);
      // Even experts come from qa; qb's decoy copy of the first even one is shadowed.
      CHECK_THAT(be->file, Catch::Contains(e % 2 == 0 ? "/exl3/qa/" : "/exl3/qb/"));
    }
  }
  CHECK(bank->find(2, 1) == nullptr);  // keep_native
  CHECK(bank->find(2, 4)->K == 3);     // keep_native, then expert_state K3
  CHECK(bank->find(5, 3) == nullptr);  // expert_state "native"
  CHECK(bank->experts_by_k(5).at(4).size() == 4);
  for (const IgnoredGroup& g : m->weights().ignored) CHECK(g.count == 0);

  auto twin = Transformer::load(tiny.dense_dir, 1);
  CHECK(twin->expert_bank() == nullptr);
  CHECK(twin->weights().layers[0].ffn.experts[0].w1.format() == WeightFormat::kF32);
  CHECK(twin->weights().layers[1].ffn.experts[0].w1.format() == WeightFormat::kFp4Row);
}

TEST_CASE("exl3 model: each routed expert equals its dense twin (EXL3) or is identical (FP4)",
          "[golden][exl3]") {
  TinyExl3Model tiny;
  auto m = Transformer::load(tiny.exl3_dir, 1);
  auto twin = Transformer::load(tiny.dense_dir, 1);
  const float limit = static_cast<float>(m->config().text.swiglu_limit);
  const ExpertProvider& exl3_experts = m->expert_provider();
  constexpr int64_t n = 5, D = TinyExl3Model::kHidden;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n * D), rw(n), y(n * D), want(n * D);
  double worst_rel = 0;
  for (int l = 0; l < TinyExl3Model::kLayers; ++l) {
    for (int e = 0; e < TinyExl3Model::kExperts; ++e) {
      INFO("layer " << l << " expert " << e);
      for (float& v : x) v = 3.0f * nd(rng);  // large enough that swiglu_limit clamps some g, u
      for (float& v : rw) v = std::fabs(nd(rng));
      exl3_experts.forward(l, e, x.data(), n, rw.data(), y.data(), &m->pool());
      swiglu_expert(twin->weights().layers[l].ffn.experts[e], x.data(), n, rw.data(), limit,
                    want.data(), nullptr);
      if (!tiny.bank_k.count({l, e})) {
        CHECK(y == want);  // release FP4 through the ExpertStore: same sums in the same order
        continue;
      }
      float scale = 0;
      for (float v : want) scale = std::max(scale, std::fabs(v));
      REQUIRE(scale > 0.0f);
      const double rel = max_abs_diff(y, want) / scale;
      worst_rel = std::max(worst_rel, rel);
      CHECK(rel < 1e-5);
    }
  }
  WARN("EXL3 expert vs dense twin: max |Δy| / max |y| = " << worst_rel);
}

TEST_CASE("exl3 model: end-to-end logits equal the dense twin's", "[golden][exl3]") {
  TinyExl3Model tiny;
  auto m = Transformer::load(tiny.exl3_dir, 1);
  auto twin = Transformer::load(tiny.dense_dir, 1);
  auto base = Transformer::load(test::fixture("golden/tiny8"), 1);
  const int64_t V = m->config().text.vocab_size;

  CountingExperts counting(m->expert_provider());
  m->set_expert_provider(&counting);
  const std::vector<float> one_shot = run(*m, static_cast<int64_t>(kPrompt.size()));
  m->set_expert_provider(nullptr);
  // The prompt routes through bank experts of every planned layer and through native ones.
  int64_t bank_rows = 0, native_rows = 0;
  for (const auto& [le, rows] : counting.calls)
    (tiny.bank_k.count(le) ? bank_rows : native_rows) += rows;
  for (int l : {0, 2, 5, 7}) {
    int64_t rows = 0;
    for (int e = 0; e < TinyExl3Model::kExperts; ++e)
      if (tiny.bank_k.count({l, e}) && counting.calls.count({l, e})) rows += counting.calls[{l, e}];
    INFO("layer " << l);
    CHECK(rows > 0);
  }
  CHECK(bank_rows > 0);
  CHECK(native_rows > 0);

  const std::vector<float> dense = run(*twin, static_cast<int64_t>(kPrompt.size()));
  const float diff = max_abs_diff(one_shot, dense);
  WARN("EXL3 model vs dense twin, tiny8 prompt1 (37 tokens): max |Δlogit| = " << diff);
  std::vector<float> per_pos;  // max |Δlogit| per position
  for (size_t r = 0; r < kPrompt.size(); ++r) {
    const std::vector<float> pa(one_shot.begin() + r * V, one_shot.begin() + (r + 1) * V);
    const std::vector<float> pb(dense.begin() + r * V, dense.begin() + (r + 1) * V);
    per_pos.push_back(max_abs_diff(pa, pb));
  }
  std::nth_element(per_pos.begin(), per_pos.begin() + per_pos.size() / 2, per_pos.end());
  WARN("median over positions of max |Δlogit| = " << per_pos[per_pos.size() / 2]);
  CHECK(per_pos[per_pos.size() / 2] <= kTypicalTol);
  CHECK(diff <= kLogitsTol);
  CHECK(argmax_rows(one_shot, V) == argmax_rows(dense, V));
  // The EXL3 experts are not tiny8's experts: the logits move far beyond the tolerance.
  CHECK(max_abs_diff(one_shot, run(*base, static_cast<int64_t>(kPrompt.size()))) > 0.1f);

  // Chunked prefill and decode on both: the same equivalence.
  for (int64_t chunk : {1, 7}) {
    INFO("chunk " << chunk);
    const std::vector<float> a = run(*m, chunk), b = run(*twin, chunk);
    CHECK(max_abs_diff(a, b) <= kLogitsTol);
    CHECK(max_abs_diff(a, one_shot) <= kLogitsTol);
  }
}

TEST_CASE("exl3 model: bank-supplied FP4 tensors left in the checkpoint are skipped",
          "[golden][exl3]") {
  TinyExl3Model plain, with_fp4(/*keep_shadowed_fp4=*/true);
  auto a = Transformer::load(plain.exl3_dir, 1);
  auto b = Transformer::load(with_fp4.exl3_dir, 1);
  size_t skipped = 0;
  for (const IgnoredGroup& g : b->weights().ignored)
    if (g.prefix == ModelWeights::kExternalExpertsGroup) skipped = g.count;
  CHECK(skipped == with_fp4.bank_k.size() * 6);  // w1/w3/w2 .weight + .scale
  CHECK(run(*a, 37) == run(*b, 37));             // same banks (same seeds), FP4 copies unused
}

// --- load errors of a Spark directory, through the public API ---

std::string load_error(const std::string& dir, ErrorCode* code = nullptr) {
  ModelParams p;
  p.model_dir = dir;
  p.threads = 1;
  Result<Model> r = Model::load(p);
  if (r.is_ok()) return "";
  if (code) *code = r.status().code();
  return r.status().message();
}

void set_plan(const TinyExl3Model& t, const std::string& from, const std::string& to) {
  std::string plan = test::kTinyPlan;
  const size_t at = plan.find(from);
  REQUIRE(at != std::string::npos);
  plan.replace(at, from.size(), to);
  test::write_text(std::filesystem::path(t.exl3_dir) / "exl3/plan/plan.json", plan);
}

// Layer 3 (absent from kTinyPlan) as K2 from a file written here.
void add_layer3_bank(const TinyExl3Model& t, int64_t hidden, int K) {
  test::TensorSet set;
  for (int e = 0; e < TinyExl3Model::kExperts; ++e)
    test::add_expert(set, 3, e, hidden, 128, K, 500 + 30 * e);
  set.write(t.exl3_dir + "/exl3/qa/K2/L03.part.safetensors");
  set_plan(t, R"("7": "K5")", R"("7": "K5", "3": "K2")");
}

TEST_CASE("exl3 model: load errors name the plan, bank file and tensor", "[golden][exl3]") {
  ErrorCode code = ErrorCode::kOk;
  SECTION("the tiny model itself loads through Model::load") {
    TinyExl3Model t;
    CHECK(load_error(t.exl3_dir) == "");
    CHECK(load_error(t.dense_dir) == "");
  }
  SECTION("a planned expert in no bank file") {
    TinyExl3Model t;
    std::filesystem::remove(t.exl3_dir + "/exl3/qb/K3/L00.safetensors");  // odd experts 1, 3
    const std::string msg = load_error(t.exl3_dir, &code);
    CHECK(code == ErrorCode::kNotFound);
    CHECK_THAT(msg, Catch::Contains("plan.json: layer 0 expert 1 (state K3) is in no bank file"));
    CHECK_THAT(msg, Catch::Contains("qb/K3/L00.safetensors"));
  }
  SECTION("a K that disagrees with the trellis shape") {
    TinyExl3Model t;
    add_layer3_bank(t, 128, /*K=*/4);  // under K2/, but the trellis is [8, 8, 64]: K4
    const std::string msg = load_error(t.exl3_dir, &code);
    CHECK(code == ErrorCode::kCorruptFile);
    CHECK_THAT(msg, Catch::Contains("'layers.3.ffn.experts.0.w1' has K = 4"));
    CHECK_THAT(msg, Catch::Contains("says K2 for layer 3 expert 0"));
  }
  SECTION("bank experts whose dims are not the model's") {
    TinyExl3Model t;
    add_layer3_bank(t, 256, 2);
    const std::string msg = load_error(t.exl3_dir, &code);
    CHECK(code == ErrorCode::kCorruptFile);
    CHECK_THAT(msg, Catch::Contains("'layers.3.ffn.experts.0.w1' is (in 256, out 128), expected "
                                    "(in 128, out 128)"));
    CHECK_THAT(msg, Catch::Contains("hidden_size 96, moe_intermediate_size 64"));
  }
  SECTION("a missing bank root") {
    TinyExl3Model t;
    set_plan(t, R"("qa:qb")", R"("qa:qb:qc")");
    const std::string msg = load_error(t.exl3_dir, &code);
    CHECK(code == ErrorCode::kNotFound);
    CHECK_THAT(msg, Catch::Contains("bank root 'qc' (qdir entry) resolves to"));
    CHECK_THAT(msg, Catch::Contains("exl3/qc, which is not a directory"));
  }
  SECTION("a plan layer the model does not have") {
    TinyExl3Model t;
    set_plan(t, R"("7": "K5")", R"("7": "K5", "8": "K2")");
    const std::string msg = load_error(t.exl3_dir, &code);
    CHECK(code == ErrorCode::kCorruptFile);
    CHECK_THAT(msg, Catch::Contains("plan field 'layers' names layer 8"));
    CHECK_THAT(msg, Catch::Contains("num_hidden_layers = 8"));
  }
  SECTION("an expert id beyond n_routed_experts") {
    TinyExl3Model t;
    set_plan(t, R"({"2": "K5"})", R"({"2": "K5", "6": "K2"})");
    CHECK_THAT(load_error(t.exl3_dir),
               Catch::Contains("expert_state names expert 6 of layer 0, but layers have 6"));
  }
  SECTION("a native expert whose FP4 tensors the checkpoint lacks") {
    TinyExl3Model t;
    set_plan(t, R"({"2": "K5"})", R"({"2": "native"})");  // the checkpoint has no FP4 for it
    const std::string msg = load_error(t.exl3_dir, &code);
    CHECK(code == ErrorCode::kNotFound);
    CHECK_THAT(msg, Catch::Contains("layers.0.ffn.experts.2.w1.weight"));
  }
  SECTION("a native expert that is not the release FP4 (the store reads FP4 only)") {
    TinyExl3Model t;
    {
      auto ck = Checkpoint::open(t.exl3_dir);
      std::vector<TensorToWrite> tensors;
      const std::vector<uint8_t> bf16(96 * 64 * 2, 0);
      for (const std::string& name : ck->names()) {
        if (name == "layers.1.ffn.experts.0.w2.scale") continue;
        const TensorView v = ck->get(name);
        if (name == "layers.1.ffn.experts.0.w2.weight")
          tensors.push_back({name, DType::kBF16, {96, 64}, bf16});
        else
          tensors.push_back({name, v.dtype(), v.shape(), {v.data, v.nbytes()}});
      }
      write_safetensors(t.exl3_dir + "/rewritten.safetensors", tensors);
    }
    std::filesystem::rename(t.exl3_dir + "/rewritten.safetensors",
                            t.exl3_dir + "/model.safetensors");
    const std::string msg = load_error(t.exl3_dir, &code);
    CHECK(code == ErrorCode::kCorruptFile);
    CHECK_THAT(msg, Catch::Contains("'layers.1.ffn.experts.0.w2.weight' must be I8 [out, in/2] "
                                    "(packed FP4), found BF16 [96, 64]"));
  }
  SECTION("several plans: named in the error, chosen by name") {
    TinyExl3Model t;
    std::filesystem::copy_file(t.exl3_dir + "/exl3/plan/plan.json",
                               t.exl3_dir + "/exl3/plan/other.json");
    const std::string msg = load_error(t.exl3_dir, &code);
    CHECK(code == ErrorCode::kInvalidArgument);
    CHECK_THAT(msg, Catch::Contains("2 plans (other.json, plan.json); choose one with "
                                    "DSV41_EXL3_PLAN"));
    CHECK(Transformer::load(t.exl3_dir, 1, nullptr, "plan")->expert_bank() != nullptr);
    CHECK(Transformer::load(t.exl3_dir, 1, nullptr, t.exl3_dir + "/exl3/plan/other.json")->expert_bank());
    CHECK_THROWS_WITH(Transformer::load(t.exl3_dir, 1, nullptr, "nope"),
                      Catch::Contains("EXL3 plan 'nope' (DSV41_EXL3_PLAN / --plan) is neither"));
  }
}

}  // namespace
}  // namespace dsv41
