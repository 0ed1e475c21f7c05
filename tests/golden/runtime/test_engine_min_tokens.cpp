// StopParams.min_tokens through the Engine on the tiny8 oracle model: a stop token the greedy
// output reaches early is not drawn before min_tokens (the Sampler's ban; the continuation then
// equals a Session loop with the same ban), plain and speculative; out-of-range values are
// refused naming the field.
#include <catch2/catch.hpp>
#include <chrono>

#include "dsv41/engine.hpp"
#include "dsv41/session.hpp"
#include "golden/model/golden_case.hpp"
#include "support/event_collector.hpp"
#include "support/fixtures.hpp"
#include "support/tiny8_model.hpp"

using namespace dsv41;

namespace {

const Model& tiny8() { return test::tiny8_model(); }

struct Run {
  std::vector<int32_t> tokens;
  GenerationEvent done;
};

Run run(const GenerationRequest& req, int speculative_tokens = 0) {
  EngineParams ep;
  ep.speculative_tokens = speculative_tokens;
  auto engine = Engine::create(tiny8(), ep);
  REQUIRE(engine.is_ok());
  test::EventCollector c;
  auto id = engine->submit(req, c.callback());
  REQUIRE(id.is_ok());
  Run r;
  r.done = c.wait(*id);
  INFO(r.done.status.to_string());
  REQUIRE(r.done.status.is_ok());
  r.tokens = c.tokens[*id];
  return r;
}

}  // namespace

TEST_CASE("engine min_tokens: stop tokens are not drawn before it, then stop as usual",
          "[golden][runtime]") {
  test::GoldenCase g("tiny8");
  const auto p1 = g.i32("prompt1.input_ids");
  const auto greedy = g.i32("greedy.tokens");  // 12 tokens
  GenerationRequest req;
  req.prompt = p1;
  req.sampling.temperature = 0.0f;
  req.stop.max_tokens = 12;
  req.stop.ignore_eos = true;
  req.stop.stop_token_ids = {greedy[2]};  // the 3rd greedy token stops plain decoding there
  const Run plain = run(req);
  REQUIRE(plain.tokens.size() == 3);
  CHECK(plain.done.finish == FinishReason::kStop);

  req.stop.min_tokens = 6;
  // Reference: a Session loop whose sampler bans the stop token for the first 6 tokens.
  auto sampler = Sampler::create(req.sampling, tiny8().info().vocab_size);
  REQUIRE(sampler.is_ok());
  REQUIRE(sampler->ban_until(req.stop.stop_token_ids, 6).is_ok());
  auto s = Session::create(tiny8());
  REQUIRE(s.is_ok());
  Result<std::vector<float>> logits = s->append(p1);
  std::vector<int32_t> want;
  for (int i = 0; i < 12; ++i) {
    REQUIRE(logits.is_ok());
    Result<int32_t> t = sampler->sample(*logits);
    REQUIRE(t.is_ok());
    want.push_back(*t);
    REQUIRE(sampler->accept(*t).is_ok());
    if (i >= 6 && *t == greedy[2]) break;  // a stop token after min_tokens ends it
    logits = s->append(std::vector<int32_t>{*t});
  }
  CHECK(want[2] != greedy[2]);
  for (int spec : {0, 5}) {
    INFO("speculative_tokens " << spec);
    const Run got = run(req, spec);
    CHECK(got.tokens == want);
    for (size_t i = 0; i < 6 && i < got.tokens.size(); ++i) CHECK(got.tokens[i] != greedy[2]);
    CHECK(got.tokens.size() >= 6);
  }

  auto engine = Engine::create(tiny8());
  REQUIRE(engine.is_ok());
  req.stop.min_tokens = 13;  // above max_tokens = 12
  auto bad = engine->submit(req, [](const GenerationEvent&) {});
  REQUIRE(bad.status().code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(bad.status().message(),
             Catch::Contains("StopParams.min_tokens = 13 must be <= max_tokens = 12"));
}
