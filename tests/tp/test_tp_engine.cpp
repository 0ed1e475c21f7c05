// Rank 0 drives a follower rank (docs/tp.md "Rank processes") through the public API: two
// Models in two threads over TpTcp on loopback; rank 0's Engine (chunked prefill interleaved
// with decode, prefix-cache copies) gives the oracle's greedy tokens while rank 1 only runs
// Model::run_tp_follower. Mismatched settings are refused on both ranks; a follower that stops
// mid-generation ends rank 0's request with an error at once and tp_health() reports it; image
// spans (rank 0 encodes, the rows travel with the forward op) decode as in one process.
#include <catch2/catch.hpp>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "dsv41/engine.hpp"
#include "dsv41/model.hpp"
#include "dsv41/session.hpp"
#include "golden/model/golden_case.hpp"
#include "golden/vision/vision_fixture.hpp"
#include "support/event_collector.hpp"
#include "support/fixtures.hpp"
#include "tp_script.hpp"

using namespace dsv41;

namespace {

ModelParams rank_params(int rank, uint16_t port, const std::string& kv = "1000000000",
                        const std::string& dir = test::fixture("golden/tiny8")) {
  ModelParams mp;
  mp.model_dir = dir;
  mp.threads = 1;
  mp.tp.world = 2;
  mp.tp.rank = rank;
  mp.tp.bind_address = rank == 0 ? "127.0.0.1" : "127.0.0.2";
  mp.tp.peer_address = rank == 0 ? "127.0.0.2" : "127.0.0.1";
  mp.tp.port = port;
  mp.tp.connect_timeout_ms = 10000;
  mp.tp.heartbeat_interval_ms = 100;
  mp.tp.heartbeat_timeout_ms = 2000;
  mp.tp.settings = {{"kv_bytes", kv}, {"max_sequences", "2"}};
  return mp;
}

using Collector = test::EventCollector;

GenerationRequest greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.stop.max_tokens = max_tokens;
  r.stop.ignore_eos = true;
  return r;
}

// Rank 1 in a thread: loads its half of tiny8 and serves rank 0 until rank 0's model goes.
std::future<Status> start_follower(uint16_t port,
                                   const std::string& dir = test::fixture("golden/tiny8")) {
  return std::async(std::launch::async, [port, dir]() -> Status {
    Result<Model> m = Model::load(rank_params(1, port, "1000000000", dir));
    if (!m) return m.status();
    return m->run_tp_follower();
  });
}

}  // namespace

TEST_CASE("tp engine: rank 0's Engine with a follower gives the oracle's greedy tokens",
          "[tp][runtime]") {
  test::GoldenCase g("tiny8");
  const auto p1 = g.i32("prompt1.input_ids");
  const auto want = g.i32("greedy.tokens");
  const uint16_t port = tp_test::free_port();
  auto follower = start_follower(port);
  {
    Result<Model> m = Model::load(rank_params(0, port));
    REQUIRE(m.is_ok());
    EngineParams ep;
    ep.max_sequences = 2;
    ep.max_batched_tokens = 16;  // chunked prefill interleaved with decode
    Result<Engine> engine = Engine::create(*m, ep);
    REQUIRE(engine.is_ok());
    Collector c;
    std::vector<RequestId> ids;
    for (int i = 0; i < 3; ++i) ids.push_back(*engine->submit(greedy(p1, 12), c.callback()));
    for (RequestId id : ids) {
      GenerationEvent ev;
      REQUIRE(c.wait_for(id, std::chrono::seconds(120), &ev));
      INFO(ev.status.to_string());
      REQUIRE(ev.status.is_ok());
      REQUIRE(c.tokens[id] == want);
    }
    // A prefix-cache hit: the follower forks its copy of the cached state too.
    std::vector<int32_t> longer = p1;
    longer.insert(longer.end(), want.begin(), want.begin() + 4);
    RequestId id = *engine->submit(greedy(longer, 8), c.callback());
    GenerationEvent ev;
    REQUIRE(c.wait_for(id, std::chrono::seconds(120), &ev));
    REQUIRE(ev.status.is_ok());
    REQUIRE(ev.cached_tokens >= 37);
    REQUIRE(c.tokens[id] == std::vector<int32_t>(want.begin() + 4, want.end()));
    REQUIRE(m->tp_health().is_ok());
  }  // rank 0's model is destroyed: the follower is told to stop
  REQUIRE(follower.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  const Status fs = follower.get();
  INFO(fs.to_string());
  REQUIRE(fs.is_ok());
}

TEST_CASE("tp engine: speculative rounds (verify forward + rollback) stay in lockstep",
          "[tp][runtime]") {
  // prompt1, its greedy continuation, prompt1 again: prompt lookup drafts, some rejected, so
  // rank 0 rolls back and the follower must roll back the same rows.
  test::GoldenCase g("tiny8");
  const auto p1 = g.i32("prompt1.input_ids");
  auto run = [&](const Model& m, const std::vector<int32_t>& prompt, int speculative_tokens,
                 EngineStats* stats) {
    EngineParams ep;
    ep.speculative_tokens = speculative_tokens;
    Result<Engine> engine = Engine::create(m, ep);
    REQUIRE(engine.is_ok());
    Collector c;
    // Output that cycles (bias on three tokens, a frequency penalty): prompt lookup's drafts are
    // accepted as well as rejected.
    GenerationRequest req = greedy(prompt, 24);
    req.sampling.logit_bias = {{10, 50.0f}, {20, 50.0f}, {30, 50.0f}};
    req.sampling.frequency_penalty = 2.0f;
    const RequestId id = *engine->submit(req, c.callback());
    GenerationEvent ev;
    REQUIRE(c.wait_for(id, std::chrono::seconds(120), &ev));
    INFO(ev.status.to_string());
    REQUIRE(ev.status.is_ok());
    *stats = engine->stats();
    return c.tokens[id];
  };
  ModelParams single;
  single.model_dir = test::fixture("golden/tiny8");
  single.threads = 1;
  const Model one = std::move(Model::load(single)).value();
  EngineStats plain_stats, spec_stats;
  std::vector<int32_t> prompt = p1;
  const std::vector<int32_t> cont = run(one, p1, 0, &plain_stats);
  prompt.insert(prompt.end(), cont.begin(), cont.end());
  prompt.insert(prompt.end(), p1.begin(), p1.end());
  const std::vector<int32_t> want = run(one, prompt, 0, &plain_stats);
  const uint16_t port = tp_test::free_port();
  auto follower = start_follower(port);
  {
    Result<Model> m = Model::load(rank_params(0, port));
    REQUIRE(m.is_ok());
    REQUIRE(run(*m, prompt, 5, &spec_stats) == want);
    INFO("drafted " << spec_stats.spec_draft_tokens_total << ", accepted "
                    << spec_stats.spec_accepted_tokens_total);
    REQUIRE(spec_stats.spec_draft_tokens_total > spec_stats.spec_accepted_tokens_total);
    REQUIRE(spec_stats.spec_accepted_tokens_total > 0);
    REQUIRE(m->tp_health().is_ok());
  }
  REQUIRE(follower.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  const Status fs = follower.get();
  INFO(fs.to_string());
  REQUIRE(fs.is_ok());
}

TEST_CASE("tp engine: a settings mismatch is refused on both ranks naming the key",
          "[tp][runtime]") {
  const uint16_t port = tp_test::free_port();
  auto r1 = std::async(std::launch::async,
                       [&] { return Model::load(rank_params(1, port, "2000000000")).status(); });
  const Status s0 = Model::load(rank_params(0, port)).status();
  const Status s1 = r1.get();
  const std::string want =
      "TP ranks disagree on setting 'kv_bytes': rank 0 has '1000000000', rank 1 has "
      "'2000000000'";
  REQUIRE(s0.code() == ErrorCode::kInvalidArgument);
  REQUIRE(s0.message() == want);
  REQUIRE(s1.message() == want);
}

TEST_CASE("tp engine: the follower stopping mid-generation ends rank 0's request at once",
          "[tp][runtime]") {
  test::GoldenCase g("tiny8");
  const auto p1 = g.i32("prompt1.input_ids");
  const uint16_t port = tp_test::free_port();
  std::atomic<bool> stop{false};
  auto follower = std::async(std::launch::async, [&]() -> Status {
    Result<Model> m = Model::load(rank_params(1, port));
    if (!m) return m.status();
    return m->run_tp_follower(&stop);
  });
  Result<Model> m = Model::load(rank_params(0, port));
  REQUIRE(m.is_ok());
  Result<Engine> engine = Engine::create(*m, EngineParams{});
  REQUIRE(engine.is_ok());
  Collector c;
  RequestId id = *engine->submit(greedy(p1, 100000), c.callback());
  for (int i = 0; i < 200; ++i) {  // wait for a few generated tokens
    {
      std::lock_guard<std::mutex> lock(c.mu);
      if (c.tokens[id].size() >= 3) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const auto t0 = std::chrono::steady_clock::now();
  stop = true;
  GenerationEvent ev;
  REQUIRE(c.wait_for(id, std::chrono::seconds(10), &ev));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("request ended %.2f s after the follower stopped: %s\n", s,
              ev.status.to_string().c_str());
  REQUIRE_FALSE(ev.status.is_ok());
  REQUIRE(ev.status.code() == ErrorCode::kAborted);
  REQUIRE_THAT(ev.status.message(), Catch::Contains("peer rank 1 (127.0.0.2)"));
  REQUIRE_FALSE(m->tp_health().is_ok());
  REQUIRE(follower.get().code() == ErrorCode::kCancelled);
}

TEST_CASE("tp engine: Sessions on rank 0 used from several threads at once stay in lockstep",
          "[tp][runtime]") {
  test::GoldenCase g("tiny8");
  const auto p1 = g.i32("prompt1.input_ids");
  const auto p2 = g.i32("prompt2.input_ids");
  const int64_t V = 600;
  auto last_row = [&](const std::vector<float>& l) {
    return std::vector<float>(l.end() - V, l.end());
  };
  // The same calls on rank 0 alone and with a follower give the same logits rows (TP=2 vs TP=1
  // differences as in docs/tp.md; the argmax must agree).
  const uint16_t port = tp_test::free_port();
  auto follower = start_follower(port);
  {
    Result<Model> m = Model::load(rank_params(0, port));
    REQUIRE(m.is_ok());
    std::vector<std::vector<float>> got(4);
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
      threads.emplace_back([&, i] {
        Result<Session> s = Session::create(*m);
        if (!s) return;
        const auto& ids = i % 2 ? p1 : p2;
        for (int rep = 0; rep < 2; ++rep) {  // forward, fork + destroy, reset, again
          Result<std::vector<float>> l = s->append(ids);
          if (!l) return;
          got[i] = last_row(*l);
          Result<Session> f = s->fork();
          s->reset();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < 4; ++i) {
      const std::vector<float>& want = last_row(g.f32(i % 2 ? "prompt1.logits" : "prompt2.logits"));
      REQUIRE(got[i].size() == static_cast<size_t>(V));
      REQUIRE(test::argmax(got[i].data(), V) == test::argmax(want.data(), V));
      REQUIRE(test::max_abs_diff(got[i].data(), want.data(), V) <= 2e-3);
    }
    REQUIRE(m->tp_health().is_ok());
  }
  REQUIRE(follower.get().is_ok());
}

TEST_CASE("tp engine: images on two ranks decode as in one process", "[tp][runtime][vision]") {
  // Rank 0 encodes (the follower never sees pixels: the span's embedding rows travel with the
  // forward op); Session chunks split the span, a fork continues after it, and the Engine's
  // prefill chunks cut through it. One process over the same checkpoint is the reference.
  const std::string dir = test::make_tiny8_vision();
  ModelParams single;
  single.model_dir = dir;
  single.threads = 1;
  const Model one = std::move(Model::load(single)).value();
  std::vector<uint8_t> rgb(20 * 14 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>((i * 37 + 11) & 0xFF);
  const uint16_t port = tp_test::free_port();
  auto follower = start_follower(port, dir);
  {
    Result<Model> m = Model::load(rank_params(0, port, "1000000000", dir));
    REQUIRE(m.is_ok());
    REQUIRE(m->image_support().is_ok());
    Result<ImageEmbedding> img = m->encode_image({20, 14, rgb});
    Result<ImageEmbedding> img1 = one.encode_image({20, 14, rgb});
    REQUIRE(img.is_ok());
    REQUIRE(img1.is_ok());
    // The tower is replicated, not sharded: rank 0's span is one process's, bit for bit.
    REQUIRE(img->values().size() == img1->values().size());
    REQUIRE(std::equal(img->values().begin(), img->values().end(), img1->values().begin()));
    const int64_t V = m->info().vocab_size;

    // Session: text, the image in 5-token chunks, text, then a fork that continues.
    auto steps = [&](const Model& model) {
      SessionParams sp;
      sp.chunk_tokens = 5;
      Result<Session> s = Session::create(model, sp);
      REQUIRE(s.is_ok());
      std::vector<std::vector<float>> out;
      out.push_back(*s->append(std::vector<int32_t>{0, 5, 6}));
      Result<std::vector<float>> l = s->append_image(*img, true);
      REQUIRE(l.is_ok());
      out.push_back(*l);
      out.push_back(*s->append(std::vector<int32_t>{7, 8}));
      Result<Session> f = s->fork();
      REQUIRE(f.is_ok());
      out.push_back(*f->append(std::vector<int32_t>{9}));
      return out;
    };
    const auto got = steps(*m), want = steps(one);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("step " << i);
      REQUIRE(got[i].size() == want[i].size());
      for (size_t r = 0; r * V < got[i].size(); ++r) {
        INFO("row " << r);
        REQUIRE(test::argmax(got[i].data() + r * V, V) == test::argmax(want[i].data() + r * V, V));
      }
      REQUIRE(test::max_abs_diff(got[i].data(), want[i].data(), got[i].size()) <= 2e-3);
    }

    // Engine: [0, 5, 6] + span + [7, 8] in 5-token prefill chunks, then the conversation
    // extended (a prefix-cache hit: the follower forks its copy of the state with the span).
    auto generate = [&](const Model& model) {
      EngineParams ep;
      ep.max_batched_tokens = 5;
      Result<Engine> engine = Engine::create(model, ep);
      REQUIRE(engine.is_ok());
      Collector c;
      auto shared = std::make_shared<const ImageEmbedding>(
          std::move(model.encode_image({20, 14, rgb})).value());
      std::vector<int32_t> prompt = {0, 5, 6};
      prompt.insert(prompt.end(), static_cast<size_t>(shared->positions()),
                    model.info().image_token_id);
      prompt.insert(prompt.end(), {7, 8});
      GenerationRequest req = greedy(prompt, 6);
      req.images = {PromptImage{3, shared}};
      const RequestId a = *engine->submit(req, c.callback());
      GenerationEvent ev;
      REQUIRE(c.wait_for(a, std::chrono::seconds(120), &ev));
      INFO(ev.status.to_string());
      REQUIRE(ev.status.is_ok());
      std::vector<int32_t> tokens = c.tokens[a];
      req.prompt.insert(req.prompt.end(), tokens.begin(), tokens.end());
      req.prompt.push_back(9);
      req.stop.max_tokens = 4;
      const RequestId b = *engine->submit(req, c.callback());
      REQUIRE(c.wait_for(b, std::chrono::seconds(120), &ev));
      REQUIRE(ev.status.is_ok());
      CHECK(ev.cached_tokens >= 3 + shared->positions() + 2);
      tokens.insert(tokens.end(), c.tokens[b].begin(), c.tokens[b].end());
      return tokens;
    };
    const std::vector<int32_t> tp_tokens = generate(*m);
    REQUIRE(tp_tokens.size() == 10);
    REQUIRE(tp_tokens == generate(one));
    REQUIRE(m->tp_health().is_ok());
  }
  REQUIRE(follower.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  const Status fs = follower.get();
  INFO(fs.to_string());
  REQUIRE(fs.is_ok());
}
