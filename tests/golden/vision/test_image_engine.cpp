// Images through the Engine (GenerationRequest.images): greedy tokens equal a Session decoding
// the same prompt, with the span split across prefill chunks; the prefix cache keys images by
// their pixels; requests with misplaced images are refused by field. Backend-agnostic (both sides
// run on the backend DSV41_BACKEND selects): test_kernel_image_runtime runs it on CUDA.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>

#include "dsv41/engine.hpp"
#include "dsv41/session.hpp"
#include "support/event_collector.hpp"
#include "vision_fixture.hpp"

namespace dsv41::test {
namespace {

constexpr int32_t kImageId = 599;  // tiny8's image_token_id

std::vector<uint8_t> random_rgb(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(size_t{3} * w * h);
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng() & 0xFF);
  return b;
}

const Model& model() {
  static Model m = [] {
    ModelParams p;
    p.model_dir = make_tiny8_vision();
    p.threads = 2;  // backend: DSV41_BACKEND (cpu; the kernel tier runs this file with cuda)
    auto r = Model::load(p);
    if (!r.is_ok()) FAIL(r.status().to_string());
    return std::move(r).value();
  }();
  return m;
}

std::shared_ptr<const ImageEmbedding> image(uint32_t seed) {
  const std::vector<uint8_t> rgb = random_rgb(20, 14, seed);
  auto e = model().encode_image({20, 14, rgb});
  REQUIRE(e.is_ok());
  return std::make_shared<const ImageEmbedding>(std::move(e).value());
}

// [0, 5, 6] + span + tail; the image starts at offset 3.
std::vector<int32_t> prompt_with(const ImageEmbedding& img, std::vector<int32_t> tail) {
  std::vector<int32_t> p = {0, 5, 6};
  p.insert(p.end(), static_cast<size_t>(img.positions()), kImageId);
  p.insert(p.end(), tail.begin(), tail.end());
  return p;
}

// Greedy tokens of a Session fed the same prompt (text, image, text) in chunks of 5.
std::vector<int32_t> session_greedy(const ImageEmbedding& img, const std::vector<int32_t>& tail,
                                    int n) {
  SessionParams sp;
  sp.chunk_tokens = 5;
  Result<Session> s = Session::create(model(), sp);
  REQUIRE(s.is_ok());
  REQUIRE(s->append(std::vector<int32_t>{0, 5, 6}).is_ok());
  Result<std::vector<float>> logits = s->append_image(img);
  REQUIRE(logits.is_ok());
  if (!tail.empty()) logits = s->append(tail);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    REQUIRE(logits.is_ok());
    const auto best = std::max_element(logits->begin(), logits->end()) - logits->begin();
    out.push_back(static_cast<int32_t>(best));
    logits = s->append(std::vector<int32_t>{out.back()});
  }
  return out;
}

using Collector = EventCollector;

GenerationRequest greedy(std::vector<int32_t> prompt, std::shared_ptr<const ImageEmbedding> img,
                         int64_t max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.images = {PromptImage{3, std::move(img)}};
  r.sampling.temperature = 0.0f;
  r.stop.max_tokens = max_tokens;
  r.stop.ignore_eos = true;
  return r;
}

TEST_CASE("engine: image requests decode as a Session does, chunks splitting the span",
          "[golden][vision]") {
  EngineParams ep;
  ep.max_batched_tokens = 5;  // the 17-position span spans four chunks
  auto engine = Engine::create(model(), ep);
  REQUIRE(engine.is_ok());
  Collector c;
  const auto a = image(1), b = image(2);
  const std::vector<int32_t> tail = {7, 8};
  auto id_a = engine->submit(greedy(prompt_with(*a, tail), a, 6), c.callback());
  auto id_b = engine->submit(greedy(prompt_with(*b, tail), b, 6), c.callback());
  REQUIRE(id_a.is_ok());
  REQUIRE(id_b.is_ok());
  REQUIRE(c.wait(*id_a).status.is_ok());
  REQUIRE(c.wait(*id_b).status.is_ok());
  const std::vector<int32_t> want_a = session_greedy(*a, tail, 6);
  const std::vector<int32_t> want_b = session_greedy(*b, tail, 6);
  CHECK(c.tokens[*id_a] == want_a);
  CHECK(c.tokens[*id_b] == want_b);
  CHECK(want_a != want_b);  // the image, not only its token ids, steers the model

  // Extending A's conversation reuses A's state; the same tokens with image B must not.
  std::vector<int32_t> more = tail;
  more.insert(more.end(), want_a.begin(), want_a.end());
  more.push_back(9);
  auto id_a2 = engine->submit(greedy(prompt_with(*a, more), a, 4), c.callback());
  REQUIRE(id_a2.is_ok());
  GenerationEvent ev_a2 = c.wait(*id_a2);
  REQUIRE(ev_a2.status.is_ok());
  CHECK(ev_a2.cached_tokens >= 3 + a->positions() + 2);
  CHECK(c.tokens[*id_a2] == session_greedy(*a, more, 4));
  auto id_b2 = engine->submit(greedy(prompt_with(*b, more), b, 4), c.callback());
  REQUIRE(id_b2.is_ok());
  GenerationEvent ev_b2 = c.wait(*id_b2);
  REQUIRE(ev_b2.status.is_ok());
  CHECK(ev_b2.cached_tokens <= 3 + b->positions() + 2);  // at most B's own earlier prompt
  CHECK(c.tokens[*id_b2] == session_greedy(*b, more, 4));
}

TEST_CASE("engine: misplaced images are refused naming the field", "[golden][vision]") {
  auto engine = Engine::create(model());
  REQUIRE(engine.is_ok());
  Collector c;
  const auto a = image(3);
  auto expect = [&](GenerationRequest r, const std::string& needle) {
    auto id = engine->submit(std::move(r), c.callback());
    REQUIRE_FALSE(id.is_ok());
    CHECK(id.status().code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(id.status().message(), Catch::Contains(needle));
  };
  GenerationRequest shifted = greedy(prompt_with(*a, {7}), a, 2);
  shifted.images[0].offset = 4;  // prompt[4 + 16] = 7 is not an image position
  expect(shifted, "GenerationRequest.images[0]: prompt[20] = 7");
  GenerationRequest outside = greedy(prompt_with(*a, {}), a, 2);
  outside.images[0].offset = 10;
  expect(outside, "GenerationRequest.images[0].offset = 10");
  // offset + positions overflows int64 here: the check must not wrap and then write the flags
  // 2^63 bytes away.
  for (const int64_t huge : {INT64_MAX, INT64_MAX - 3, int64_t{-5}}) {
    GenerationRequest far = greedy(prompt_with(*a, {}), a, 2);
    far.images[0].offset = huge;
    expect(far, fmt::format("GenerationRequest.images[0].offset = {}", huge));
  }
  GenerationRequest twice = greedy(prompt_with(*a, {}), a, 2);
  twice.images.push_back(twice.images[0]);
  expect(twice, "GenerationRequest.images[1].offset = 3");
  GenerationRequest null_image = greedy(prompt_with(*a, {}), nullptr, 2);
  expect(null_image, "GenerationRequest.images[0].image is null");
}

}  // namespace
}  // namespace dsv41::test
