// DSpark (spec §6) on tiny8 with a synthetic draft module (dspark_fixture.hpp): loading and its
// errors, the target forward unchanged by the feature tap (the oracle's greedy tokens), greedy
// speculative decoding with DSpark drafts equal to plain greedy, the draft a function of the
// committed sequence only (rollback, fork, chunking), the Engine path, bad input.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <condition_variable>
#include <mutex>

#include "decode_loop.hpp"
#include "dspark_fixture.hpp"
#include "dsv41/engine.hpp"
#include "dsv41/sampler.hpp"
#include "dsv41/session.hpp"
#include "dsv41/speculative.hpp"
#include "loader/checkpoint.hpp"
#include "loader/safetensors.hpp"
#include "model/attention/kv_quant.hpp"
#include "model/attention/rope.hpp"
#include "model/dspark/dspark_drafter.hpp"
#include "model/rms_norm.hpp"
#include "model/transformer.hpp"
#include "runtime/forward_backend.hpp"
#include "support/fixtures.hpp"

using namespace dsv41;
using Ids = std::vector<int32_t>;

namespace {

const std::string& fixture_dir() {
  static const std::string dir = test::make_tiny8_dspark();
  return dir;
}

Ids golden_ids(const std::string& name) {
  static auto file = SafetensorsFile::open(test::fixture("golden/tiny8/golden.safetensors"));
  std::vector<float> v = tensor_to_f32(file->view(*file->find_info(name)));
  return Ids(v.begin(), v.end());
}

const Model& dspark_model() {
  static Model m = [] {
    ModelParams p;
    p.model_dir = fixture_dir();
    p.threads = 1;
    p.dspark = true;
    auto r = Model::load(p);
    if (!r.is_ok()) FAIL(r.status().to_string());
    return std::move(r).value();
  }();
  return m;
}

Sampler greedy() {
  SamplerParams p;
  p.temperature = 0;
  return std::move(Sampler::create(p, 600)).value();
}

// n greedy tokens after prompt, one forward per token or through `dec`.
Ids decode(const Model& m, const Ids& prompt, int n, SpeculativeDecoder* dec) {
  Session s = std::move(Session::create(m)).value();
  Sampler smp = greedy();
  return test::decode_tokens(s, smp, prompt, n, dec);
}

void require_same_proposal(const DsparkProposal& a, const DsparkProposal& b, double tol) {
  REQUIRE(a.tokens == b.tokens);
  REQUIRE(a.base_logits.size() == b.base_logits.size());
  double worst = 0;
  for (size_t i = 0; i < a.base_logits.size(); ++i)
    worst = std::max(worst, std::abs(double(a.base_logits[i]) - b.base_logits[i]));
  for (size_t i = 0; i < a.confidence.size(); ++i)
    worst = std::max(worst, std::abs(double(a.confidence[i]) - b.confidence[i]));
  INFO("max abs difference " << worst);
  REQUIRE(worst <= tol);
}

}  // namespace

TEST_CASE("dspark: the draft module loads on request, its tensors checked by name",
          "[golden][speculative]") {
  const Model& m = dspark_model();
  REQUIRE(m.info().vocab_size == 600);
  // Without the request `mtp.*` is an ignored group and the model loads as plain tiny8.
  ModelParams plain;
  plain.model_dir = fixture_dir();
  plain.threads = 1;
  REQUIRE(Model::load(plain).is_ok());
  auto no_dspark = make_dspark_drafter(*Model::load(plain));
  REQUIRE(no_dspark.status().code() == ErrorCode::kUnsupported);
  REQUIRE_THAT(no_dspark.status().message(), Catch::Contains("ModelParams.dspark = true"));
  // tiny8 itself has no draft module.
  ModelParams none = plain;
  none.model_dir = test::fixture("golden/tiny8");
  none.dspark = true;
  auto r = Model::load(none);
  REQUIRE(r.status().code() == ErrorCode::kUnsupported);
  REQUIRE_THAT(r.status().message(), Catch::Contains("num_nextn_predict_layers = 0"));
  // A missing tensor is named.
  ModelParams missing = plain;
  missing.model_dir = test::make_tiny8_dspark({"mtp.2.markov_head.head.weight"});
  missing.dspark = true;
  r = Model::load(missing);
  REQUIRE_FALSE(r.is_ok());
  REQUIRE_THAT(r.status().message(), Catch::Contains("mtp.2.markov_head.head.weight"));
  missing.model_dir = test::make_tiny8_dspark({"mtp.1.ffn.experts.3.w2.scale"});
  r = Model::load(missing);
  REQUIRE_THAT(r.status().message(), Catch::Contains("mtp.1.ffn.experts.3.w2"));
  // With the module bound, an `mtp.*` tensor it does not use is an error (a fourth stage, a
  // stray tensor), not an ignored one; without it, `mtp.*` is ignored as a group.
  for (const char* stray : {"mtp.0.bogus.weight", "mtp.3.attn_norm.weight"}) {
    missing.model_dir = test::make_tiny8_dspark({}, {stray});
    r = Model::load(missing);
    REQUIRE_THAT(r.status().message(), Catch::Contains(stray) && Catch::Contains("not used"));
    ModelParams lenient = plain;
    lenient.model_dir = missing.model_dir;
    REQUIRE(Model::load(lenient).is_ok());
  }
  // Under tensor parallelism DSpark is sharded (CPU: tests/tp/test_tp_dspark.cpp; CUDA ranks:
  // tests/kernel/test_model_tp.cpp; CUDA at world 1: tests/kernel/test_dspark_forward.cpp).
}

TEST_CASE("dspark: greedy decoding with DSpark drafts gives the oracle's and plain greedy tokens",
          "[golden][speculative]") {
  const Ids prompt = golden_ids("prompt1.input_ids");
  const Ids oracle = golden_ids("greedy.tokens");
  constexpr int kN = 24;
  // The feature tap leaves the target forward as it was: the oracle's tokens.
  const Ids plain = decode(dspark_model(), prompt, kN, nullptr);
  REQUIRE(Ids(plain.begin(), plain.begin() + 12) == oracle);
  auto drafter = make_dspark_drafter(dspark_model());
  REQUIRE(drafter.is_ok());
  auto dec = SpeculativeDecoder::create(dspark_model(), std::move(drafter).value());
  REQUIRE(dec.is_ok());
  REQUIRE(decode(dspark_model(), prompt, kN, &*dec) == plain);
  const SpeculativeStats& st = dec->stats();
  INFO("rounds " << st.rounds << " drafted " << st.drafted << " accepted " << st.accepted);
  REQUIRE(st.drafted >= st.rounds * 4);  // the whole block of 5 unless max_tokens cuts it
  // The Drafter interface alone cannot draft from a sequence.
  auto lone = make_dspark_drafter(dspark_model());
  REQUIRE((*lone)->propose(prompt, 5).status().code() == ErrorCode::kUnsupported);
  // Confidence threshold 1: every draft is cut, the round is a plain step.
  DsparkDrafterParams all_cut;
  all_cut.confidence_threshold = 1.0f;
  auto strict = SpeculativeDecoder::create(
      dspark_model(), std::move(make_dspark_drafter(dspark_model(), all_cut)).value());
  REQUIRE(decode(dspark_model(), prompt, 8, &*strict) == Ids(plain.begin(), plain.begin() + 8));
  REQUIRE(strict->stats().drafted == 0);
  all_cut.confidence_threshold = 1.5f;
  REQUIRE_THAT(make_dspark_drafter(dspark_model(), all_cut).status().message(),
               Catch::Contains("DsparkDrafterParams.confidence_threshold = 1.5"));
}

TEST_CASE("dspark: the draft depends only on the committed sequence (rollback, fork, chunks)",
          "[golden][speculative]") {
  auto t = Transformer::load(fixture_dir(), 1, nullptr, "", /*dspark=*/true);
  DsparkDrafter drafter(*t);
  REQUIRE(drafter.block_size() == 5);
  const Ids prompt = golden_ids("prompt1.input_ids");
  const int32_t next = 17;
  SequenceState base = t->new_sequence();
  (void)t->forward(base, prompt);
  const DsparkProposal want = drafter.draft(base, next);
  REQUIRE(want.tokens.size() == 5);
  REQUIRE(want.confidence.size() == 5);
  for (float c : want.confidence) REQUIRE((c > 0.0f && c < 1.0f));
  // Five more positions appended and rolled back.
  SequenceState rolled = t->new_sequence();
  Ids longer = prompt;
  longer.insert(longer.end(), {3, 4, 5, 6, 7});
  (void)t->forward(rolled, longer);
  rolled.rollback(5);
  require_same_proposal(drafter.draft(rolled, next), want, 1e-4);
  // A copy, and a prefill in chunks of 3.
  SequenceState copy = base;
  require_same_proposal(drafter.draft(copy, next), want, 0);
  SequenceState chunked = t->new_sequence();
  for (size_t i = 0; i < prompt.size(); i += 3)
    (void)t->forward(chunked, std::span(prompt).subspan(i, std::min<size_t>(3, prompt.size() - i)));
  require_same_proposal(drafter.draft(chunked, next), want, 1e-4);
  // The context matters: another prompt, another draft.
  SequenceState other = t->new_sequence();
  (void)t->forward(other, golden_ids("prompt2.input_ids"));
  const DsparkProposal o = drafter.draft(other, next);
  REQUIRE(o.base_logits != want.base_logits);
  // Errors: an empty sequence has no context to miss; next outside the vocabulary.
  SequenceState empty = t->new_sequence();
  REQUIRE(drafter.draft(empty, next).tokens.size() == 5);
  REQUIRE_THROWS_WITH(drafter.draft(base, 600), Catch::Contains("next = 600"));
}

TEST_CASE("dspark: the Engine's dspark method streams plain greedy tokens",
          "[golden][speculative]") {
  const Ids prompt = golden_ids("prompt1.input_ids");
  const Ids want = decode(dspark_model(), prompt, 16, nullptr);
  for (const char* method : {"dspark", "ngram"}) {
    EngineParams ep;
    ep.speculative_tokens = 5;
    ep.speculative_method = method;
    auto engine = Engine::create(dspark_model(), ep);
    REQUIRE(engine.is_ok());
    std::mutex mu;
    std::condition_variable cv;
    Ids got;
    bool done = false;
    GenerationRequest req;
    req.prompt = prompt;
    req.sampling.temperature = 0;
    req.stop.max_tokens = 16;
    req.stop.ignore_eos = true;
    auto id = engine->submit(req, [&](const GenerationEvent& ev) {
      std::lock_guard<std::mutex> lock(mu);
      if (ev.kind == GenerationEvent::Kind::kToken)
        got.push_back(ev.token);
      else
        done = true;
      cv.notify_all();
    });
    REQUIRE(id.is_ok());
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return done; }));
    REQUIRE(got == want);
    if (std::string(method) == "dspark") REQUIRE(engine->stats().spec_draft_tokens_total > 0);
  }
  EngineParams bad;
  bad.speculative_tokens = 5;
  bad.speculative_method = "dspark";
  ModelParams plain;
  plain.model_dir = test::fixture("golden/tiny8");
  plain.threads = 1;
  auto tiny8 = Model::load(plain);
  REQUIRE_THAT(Engine::create(*tiny8, bad).status().message(),
               Catch::Contains("needs the model loaded with ModelParams.dspark = true"));
  bad.speculative_method = "medusa";
  REQUIRE_THAT(Engine::create(*tiny8, bad).status().message(),
               Catch::Contains("EngineParams.speculative_method = \"medusa\""));
  bad.speculative_method = "ngram";
  bad.speculative_confidence = -1;
  REQUIRE_THAT(Engine::create(*tiny8, bad).status().message(),
               Catch::Contains("EngineParams.speculative_confidence"));
}

namespace {

std::vector<float> tensor(const Checkpoint& ck, const std::string& name) {
  return tensor_to_f32(ck.get(name));
}

}  // namespace

TEST_CASE("dspark: context rows, block attention, head, Markov chain and confidence follow §6",
          "[golden][speculative]") {
  // Recomputed here from the formulas of spec §6.2-6.3 on the fixture's tensors (and the
  // backbone's validated building blocks), not by the drafter's own code path.
  auto t = Transformer::load(fixture_dir(), 1, nullptr, "", /*dspark=*/true);
  auto ck = Checkpoint::open(fixture_dir());
  const ModelConfig& cfg = t->config();
  const TextConfig& c = cfg.text;
  const int64_t D = t->dim(), hc = t->hc(), V = c.vocab_size, HD = c.head_dim;
  const int R = c.qk_rope_head_dim;
  const DsparkWeights& dw = *t->weights().dspark;
  const Ids prompt = golden_ids("prompt1.input_ids");
  const int64_t T = static_cast<int64_t>(prompt.size());

  SECTION("§6.2 context rows: taps entering layers 5-7 after Engram, FP8, RoPE at p") {
    SequenceState st = t->new_sequence();
    (void)t->forward(st, prompt);
    // The forward schedule layer by layer, keeping the residual entering each tap layer.
    SequenceState ref = t->new_sequence();
    ref.tokens = prompt;
    ref.image_flags.assign(T, 0);
    std::vector<float> H(T * hc * D);
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < hc; ++j)
        t->weights().embed_row(prompt[i], H.data() + (i * hc + j) * D);
    std::vector<float> pre = hc_initial_pre(t->hc_shape(), T);
    const std::vector<int64_t> hash = t->engram_ids(ref, 0, T);
    const int64_t cols = t->hasher()->n_cols();
    StepSelections sel;
    std::vector<float> f(T * 3 * D, 0.0f);
    int slot = 0;
    for (int l = 0; l < c.num_hidden_layers; ++l) {
      LayerTrace tr;
      const int64_t* h = cfg.roles[l].engram ? hash.data() + (slot++) * T * cols : nullptr;
      std::vector<float> entering = H;
      t->run_layer(l, T, 0, H.data(), pre, h, nullptr, ref, sel, &tr);
      const auto k =
          std::find(c.dspark_target_layer_ids.begin(), c.dspark_target_layer_ids.end(), l) -
          c.dspark_target_layer_ids.begin();
      if (k >= 3) continue;
      if (cfg.roles[l].engram) entering = tr.engram_out;  // §6.2: after Engram
      for (int64_t i = 0; i < T; ++i)
        for (int64_t d = 0; d < D; ++d) {
          double s = 0;
          for (int64_t j = 0; j < hc; ++j) s += entering[(i * hc + j) * D + d];
          f[(i * 3 + k) * D + d] = static_cast<float>(s / hc);
        }
    }
    REQUIRE(cfg.roles[c.dspark_target_layer_ids[0]].engram);  // the fixture taps an Engram layer
    std::vector<float> main_x(T * D), kv(T * HD);
    dw.main_proj.forward(f.data(), T, main_x.data(), nullptr);
    rms_norm(main_x.data(), dw.main_norm.data(), T, D, static_cast<float>(c.rms_norm_eps),
             main_x.data());
    double worst = 0;
    for (int s = 0; s < 3; ++s) {
      const AttentionLayer& a = dw.stages[s].attn;
      a.wkv().forward(main_x.data(), T, kv.data(), nullptr);
      rms_norm(kv.data(), a.kv_norm().data(), T, HD, a.eps(), kv.data());
      for (int64_t p = T - c.sliding_window; p < T; ++p) {
        float* row = kv.data() + p * HD;
        rope_rotate(row + HD - R, a.inv_freq(), R, p, false);
        fake_quant_window_fp8(row, HD);  // §2.7, validated against the oracle's window cache
        const float* got = st.dspark.row(s, p);
        REQUIRE(st.dspark.holds(p));
        for (int64_t i = 0; i < HD; ++i)
          worst = std::max(worst, std::abs(double(got[i]) - double(kv[p * HD + i])));
      }
    }
    INFO("max |context row - reference| " << worst);
    REQUIRE(worst <= 1e-6);
  }

  SECTION("§6.3 the block: bidirectional attention, head, Markov chain, confidence") {
    DsparkDrafter drafter(*t);
    SequenceState st = t->new_sequence();
    (void)t->forward(st, prompt);
    const int32_t next = 17, noise = c.dspark_noise_token_id;
    const DsparkProposal p = drafter.draft(st, next);
    // The same slots through draft_block; then slot 4 changed: slot 0's output moves only if it
    // attends to slot 4 (no causal mask inside the block).
    const Ids slots = {next, noise, noise, noise, noise};
    REQUIRE(drafter.draft_block(st, slots).base_logits == p.base_logits);
    Ids other = slots;
    other[4] = 42;
    const DsparkProposal q = drafter.draft_block(st, other);
    REQUIRE(!std::equal(q.base_logits.begin(), q.base_logits.begin() + V, p.base_logits.begin()));
    REQUIRE_THROWS_WITH(drafter.draft_block(st, Ids{1, 2}), Catch::Contains("2 slot tokens"));
    // U_k = head(norm(h_k)).
    const std::vector<float> head = tensor(*ck, "head.weight");
    const std::vector<float> norm = tensor(*ck, "mtp.2.norm.weight");
    std::vector<float> hn(D);
    double worst_u = 0;
    for (int64_t k = 0; k < 5; ++k) {
      rms_norm(p.hidden.data() + k * D, norm.data(), 1, D, static_cast<float>(c.rms_norm_eps),
               hn.data());
      for (int64_t v = 0; v < V; ++v) {
        double u = 0;
        for (int64_t d = 0; d < D; ++d) u += double(head[v * D + d]) * hn[d];
        worst_u = std::max(worst_u, std::abs(u - p.base_logits[k * V + v]));
      }
    }
    INFO("max |U - head(norm(h))| " << worst_u);
    REQUIRE(worst_u < 1e-4);
    // Markov chain id_{k+1} = argmax(U_k + M_h·M_e[id_k]) and c_k = σ(w·[h_k ; M_e[id_k]]).
    const std::vector<float> me = tensor(*ck, "mtp.2.markov_head.embed.weight");
    const std::vector<float> mh = tensor(*ck, "mtp.2.markov_head.head.weight");
    const std::vector<float> w = tensor(*ck, "mtp.2.confidence_head.proj.weight");
    const int64_t MR = c.dspark_markov_rank;
    int32_t id = next;
    for (int64_t k = 0; k < 5; ++k) {
      const float* e = me.data() + int64_t{id} * MR;
      int32_t best = 0;
      double best_v = -1e30;
      for (int64_t v = 0; v < V; ++v) {
        double m = p.base_logits[k * V + v];
        for (int64_t r = 0; r < MR; ++r) m += double(mh[v * MR + r]) * e[r];
        if (m > best_v) {
          best_v = m;
          best = static_cast<int32_t>(v);
        }
      }
      double z = 0;
      for (int64_t d = 0; d < D; ++d) z += double(w[d]) * p.hidden[k * D + d];
      for (int64_t r = 0; r < MR; ++r) z += double(w[D + r]) * e[r];
      INFO("slot " << k);
      REQUIRE(p.tokens[k] == best);
      REQUIRE(std::abs(p.confidence[k] - 1.0 / (1.0 + std::exp(-z))) < 1e-5);
      id = best;
    }
  }

  SECTION("§6.4 survival cut: drafts kept while the running product of c stays >= threshold") {
    DsparkProposal p;
    p.tokens = {1, 2, 3, 4, 5};
    p.confidence = {0.9f, 0.8f, 0.9f, 0.5f, 0.9f};  // survival .9 .72 .648 .324 .2916
    REQUIRE(cut_by_confidence(p, 5, 0.5f) == Ids{1, 2, 3});
    REQUIRE(cut_by_confidence(p, 5, 0.7f) == Ids{1, 2});
    REQUIRE(cut_by_confidence(p, 5, 0.0f) == Ids{1, 2, 3, 4, 5});
    REQUIRE(cut_by_confidence(p, 2, 0.0f) == Ids{1, 2});
    REQUIRE(cut_by_confidence(p, 5, 0.95f).empty());
  }
}
