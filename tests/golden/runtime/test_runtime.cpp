// Runtime API on the tiny8 oracle model: incremental decode, chunked prefill, prefix reuse,
// interleaved sessions and the Engine's scheduling give the oracle's logits and tokens.
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "dsv41/engine.hpp"
#include "dsv41/sampler.hpp"
#include "dsv41/session.hpp"
#include "loader/safetensors.hpp"
#include "support/event_collector.hpp"
#include "support/fixtures.hpp"
#include "support/tiny8_model.hpp"
#include "support/tolerance.hpp"

using namespace dsv41;
using dsv41::test::fixture;
using dsv41::test::require_close;

namespace {

// tiny8 is robust end to end: the oracle agrees with itself to 4.3e-6 (tiny8/README.md).
constexpr double kLogitTol = 2e-3;

struct Golden {
  std::unique_ptr<SafetensorsFile> file;
  std::vector<float> f32(const std::string& name) const {
    return tensor_to_f32(file->view(*file->find_info(name)));
  }
  std::vector<int32_t> ids(const std::string& name) const {
    std::vector<float> v = f32(name);
    return std::vector<int32_t>(v.begin(), v.end());
  }
};

const Model& tiny8() { return test::tiny8_model(); }

const Golden& golden() {
  static Golden g{SafetensorsFile::open(fixture("golden/tiny8/golden.safetensors"))};
  return g;
}

Session session(int64_t chunk = 0, int64_t max_context = 262144) {
  SessionParams sp;
  sp.chunk_tokens = chunk;
  sp.max_context = max_context;
  auto s = Session::create(tiny8(), sp);
  REQUIRE(s.is_ok());
  return std::move(s).value();
}

}  // namespace

TEST_CASE("session: prefill then single-token decode equals the oracle's incremental logits",
          "[golden][runtime]") {
  const auto ids = golden().ids("decode.input_ids");  // prompt1 (37) + 12 continuation tokens
  const auto step = golden().f32("decode.step_logits");
  const auto full = golden().f32("decode.full_logits");
  const int64_t V = tiny8().info().vocab_size;
  Session s = session();
  auto first = s.append(std::span(ids).first(37));
  REQUIRE(first.is_ok());
  for (int i = 0; i < 12; ++i) {
    auto r = s.append(std::span(ids).subspan(37 + i, 1));
    REQUIRE(r.is_ok());
    // Row i of step_logits is the logits at position 37 + i (after feeding ids[37 + i]).
    require_close("decode step " + std::to_string(i), r->data(), step.data() + i * V, V, kLogitTol);
    require_close("decode vs one-shot, position " + std::to_string(37 + i), r->data(),
                  full.data() + (37 + i) * V, V, kLogitTol);
  }
  REQUIRE(s.position() == 49);
}

TEST_CASE("session: chunked prefill with chunks 1, 3, 16, 2048 equals one shot",
          "[golden][runtime]") {
  const auto ids = golden().ids("prompt1.input_ids");
  const auto want = golden().f32("prompt1.logits");
  for (int64_t chunk : {1, 3, 16, 2048}) {
    Session s = session(chunk);
    auto r = s.append(ids, /*all_logits=*/true);
    REQUIRE(r.is_ok());
    require_close("chunk " + std::to_string(chunk), r->data(), want.data(), want.size(), kLogitTol);
  }
}

TEST_CASE("session: fork (prefix reuse) and interleaved sessions give the same logits",
          "[golden][runtime]") {
  const auto p1 = golden().ids("prompt1.input_ids");
  const auto p2 = golden().ids("prompt2.input_ids");
  const auto want1 = golden().f32("prompt1.logits");
  const auto want2 = golden().f32("prompt2.logits");
  const int64_t V = tiny8().info().vocab_size;
  Session a = session(), b = session();
  // Interleave: a and b advance alternately in chunks of 5.
  for (size_t i = 0; i < std::max(p1.size(), p2.size()); i += 5) {
    if (i < p1.size()) {
      auto r = a.append(std::span(p1).subspan(i, std::min<size_t>(5, p1.size() - i)), true);
      REQUIRE(r.is_ok());
      require_close("interleaved a", r->data(), want1.data() + i * V, r->size(), kLogitTol);
    }
    if (i < p2.size()) {
      auto r = b.append(std::span(p2).subspan(i, std::min<size_t>(5, p2.size() - i)), true);
      REQUIRE(r.is_ok());
      require_close("interleaved b", r->data(), want2.data() + i * V, r->size(), kLogitTol);
    }
  }
  // Fork after 20 tokens of prompt1 and finish both: the fork equals a fresh prefill.
  Session c = session();
  REQUIRE(c.append(std::span(p1).first(20)).is_ok());
  auto d = c.fork();
  REQUIRE(d.is_ok());
  auto rc = c.append(std::span(p1).subspan(20), true);
  auto rd = d->append(std::span(p1).subspan(20), true);
  REQUIRE(rc.is_ok());
  REQUIRE(rd.is_ok());
  require_close("fork", rd->data(), want1.data() + 20 * V, rd->size(), kLogitTol);
  require_close("original after fork", rc->data(), want1.data() + 20 * V, rc->size(), kLogitTol);
}

TEST_CASE("session: rollback then re-append gives bit-identical logits", "[golden][runtime]") {
  const auto p1 = golden().ids("prompt1.input_ids");
  Session s = session();
  REQUIRE(s.append(std::span(p1).first(30)).is_ok());
  auto want = s.append(std::span(p1).subspan(30), true);
  REQUIRE(want.is_ok());
  REQUIRE(s.rollback(7).is_ok());
  REQUIRE(s.position() == 30);
  auto again = s.append(std::span(p1).subspan(30), true);
  REQUIRE(again.is_ok());
  REQUIRE(*again == *want);
  Status too_far = s.rollback(17);
  REQUIRE(too_far.code() == ErrorCode::kInvalidArgument);
  REQUIRE(s.position() == 37);
}

TEST_CASE("session: invalid ids and context overflow are typed errors that commit nothing",
          "[golden][runtime]") {
  Session s = session(0, 8);
  std::vector<int32_t> bad = {0, 600};
  auto r = s.append(bad);
  REQUIRE(r.status().code() == ErrorCode::kInvalidArgument);
  REQUIRE_THAT(r.status().message(), Catch::Contains("ids[1] = 600"));
  REQUIRE(s.position() == 0);
  std::vector<int32_t> nine(9, 5);
  auto o = s.append(nine);
  REQUIRE(o.status().code() == ErrorCode::kContextOverflow);
  REQUIRE(s.position() == 0);
  REQUIRE(s.append(std::span(nine).first(8)).is_ok());
  REQUIRE(s.append(std::span(nine).first(1)).status().code() == ErrorCode::kContextOverflow);
  REQUIRE(s.append({}).status().code() == ErrorCode::kInvalidArgument);
  SessionParams sp;
  sp.max_context = 0;
  REQUIRE_THAT(Session::create(tiny8(), sp).status().message(),
               Catch::Contains("SessionParams.max_context"));
}

namespace {
// Collects the events of requests; waits for their kFinished.
using Collector = test::EventCollector;

GenerationRequest greedy_request(std::vector<int32_t> prompt, int64_t max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.stop.max_tokens = max_tokens;
  r.stop.ignore_eos = true;
  return r;
}
}  // namespace

TEST_CASE("engine: greedy generation reproduces the oracle's greedy tokens, concurrently",
          "[golden][runtime]") {
  const auto p1 = golden().ids("prompt1.input_ids");
  const auto want = golden().ids("greedy.tokens");
  EngineParams ep;
  ep.max_sequences = 2;
  ep.max_batched_tokens = 16;  // forces chunked prefill interleaved with decode
  auto engine = Engine::create(tiny8(), ep);
  REQUIRE(engine.is_ok());
  Collector c;
  std::vector<RequestId> ids;
  for (int i = 0; i < 3; ++i) {  // more requests than sequences: all served
    auto id = engine->submit(greedy_request(p1, 12), c.callback());
    REQUIRE(id.is_ok());
    ids.push_back(*id);
  }
  for (RequestId id : ids) {
    GenerationEvent ev = c.wait(id);
    REQUIRE(ev.status.is_ok());
    REQUIRE(ev.finish == FinishReason::kLength);
    REQUIRE(ev.completion_tokens == 12);
    REQUIRE(c.tokens[id] == want);
  }
  // The prompt is now cached: a request extending it reuses the state.
  std::vector<int32_t> longer = p1;
  longer.insert(longer.end(), want.begin(), want.begin() + 4);
  auto id = engine->submit(greedy_request(longer, 8), c.callback());
  REQUIRE(id.is_ok());
  GenerationEvent ev = c.wait(*id);
  REQUIRE(ev.status.is_ok());
  REQUIRE(ev.cached_tokens >= 37);
  REQUIRE(std::vector<int32_t>(c.tokens[*id].begin(), c.tokens[*id].end()) ==
          std::vector<int32_t>(want.begin() + 4, want.end()));
  EngineStats st = engine->stats();
  // Counted in tokens (vLLM's metric): every admitted prompt's tokens looked up, the reused ones
  // hit.
  REQUIRE(st.prefix_cache_hits >= ev.cached_tokens);  // (the third request may hit too)
  REQUIRE(st.prefix_cache_queries ==
          3 * static_cast<int64_t>(p1.size()) + static_cast<int64_t>(longer.size()));
}

// The Engine samples where the logits are (on CUDA: sample_tokens on the device); a Session +
// Sampler loop on the same model downloads the same logits and samples on the host. With the
// same seed both give the same tokens (docs/sampling.md "Device path"); on the CPU backend both
// are the host path. Run with DSV41_BACKEND=cuda by test_kernel_runtime.
TEST_CASE("engine: seeded sampling equals Session + Sampler on the same backend",
          "[golden][runtime]") {
  const auto p1 = golden().ids("prompt1.input_ids");
  for (int variant = 0; variant < 3; ++variant) {
    GenerationRequest req;
    req.prompt = p1;
    req.stop.max_tokens = 24;
    req.stop.ignore_eos = true;
    req.sampling.temperature = 1.3f;
    req.sampling.seed = 1234 + variant;
    if (variant == 1) {
      req.sampling.top_k = 20;
      req.sampling.top_p = 0.9f;
      req.sampling.repetition_penalty = 1.2f;
      req.sampling.presence_penalty = 0.5f;
      req.sampling.logit_bias[int32_t{p1[3]}] = -2.0f;
    }
    if (variant == 2) {
      req.sampling.min_p = 0.02f;
      req.sampling.frequency_penalty = 0.4f;
    }
    // The host loop: one-shot prefill, then one token per append (the Engine's schedule with a
    // budget that covers the prompt).
    auto sampler = Sampler::create(req.sampling, tiny8().info().vocab_size);
    REQUIRE(sampler.is_ok());
    REQUIRE(sampler->set_prompt(p1).is_ok());
    Session s = session();
    auto logits = s.append(p1, false);
    REQUIRE(logits.is_ok());
    std::vector<int32_t> want;
    for (int i = 0; i < 24; ++i) {
      auto t = sampler->sample(*logits);
      REQUIRE(t.is_ok());
      want.push_back(*t);
      REQUIRE(sampler->accept(*t).is_ok());
      if (i + 1 < 24) {
        logits = s.append(std::vector<int32_t>{*t}, false);
        REQUIRE(logits.is_ok());
      }
    }
    EngineParams ep;
    ep.max_batched_tokens = 2048;
    ep.prefix_cache_entries = 0;
    auto engine = Engine::create(tiny8(), ep);
    REQUIRE(engine.is_ok());
    Collector c;
    auto id = engine->submit(req, c.callback());
    REQUIRE(id.is_ok());
    GenerationEvent ev = c.wait(*id);
    REQUIRE(ev.status.is_ok());
    INFO("variant " << variant << " backend " << tiny8().info().backend);
    REQUIRE(c.tokens[*id] == want);
  }
}

TEST_CASE("engine: cancel, typed submit errors, budget exhaustion, shutdown", "[golden][runtime]") {
  const auto p1 = golden().ids("prompt1.input_ids");
  EngineParams ep;
  ep.max_context = 64;
  ep.prefix_cache_entries = 0;
  auto engine = Engine::create(tiny8(), ep);
  REQUIRE(engine.is_ok());
  Collector c;
  auto id = engine->submit(greedy_request(p1, 20), c.callback());
  REQUIRE(id.is_ok());
  REQUIRE(engine->cancel(*id).is_ok());
  GenerationEvent ev = c.wait(*id);
  if (!ev.status.is_ok()) REQUIRE(ev.status.code() == ErrorCode::kCancelled);
  REQUIRE(engine->cancel(*id).code() == ErrorCode::kNotFound);
  REQUIRE(engine->stats().kv_bytes_used == 0);  // its state was freed

  REQUIRE(engine->submit(greedy_request({}, 4), c.callback()).status().code() ==
          ErrorCode::kInvalidArgument);
  REQUIRE_THAT(engine->submit(greedy_request({0, 9999}, 4), c.callback()).status().message(),
               Catch::Contains("prompt[1] = 9999"));
  REQUIRE(engine->submit(greedy_request(std::vector<int32_t>(64, 5), 4), c.callback())
              .status()
              .code() == ErrorCode::kContextOverflow);
  GenerationRequest bad = greedy_request(p1, 4);
  bad.sampling.top_p = 2.0f;
  REQUIRE_THAT(engine->submit(bad, c.callback()).status().message(), Catch::Contains("top_p"));

  // A budget below one sequence's minimal state: kContextOverflow at submit (a retry cannot help).
  EngineParams tiny_budget;
  tiny_budget.kv_bytes = 16;
  auto small = Engine::create(tiny8(), tiny_budget);
  REQUIRE(small.is_ok());
  const Status never = small->submit(greedy_request(p1, 4), c.callback()).status();
  REQUIRE(never.code() == ErrorCode::kContextOverflow);
  REQUIRE_THAT(never.message(), Catch::Contains("-token prompt exceeds the KV budget of 16 bytes"));

  // Length cut by the context: finishes with kLength at max_context.
  auto capped = engine->submit(greedy_request(p1, kNoTokenLimit), c.callback());
  REQUIRE(capped.is_ok());
  GenerationEvent cev = c.wait(*capped);
  REQUIRE(cev.status.is_ok());
  REQUIRE(cev.finish == FinishReason::kLength);
  REQUIRE(cev.completion_tokens == 64 - 37);

  // max_tokens near INT64_MAX: the reservation is the context, not an overflowed negative one.
  auto huge = engine->submit(greedy_request(p1, INT64_MAX), c.callback());
  REQUIRE(huge.is_ok());
  GenerationEvent hev = c.wait(*huge);
  REQUIRE(hev.status.is_ok());
  REQUIRE(hev.finish == FinishReason::kLength);
  REQUIRE(hev.completion_tokens == 64 - 37);

  engine->shutdown();
  REQUIRE(engine->submit(greedy_request(p1, 4), c.callback()).status().code() ==
          ErrorCode::kAborted);
}

TEST_CASE("engine: shutdown from a callback and move-assignment leave usable handles",
          "[golden][runtime]") {
  const auto p1 = golden().ids("prompt1.input_ids");
  EngineParams ep;
  ep.max_context = 64;
  // Shutdown inside the first token's callback: later calls from this thread answer as after a
  // shutdown (the Engine let go of its Impl; they dereferenced null).
  auto engine = Engine::create(tiny8(), ep);
  REQUIRE(engine.is_ok());
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false, shut = false;
  auto id = engine->submit(greedy_request(p1, 8), [&](const GenerationEvent& ev) {
    if (ev.kind == GenerationEvent::Kind::kToken && !shut) {
      shut = true;
      engine->shutdown();
    }
    if (ev.kind == GenerationEvent::Kind::kFinished) {
      std::lock_guard<std::mutex> lock(mu);
      finished = true;
      cv.notify_all();
    }
  });
  REQUIRE(id.is_ok());
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return finished; }));
  }
  Collector c;
  REQUIRE(engine->submit(greedy_request(p1, 4), c.callback()).status().code() ==
          ErrorCode::kAborted);
  REQUIRE(engine->cancel(*id).code() == ErrorCode::kNotFound);
  REQUIRE(engine->stats().running == 0);

  // Move-assigning onto a running Engine shuts it down first (std::terminate before); the
  // moved-from one answers kAborted.
  auto a = Engine::create(tiny8(), ep), b = Engine::create(tiny8(), ep);
  REQUIRE(a.is_ok());
  REQUIRE(b.is_ok());
  *a = std::move(*b);
  auto ok = a->submit(greedy_request(p1, 2), c.callback());
  REQUIRE(ok.is_ok());
  REQUIRE(c.wait(*ok).status.is_ok());
  REQUIRE(b->submit(greedy_request(p1, 2), c.callback()).status().code() == ErrorCode::kAborted);
}

namespace {
struct EngineRun {
  std::vector<int32_t> tokens;
  GenerationEvent done;
  EngineStats stats;
};

// `req`, then (when follow_up) prompt + its output again with max_tokens 1: the prefix cache must
// serve the same number of tokens as after plain decoding.
EngineRun run_engine(int speculative_tokens, const GenerationRequest& req,
                     int64_t* follow_up_cached = nullptr, int64_t max_context = 262144) {
  EngineParams ep;
  ep.speculative_tokens = speculative_tokens;
  ep.max_context = max_context;
  auto engine = Engine::create(tiny8(), ep);
  REQUIRE(engine.is_ok());
  Collector c;
  auto id = engine->submit(req, c.callback());
  REQUIRE(id.is_ok());
  EngineRun out;
  out.done = c.wait(*id);
  out.stats = engine->stats();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    out.tokens = c.tokens[*id];
  }
  if (follow_up_cached != nullptr) {
    GenerationRequest next = req;
    next.prompt.insert(next.prompt.end(), out.tokens.begin(), out.tokens.end());
    next.stop.max_tokens = 1;
    auto id2 = engine->submit(next, c.callback());
    REQUIRE(id2.is_ok());
    *follow_up_cached = c.wait(*id2).cached_tokens;
  }
  return out;
}
}  // namespace

TEST_CASE("engine: speculative decoding streams the tokens of plain decoding",
          "[golden][runtime]") {
  // prompt1, its greedy continuation, prompt1 again: prompt lookup finds n-grams to draft from
  // (tests/golden/speculative/test_speculative.cpp).
  const auto p1 = golden().ids("prompt1.input_ids");
  std::vector<int32_t> prompt = p1;
  const EngineRun g = run_engine(0, greedy_request(p1, 24));
  prompt.insert(prompt.end(), g.tokens.begin(), g.tokens.end());
  prompt.insert(prompt.end(), p1.begin(), p1.end());

  GenerationRequest greedy = greedy_request(prompt, 32);
  GenerationRequest sampled = greedy;
  sampled.sampling.temperature = 0.8f;
  sampled.sampling.top_k = 3;
  sampled.sampling.seed = 7;
  GenerationRequest stopped = greedy;
  const EngineRun plain = run_engine(0, greedy);
  stopped.stop.stop_token_ids = {plain.tokens[9]};
  GenerationRequest short_one = greedy;
  short_one.stop.max_tokens = 3;
  for (const GenerationRequest* req : {&greedy, &stopped, &short_one}) {
    const EngineRun want = run_engine(0, *req);
    const EngineRun got = run_engine(5, *req);
    REQUIRE(got.done.status.is_ok());
    REQUIRE(got.tokens == want.tokens);
    REQUIRE(got.done.finish == want.done.finish);
    REQUIRE(got.done.completion_tokens == want.done.completion_tokens);
    REQUIRE(got.stats.generation_tokens_total == want.stats.generation_tokens_total);
    REQUIRE(want.stats.spec_draft_tokens_total == 0);
  }
  const EngineRun spec = run_engine(5, greedy);
  INFO("drafted " << spec.stats.spec_draft_tokens_total << ", accepted "
                  << spec.stats.spec_accepted_tokens_total);
  REQUIRE(spec.stats.spec_draft_tokens_total > 0);
  REQUIRE(spec.stats.spec_accepted_tokens_total <= spec.stats.spec_draft_tokens_total);
  // Sampled: a seed gives the same tokens again (acceptance draws seeded from it too), and the
  // max_tokens limit holds exactly.
  const EngineRun a = run_engine(5, sampled), b = run_engine(5, sampled);
  REQUIRE(a.done.status.is_ok());
  REQUIRE(a.tokens == b.tokens);
  REQUIRE(a.tokens.size() == 32);
  REQUIRE(a.done.finish == FinishReason::kLength);

  // A greedy request whose output cycles (logit_bias on three tokens, a frequency penalty), so
  // prompt lookup's drafts are accepted: cuts by max_tokens, a stop token and the context land
  // mid-round, and the prefix cache holds what plain decoding leaves.
  GenerationRequest cyc = greedy_request(p1, 24);
  cyc.sampling.logit_bias = {{10, 50.0f}, {20, 50.0f}, {30, 50.0f}};
  cyc.sampling.frequency_penalty = 2.0f;
  int64_t accepted = 0;
  for (int64_t max_tokens : {7, 11, 13, 24}) {
    for (bool stop_mid : {false, true}) {
      GenerationRequest req = cyc;
      req.stop.max_tokens = max_tokens;
      const EngineRun plain_run = run_engine(0, req);
      if (stop_mid) req.stop.stop_token_ids = {plain_run.tokens[max_tokens / 2]};
      int64_t want_cached = 0, got_cached = 0;
      const EngineRun want = run_engine(0, req, &want_cached);
      const EngineRun got = run_engine(5, req, &got_cached);
      INFO("max_tokens " << max_tokens << ", stop token " << stop_mid);
      REQUIRE(got.tokens == want.tokens);
      REQUIRE(got.done.finish == want.done.finish);
      REQUIRE(got.done.completion_tokens == want.done.completion_tokens);
      REQUIRE(got_cached == want_cached);
      accepted += got.stats.spec_accepted_tokens_total;
    }
  }
  const auto n_p1 = static_cast<int64_t>(p1.size());
  for (int64_t context : {n_p1 + 9, n_p1 + 14}) {
    const EngineRun want = run_engine(0, cyc, nullptr, context);
    const EngineRun got = run_engine(5, cyc, nullptr, context);
    REQUIRE(got.tokens == want.tokens);
    REQUIRE(got.done.finish == FinishReason::kLength);
  }
  INFO("accepted drafts over the cut cases: " << accepted);
  REQUIRE(accepted >= 5);

  EngineParams bad;
  bad.speculative_tokens = 16;
  REQUIRE_THAT(Engine::create(tiny8(), bad).status().message(),
               Catch::Contains("EngineParams.speculative_tokens = 16 must be in [0, 15]"));
}
