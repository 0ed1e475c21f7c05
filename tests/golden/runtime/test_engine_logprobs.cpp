// GenerationRequest.top_logprobs on the tiny8 oracle model: each token event's log-probability and
// alternatives are the log-softmax of the logits a Session computes at that position (recomputed
// here in double), unaffected by the sampling chain (logit_bias), the same with speculative
// decoding; out-of-range counts are refused naming the field.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <condition_variable>
#include <mutex>

#include "dsv41/engine.hpp"
#include "dsv41/session.hpp"
#include "golden/model/golden_case.hpp"
#include "support/fixtures.hpp"
#include "support/tiny8_model.hpp"

using namespace dsv41;

namespace {

const Model& tiny8() { return test::tiny8_model(); }

struct Run {
  std::vector<GenerationEvent> tokens;
  GenerationEvent done;
  EngineStats stats;
};

Run run(const GenerationRequest& req, int speculative_tokens = 0, int64_t chunk = 2048) {
  EngineParams ep;
  ep.speculative_tokens = speculative_tokens;
  ep.max_batched_tokens = chunk;
  ep.prefix_cache_entries = 0;
  auto engine = Engine::create(tiny8(), ep);
  REQUIRE(engine.is_ok());
  std::mutex mu;
  std::condition_variable cv;
  Run out;
  bool finished = false;
  auto id = engine->submit(req, [&](const GenerationEvent& ev) {
    std::lock_guard<std::mutex> lock(mu);
    if (ev.kind == GenerationEvent::Kind::kToken) {
      out.tokens.push_back(ev);
    } else {
      out.done = ev;
      finished = true;
      cv.notify_all();
    }
  });
  REQUIRE(id.is_ok());
  std::unique_lock<std::mutex> lock(mu);
  REQUIRE(cv.wait_for(lock, std::chrono::seconds(120), [&] { return finished; }));
  INFO(out.done.status.to_string());
  REQUIRE(out.done.status.is_ok());
  out.stats = engine->stats();
  return out;
}

// log-softmax in double of a Session's logits at each generated position.
std::vector<std::vector<double>> session_logprobs(const std::vector<int32_t>& prompt,
                                                  const std::vector<GenerationEvent>& tokens) {
  auto s = Session::create(tiny8());
  REQUIRE(s.is_ok());
  std::vector<std::vector<double>> out;
  Result<std::vector<float>> logits = s->append(prompt);
  for (const GenerationEvent& ev : tokens) {
    REQUIRE(logits.is_ok());
    const double m = *std::max_element(logits->begin(), logits->end());
    double sum = 0;
    for (float x : *logits) sum += std::exp(x - m);
    std::vector<double> lp;
    for (float x : *logits) lp.push_back(x - m - std::log(sum));
    out.push_back(std::move(lp));
    logits = s->append(std::vector<int32_t>{ev.token});
  }
  return out;
}

GenerationRequest request(std::vector<int32_t> prompt, int64_t n, int top) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.stop.max_tokens = n;
  r.stop.ignore_eos = true;
  r.top_logprobs = top;
  return r;
}

// Every event's values against the recomputation: the chosen token's, and `top` alternatives in
// descending order that are the `top` largest of the row.
void check_events(const std::vector<GenerationEvent>& events,
                  const std::vector<std::vector<double>>& want, int top) {
  REQUIRE(events.size() == want.size());
  for (size_t i = 0; i < events.size(); ++i) {
    INFO("token " << i);
    const GenerationEvent& ev = events[i];
    REQUIRE(ev.logprob.has_value());
    CHECK(ev.logprob->token == ev.token);
    CHECK(ev.logprob->logprob == Approx(want[i][ev.token]).margin(1e-5));
    REQUIRE(ev.top_logprobs.size() == static_cast<size_t>(top));
    std::vector<double> sorted = want[i];
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    for (int k = 0; k < top; ++k) {
      INFO("alternative " << k);
      CHECK(ev.top_logprobs[k].logprob == Approx(sorted[k]).margin(1e-5));
      CHECK(ev.top_logprobs[k].logprob == Approx(want[i][ev.top_logprobs[k].token]).margin(1e-5));
    }
  }
}

}  // namespace

TEST_CASE("engine logprobs: the log-softmax of the position's logits, with alternatives",
          "[golden][runtime]") {
  test::GoldenCase g("tiny8");
  const auto p1 = g.i32("prompt1.input_ids");
  const Run greedy = run(request(p1, 12, 5));
  check_events(greedy.tokens, session_logprobs(p1, greedy.tokens), 5);
  for (const GenerationEvent& ev : greedy.tokens) {
    CHECK(ev.top_logprobs[0].token == ev.token);  // greedy: the most likely token
    CHECK(ev.logprob->logprob < 0.0f);
  }
  // Without alternatives: the chosen token's value only; off: nothing.
  const Run zero = run(request(p1, 4, 0));
  check_events(zero.tokens, session_logprobs(p1, zero.tokens), 0);
  for (const GenerationEvent& ev : run(request(p1, 4, -1)).tokens) {
    CHECK_FALSE(ev.logprob.has_value());
    CHECK(ev.top_logprobs.empty());
  }
}

TEST_CASE("engine logprobs: raw values, not the sampling chain's", "[golden][runtime]") {
  // A +50 bias forces token 10 every step; its reported log-probability stays the model's own.
  test::GoldenCase g("tiny8");
  const auto p1 = g.i32("prompt1.input_ids");
  GenerationRequest req = request(p1, 6, 2);
  req.sampling.temperature = 1.3f;
  req.sampling.seed = 5;
  req.sampling.logit_bias = {{10, 50.0f}};
  const Run biased = run(req);
  const auto want = session_logprobs(p1, biased.tokens);
  check_events(biased.tokens, want, 2);
  for (const GenerationEvent& ev : biased.tokens) {
    CHECK(ev.token == 10);
    CHECK(ev.logprob->logprob < -0.5f);  // the bias is not in it
  }
}

TEST_CASE("engine logprobs: speculative rounds report the verify rows' values",
          "[golden][runtime]") {
  // Output that cycles (bias on three tokens, a frequency penalty): prompt lookup's drafts are
  // accepted, so several tokens come from one verify forward.
  test::GoldenCase g("tiny8");
  const auto p1 = g.i32("prompt1.input_ids");
  GenerationRequest req = request(p1, 20, 3);
  req.sampling.logit_bias = {{10, 50.0f}, {20, 50.0f}, {30, 50.0f}};
  req.sampling.frequency_penalty = 2.0f;
  const Run plain = run(req);
  const Run spec = run(req, 5);
  REQUIRE(spec.stats.spec_accepted_tokens_total > 0);
  REQUIRE(spec.tokens.size() == plain.tokens.size());
  check_events(spec.tokens, session_logprobs(p1, spec.tokens), 3);
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    CHECK(spec.tokens[i].token == plain.tokens[i].token);
    CHECK(spec.tokens[i].logprob->logprob == Approx(plain.tokens[i].logprob->logprob).margin(1e-5));
  }
}

TEST_CASE("engine prompt logprobs: each prompt token given its prefix, in any chunking",
          "[golden][runtime]") {
  test::GoldenCase g("tiny8");
  const auto p1 = g.i32("prompt1.input_ids");
  // Reference: one all-rows prefill; row i is the distribution of position i + 1.
  auto s = Session::create(tiny8());
  REQUIRE(s.is_ok());
  Result<std::vector<float>> rows = s->append(p1, /*all_logits=*/true);
  REQUIRE(rows.is_ok());
  const int64_t V = tiny8().info().vocab_size, n = static_cast<int64_t>(p1.size());
  GenerationRequest req = request(p1, 3, -1);
  req.prompt_logprobs = 2;
  for (int64_t chunk : {int64_t{2048}, int64_t{7}}) {
    INFO("chunk " << chunk);
    const Run r = run(req, 0, chunk);
    const auto& pl = r.tokens.at(0).prompt_logprobs;
    REQUIRE(static_cast<int64_t>(pl.size()) == n - 1);
    for (int64_t i = 0; i + 1 < n; ++i) {
      INFO("position " << i + 1);
      const float* row = rows->data() + i * V;
      const double m = *std::max_element(row, row + V);
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - m);
      const int32_t tok = p1[static_cast<size_t>(i + 1)];
      CHECK(pl[i].token.token == tok);
      CHECK(pl[i].token.logprob == Approx(row[tok] - m - std::log(sum)).margin(1e-5));
      REQUIRE(pl[i].top.size() == 2);
      CHECK(pl[i].top[0].logprob >= pl[i].top[1].logprob);
      CHECK(pl[i].top[0].logprob == Approx(-std::log(sum)).margin(1e-5));  // the row's max
    }
    for (size_t t = 1; t < r.tokens.size(); ++t) CHECK(r.tokens[t].prompt_logprobs.empty());
    CHECK_FALSE(r.tokens[0].logprob.has_value());  // top_logprobs stays off
  }
  // A cached prefix is not reused for such a request (its rows were never computed there).
  auto engine = Engine::create(tiny8());
  REQUIRE(engine.is_ok());
  std::mutex mu;
  std::condition_variable cv;
  std::vector<GenerationEvent> firsts, dones;
  auto cb = [&](const GenerationEvent& ev) {
    std::lock_guard<std::mutex> lock(mu);
    if (ev.kind == GenerationEvent::Kind::kToken && ev.completion_tokens == 1) firsts.push_back(ev);
    if (ev.kind == GenerationEvent::Kind::kFinished) dones.push_back(ev);
    cv.notify_all();
  };
  GenerationRequest plain = request(p1, 2, -1);
  REQUIRE(engine->submit(plain, cb).is_ok());
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return dones.size() == 1; }));
  }
  REQUIRE(engine->submit(req, cb).is_ok());
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return dones.size() == 2; }));
  }
  CHECK(dones[1].cached_tokens == 0);
  CHECK(static_cast<int64_t>(firsts[1].prompt_logprobs.size()) == n - 1);
  req.prompt_logprobs = 21;
  CHECK_THAT(engine->submit(req, [](const GenerationEvent&) {}).status().message(),
             Catch::Contains("GenerationRequest.prompt_logprobs = 21"));
}

TEST_CASE("engine logprobs: a count outside [-1, 20] is refused naming the field",
          "[golden][runtime]") {
  auto engine = Engine::create(tiny8());
  REQUIRE(engine.is_ok());
  for (int bad : {21, -2}) {
    auto id = engine->submit(request({5, 6, 7}, 2, bad), [](const GenerationEvent&) {});
    REQUIRE(id.status().code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(id.status().message(),
               Catch::Contains("GenerationRequest.top_logprobs = " + std::to_string(bad)));
  }
  CHECK(tiny8().token_bytes(600).status().code() == ErrorCode::kInvalidArgument);
  auto bytes = tiny8().token_bytes(5);
  REQUIRE(bytes.is_ok());
  const int32_t five[1] = {5};
  CHECK(*bytes == *tiny8().detokenize(five));
}
