// DSpark under tensor parallelism (docs/tp.md "DSpark"): two ranks of tiny8 with the synthetic
// draft module (tests/golden/speculative/dspark_fixture.hpp) in two threads over TpTcp on
// loopback. Each binds its shard of the stages (heads / groups, routed experts, shared slice);
// a draft round all-reduces each stage's attention and FFN and all-gathers the base logits. Both
// ranks must hold bit-identical proposals, equal to one unsharded model's up to fp32 summation
// order; the Engine on rank 0 with a follower gives the tokens of plain greedy decoding.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <future>

#include "dsv41/engine.hpp"
#include "dsv41/model.hpp"
#include "golden/model/golden_case.hpp"
#include "golden/speculative/dspark_fixture.hpp"
#include "model/dspark/dspark_drafter.hpp"
#include "model/transformer.hpp"
#include "parallel/tp_tcp.hpp"
#include "support/event_collector.hpp"
#include "support/fixtures.hpp"
#include "tp_script.hpp"

using namespace dsv41;

namespace {

constexpr double kTol = 2e-3;  // free-running tiny8 (docs/tp.md "Verified")

struct Rounds {
  std::vector<DsparkProposal> proposals;
};

// The same script on any rank (or alone): prefill p, draft after `next`, extend, draft again.
Rounds script(const Transformer& t, const std::vector<int32_t>& p) {
  DsparkDrafter drafter(t);
  SequenceState st = t.new_sequence();
  Rounds r;
  (void)t.forward(st, p);
  r.proposals.push_back(drafter.draft(st, 5));
  (void)t.forward(st, std::vector<int32_t>{5, 6, 7});
  r.proposals.push_back(drafter.draft(st, 8));
  return r;
}

}  // namespace

TEST_CASE("tp dspark: two ranks draft as one process, bit-identical to each other", "[tp][model]") {
  const std::string dir = test::make_tiny8_dspark();
  test::GoldenCase g("tiny8");
  const auto p1 = g.i32("prompt1.input_ids");
  const Rounds whole = script(*Transformer::load(dir, 1, nullptr, "", true), p1);
  const uint16_t port = tp_test::free_port();
  auto rank = [&](int r) -> Rounds {
    auto comm =
        parallel::connect_tp_tcp(tp_test::loopback_params(r, port), tp_test::test_handshake());
    if (!comm) FAIL(comm.status().to_string());
    std::unique_ptr<Transformer> t = Transformer::load(dir, 1, comm->get(), "", true);
    // Each rank holds half of the stages' routed experts.
    const MoeWeights& ffn = t->weights().dspark->stages[0].ffn;
    CHECK(ffn.expert_end - ffn.expert_begin == t->config().text.dspark_n_routed_experts / 2);
    return script(*t, p1);
  };
  auto r1 = std::async(std::launch::async, rank, 1);
  const Rounds r0 = rank(0);
  const Rounds other = r1.get();
  for (size_t i = 0; i < whole.proposals.size(); ++i) {
    INFO("round " << i);
    const DsparkProposal &a = r0.proposals[i], &b = other.proposals[i], &w = whole.proposals[i];
    REQUIRE(a.base_logits.size() == w.base_logits.size());
    CHECK(std::memcmp(a.base_logits.data(), b.base_logits.data(), a.base_logits.size() * 4) == 0);
    CHECK(a.tokens == b.tokens);
    CHECK(a.confidence == b.confidence);
    const double diff =
        test::max_abs_diff(a.base_logits.data(), w.base_logits.data(), w.base_logits.size());
    std::printf("dspark round %zu: max |base logits TP2 - TP1| %.3g\n", i, diff);
    CHECK(diff <= kTol);
    CHECK(a.tokens == w.tokens);
    for (size_t k = 0; k < w.confidence.size(); ++k)
      CHECK(a.confidence[k] == Approx(w.confidence[k]).margin(1e-4));
  }
}

namespace {

ModelParams dspark_rank(const std::string& dir, int rank, uint16_t port, bool dspark = true) {
  ModelParams mp;
  mp.model_dir = dir;
  mp.threads = 1;
  mp.dspark = dspark;
  mp.tp.world = 2;
  mp.tp.rank = rank;
  mp.tp.bind_address = rank == 0 ? "127.0.0.1" : "127.0.0.2";
  mp.tp.peer_address = rank == 0 ? "127.0.0.2" : "127.0.0.1";
  mp.tp.port = port;
  mp.tp.connect_timeout_ms = 10000;
  mp.tp.heartbeat_interval_ms = 100;
  mp.tp.heartbeat_timeout_ms = 2000;
  return mp;
}

std::vector<int32_t> generate(const Model& m, const std::vector<int32_t>& prompt, int spec,
                              EngineStats* stats) {
  EngineParams ep;
  ep.speculative_tokens = spec;
  ep.speculative_method = "dspark";
  Result<Engine> engine = Engine::create(m, ep);
  REQUIRE(engine.is_ok());
  test::EventCollector c;
  GenerationRequest req;
  req.prompt = prompt;
  req.sampling.temperature = 0.0f;
  req.stop.max_tokens = 16;
  req.stop.ignore_eos = true;
  const RequestId id = *engine->submit(req, c.callback());
  GenerationEvent ev;
  REQUIRE(c.wait_for(id, std::chrono::seconds(120), &ev));
  INFO(ev.status.to_string());
  REQUIRE(ev.status.is_ok());
  if (stats) *stats = engine->stats();
  return c.tokens[id];
}

}  // namespace

TEST_CASE("tp dspark: rank 0's Engine with DSpark rounds gives plain greedy decoding's tokens",
          "[tp][runtime]") {
  const std::string dir = test::make_tiny8_dspark();
  test::GoldenCase g("tiny8");
  const auto p1 = g.i32("prompt1.input_ids");
  ModelParams single;
  single.model_dir = dir;
  single.threads = 1;
  single.dspark = true;
  const Model one = std::move(Model::load(single)).value();
  const std::vector<int32_t> want = generate(one, p1, 0, nullptr);
  const uint16_t port = tp_test::free_port();
  auto follower = std::async(std::launch::async, [&]() -> Status {
    Result<Model> m = Model::load(dspark_rank(dir, 1, port));
    if (!m) return m.status();
    return m->run_tp_follower();
  });
  {
    Result<Model> m = Model::load(dspark_rank(dir, 0, port));
    REQUIRE(m.is_ok());
    EngineStats stats;
    CHECK(generate(*m, p1, 5, &stats) == want);
    std::printf("dspark under TP: %lld drafted, %lld accepted\n",
                static_cast<long long>(stats.spec_draft_tokens_total),
                static_cast<long long>(stats.spec_accepted_tokens_total));
    CHECK(stats.spec_draft_tokens_total > 0);
    REQUIRE(m->tp_health().is_ok());
  }
  REQUIRE(follower.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  const Status fs = follower.get();
  INFO(fs.to_string());
  REQUIRE(fs.is_ok());

  // One rank with the draft module and one without: refused on both, naming the setting.
  const uint16_t port2 = tp_test::free_port();
  auto r1 = std::async(std::launch::async,
                       [&] { return Model::load(dspark_rank(dir, 1, port2, false)).status(); });
  const Status s0 = Model::load(dspark_rank(dir, 0, port2)).status();
  const Status s1 = r1.get();
  CHECK_THAT(s0.message(), Catch::Contains("setting 'dspark': rank 0 has '1', rank 1 has '0'"));
  CHECK(s1.message() == s0.message());
}
