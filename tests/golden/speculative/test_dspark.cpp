// DSpark (spec §6) on tiny8 with a synthetic draft module (dspark_fixture.hpp): loading and its
// errors, the target forward unchanged by the feature tap (the oracle's greedy tokens), greedy
// speculative decoding with DSpark drafts equal to plain greedy, the draft a function of the
// committed sequence only (rollback, fork, chunking), the Engine path, bad input.
#include <catch2/catch.hpp>
#include <cmath>
#include <condition_variable>
#include <mutex>

#include "dspark_fixture.hpp"
#include "dsv41/engine.hpp"
#include "dsv41/sampler.hpp"
#include "dsv41/session.hpp"
#include "dsv41/speculative.hpp"
#include "loader/safetensors.hpp"
#include "model/dspark/dspark_drafter.hpp"
#include "model/transformer.hpp"
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
  auto r = s.append(prompt);
  REQUIRE(r.is_ok());
  int32_t next = *smp.sample(*r);
  REQUIRE(smp.accept(next).is_ok());
  Ids out = {next};
  while (static_cast<int>(out.size()) < n) {
    if (dec) {
      auto round = dec->step(s, smp, next, n - static_cast<int64_t>(out.size()));
      INFO(round.status().to_string());
      REQUIRE(round.is_ok());
      out.insert(out.end(), round->tokens.begin(), round->tokens.end());
    } else {
      r = s.append(Ids{next});
      REQUIRE(r.is_ok());
      out.push_back(*smp.sample(*r));
      REQUIRE(smp.accept(out.back()).is_ok());
    }
    next = out.back();
  }
  return out;
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
  // Unsupported combinations, refused before loading.
  ModelParams cuda = plain;
  cuda.dspark = true;
  cuda.backend = "cuda";
  REQUIRE_THAT(Model::load(cuda).status().message(), Catch::Contains("CPU backend only"));
  ModelParams tp = plain;
  tp.dspark = true;
  tp.tp.world = 2;
  tp.tp.bind_address = "127.0.0.1";
  tp.tp.peer_address = "127.0.0.2";
  REQUIRE_THAT(Model::load(tp).status().message(),
               Catch::Contains("ModelParams.dspark with tensor parallelism"));
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
