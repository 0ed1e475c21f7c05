// The image calls of the C ABI (dsv41.h "images") on the tiny vision fixture: the same logits as
// the C++ API, the buffer rule, and every NULL / bad-input path named; an engine request with an
// image and log-probabilities (dsv41_engine_submit_with) against a session's greedy loop.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "dsv41/dsv41.h"
#include "support/fixtures.hpp"
#include "support/png_writer.hpp"
#include "vision_fixture.hpp"

namespace dsv41::test {
namespace {

std::string last_error() { return dsv41_last_error_message(); }

void require_status(dsv41_status st, dsv41_status want, const std::string& needle) {
  INFO("status " << dsv41_status_name(st) << " (want " << dsv41_status_name(want)
                 << "), message: " << last_error());
  REQUIRE(st == want);
  REQUIRE(last_error().find(needle) != std::string::npos);
}

dsv41_model* load(const std::string& dir) {
  dsv41_model_params p = dsv41_model_default_params();
  p.model_dir = dir.c_str();
  p.threads = 1;
  p.backend = "cpu";
  dsv41_model* m = nullptr;
  const dsv41_status st = dsv41_model_load(&p, &m);
  INFO(last_error());
  REQUIRE(st == DSV41_OK);
  return m;
}

std::vector<uint8_t> random_rgb(int w, int h) {
  std::mt19937 rng(4);
  std::vector<uint8_t> b(size_t{3} * w * h);
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng() & 0xFF);
  return b;
}

TEST_CASE("C ABI: encode an image and append it to a session", "[golden][vision]") {
  dsv41_model* model = load(make_tiny8_vision());
  const std::vector<uint8_t> rgb = random_rgb(20, 14);
  dsv41_image* image = nullptr;
  CHECK(std::string(dsv41_model_image_encoder(model)) == "cpu");
  CHECK(dsv41_model_image_token(model) == 599);
  REQUIRE(dsv41_model_encode_image(model, rgb.data(), rgb.size(), 20, 14, &image) == DSV41_OK);
  CHECK(dsv41_image_positions(image) == 17);
  CHECK(dsv41_image_positions(nullptr) == -1);

  dsv41_session_params sp = dsv41_session_default_params();
  dsv41_session* s = nullptr;
  REQUIRE(dsv41_session_create(model, &sp, &s) == DSV41_OK);
  const int32_t bos = 0;
  size_t n = 0;
  std::vector<float> logits(600);
  REQUIRE(dsv41_session_append(s, &bos, 1, 0, logits.data(), logits.size(), &n) == DSV41_OK);
  // Size query first: capacity 0 commits the span and reports the size.
  require_status(dsv41_session_append_image(s, image, 0, nullptr, 0, &n),
                 DSV41_ERR_BUFFER_TOO_SMALL, "600 logits do not fit capacity 0");
  CHECK(n == 600);
  CHECK(dsv41_session_position(s) == 18);
  REQUIRE(dsv41_session_rollback(s, 16) == DSV41_OK);  // rollback depth 16
  REQUIRE(dsv41_session_reset(s) == DSV41_OK);
  REQUIRE(dsv41_session_append(s, &bos, 1, 0, logits.data(), logits.size(), &n) == DSV41_OK);
  REQUIRE(dsv41_session_append_image(s, image, 0, logits.data(), logits.size(), &n) == DSV41_OK);
  CHECK(dsv41_session_position(s) == 18);

  // Errors, each named.
  dsv41_image* none = reinterpret_cast<dsv41_image*>(1);
  require_status(dsv41_model_encode_image(model, rgb.data(), rgb.size(), 20, 15, &none),
                 DSV41_ERR_INVALID_ARGUMENT, "20x15");
  CHECK(none == nullptr);
  require_status(dsv41_model_encode_image(nullptr, rgb.data(), rgb.size(), 20, 14, &none),
                 DSV41_ERR_INVALID_ARGUMENT, "model is NULL");
  require_status(dsv41_model_encode_image(model, nullptr, 12, 2, 2, &none),
                 DSV41_ERR_INVALID_ARGUMENT, "rgb is NULL");
  require_status(dsv41_model_encode_image(model, rgb.data(), rgb.size(), 20, 14, nullptr),
                 DSV41_ERR_INVALID_ARGUMENT, "out is NULL");
  require_status(dsv41_session_append_image(s, nullptr, 0, logits.data(), 600, &n),
                 DSV41_ERR_INVALID_ARGUMENT, "image is NULL");
  require_status(dsv41_session_append_image(nullptr, image, 0, logits.data(), 600, &n),
                 DSV41_ERR_INVALID_ARGUMENT, "session is NULL");
  require_status(dsv41_session_append_image(s, image, 0, nullptr, 600, &n),
                 DSV41_ERR_INVALID_ARGUMENT, "logits is NULL");
  require_status(dsv41_session_append_image(s, image, 0, logits.data(), 600, nullptr),
                 DSV41_ERR_INVALID_ARGUMENT, "n_out is NULL");
  dsv41_session_free(s);
  dsv41_image_free(image);
  dsv41_image_free(nullptr);
  dsv41_model_free(model);
}

struct EngineEvents {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<int32_t>> top_tokens;
  bool all_had_logprob = true;
  bool finished = false;
  dsv41_status status = DSV41_OK;
};

void on_engine_event(const dsv41_event* ev, void* user) {
  auto* e = static_cast<EngineEvents*>(user);
  std::lock_guard<std::mutex> lock(e->mu);
  if (ev->kind == DSV41_EVENT_TOKEN) {
    e->tokens.push_back(ev->token);
    e->all_had_logprob &= ev->has_logprob != 0;
    e->logprobs.push_back(ev->logprob);
    e->top_tokens.emplace_back(ev->top_logprob_tokens, ev->top_logprob_tokens + ev->n_top_logprobs);
  } else {
    e->finished = true;
    e->status = ev->status;
  }
  e->cv.notify_all();
}

TEST_CASE("C ABI: an engine request with an image and log-probabilities", "[golden][vision]") {
  dsv41_model* model = load(make_tiny8_vision());
  const std::vector<uint8_t> rgb = random_rgb(20, 14);
  dsv41_image* image = nullptr;
  REQUIRE(dsv41_model_encode_image(model, rgb.data(), rgb.size(), 20, 14, &image) == DSV41_OK);
  std::vector<int32_t> prompt = {0, 5, 6};
  prompt.insert(prompt.end(), 17, 599);  // tiny8's image_token_id, the 17-position span
  prompt.insert(prompt.end(), {7, 8});

  // Reference: a session's greedy loop over the same prompt, log-softmax in double.
  dsv41_session_params sp = dsv41_session_default_params();
  dsv41_session* s = nullptr;
  REQUIRE(dsv41_session_create(model, &sp, &s) == DSV41_OK);
  std::vector<float> logits(600);
  size_t n = 0;
  REQUIRE(dsv41_session_append(s, prompt.data(), 3, 0, logits.data(), 600, &n) == DSV41_OK);
  REQUIRE(dsv41_session_append_image(s, image, 0, logits.data(), 600, &n) == DSV41_OK);
  REQUIRE(dsv41_session_append(s, prompt.data() + 20, 2, 0, logits.data(), 600, &n) == DSV41_OK);
  std::vector<int32_t> want;
  std::vector<double> want_logprob;
  for (int i = 0; i < 5; ++i) {
    const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
    double sum = 0;
    for (float x : logits) sum += std::exp(static_cast<double>(x) - logits[best]);
    want.push_back(static_cast<int32_t>(best));
    want_logprob.push_back(-std::log(sum));
    REQUIRE(dsv41_session_append(s, &want.back(), 1, 0, logits.data(), 600, &n) == DSV41_OK);
  }
  dsv41_session_free(s);

  dsv41_engine* engine = nullptr;
  REQUIRE(dsv41_engine_create(model, nullptr, &engine) == DSV41_OK);
  dsv41_sampler_params greedy = dsv41_sampler_default_params();
  greedy.temperature = 0.0f;
  dsv41_stop_params stop = dsv41_stop_default_params();
  stop.max_tokens = 5;
  stop.ignore_eos = 1;
  dsv41_request_options opts = dsv41_request_default_options();
  CHECK(opts.top_logprobs == -1);
  opts.top_logprobs = 2;
  const dsv41_image* images[1] = {image};
  const int64_t offsets[1] = {3};
  opts.images = images;
  opts.image_offsets = offsets;
  opts.n_images = 1;
  EngineEvents ev;
  REQUIRE(dsv41_engine_submit_with(engine, prompt.data(), prompt.size(), &greedy, &stop, &opts,
                                   on_engine_event, &ev, nullptr) == DSV41_OK);
  dsv41_image_free(image);  // the engine holds its own reference
  {
    std::unique_lock<std::mutex> lock(ev.mu);
    REQUIRE(ev.cv.wait_for(lock, std::chrono::seconds(60), [&] { return ev.finished; }));
  }
  REQUIRE(ev.status == DSV41_OK);
  CHECK(ev.tokens == want);
  CHECK(ev.all_had_logprob);
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("token " << i);
    CHECK(ev.logprobs[i] == Approx(want_logprob[i]).margin(1e-5));
    REQUIRE(ev.top_tokens[i].size() == 2);
    CHECK(ev.top_tokens[i][0] == want[i]);
  }

  // Bad options, each named; nothing is submitted.
  dsv41_image* again = nullptr;
  REQUIRE(dsv41_model_encode_image(model, rgb.data(), rgb.size(), 20, 14, &again) == DSV41_OK);
  const dsv41_image* null_image[1] = {nullptr};
  opts.images = null_image;
  require_status(dsv41_engine_submit_with(engine, prompt.data(), prompt.size(), &greedy, &stop,
                                          &opts, on_engine_event, &ev, nullptr),
                 DSV41_ERR_INVALID_ARGUMENT, "options->images[0] is NULL");
  opts.images = nullptr;
  require_status(dsv41_engine_submit_with(engine, prompt.data(), prompt.size(), &greedy, &stop,
                                          &opts, on_engine_event, &ev, nullptr),
                 DSV41_ERR_INVALID_ARGUMENT, "options->images or options->image_offsets is NULL");
  const dsv41_image* again_list[1] = {again};
  const int64_t misplaced[1] = {0};
  opts.images = again_list;
  opts.image_offsets = misplaced;
  require_status(dsv41_engine_submit_with(engine, prompt.data(), prompt.size(), &greedy, &stop,
                                          &opts, on_engine_event, &ev, nullptr),
                 DSV41_ERR_INVALID_ARGUMENT, "GenerationRequest.images[0]");
  const int64_t past_int64[1] = {INT64_MAX};  // offset + positions would wrap
  opts.image_offsets = past_int64;
  require_status(dsv41_engine_submit_with(engine, prompt.data(), prompt.size(), &greedy, &stop,
                                          &opts, on_engine_event, &ev, nullptr),
                 DSV41_ERR_INVALID_ARGUMENT,
                 "GenerationRequest.images[0].offset = 9223372036854775807");
  opts.image_offsets = offsets;
  opts.top_logprobs = 21;
  require_status(dsv41_engine_submit_with(engine, prompt.data(), prompt.size(), &greedy, &stop,
                                          &opts, on_engine_event, &ev, nullptr),
                 DSV41_ERR_INVALID_ARGUMENT, "GenerationRequest.top_logprobs = 21");
  dsv41_image_free(again);
  dsv41_engine_free(engine);
  dsv41_model_free(model);
}

TEST_CASE("C ABI: encode a PNG file's bytes", "[golden][vision]") {
  dsv41_model* model = load(make_tiny8_vision());
  const std::vector<uint8_t> rgb = random_rgb(20, 14);
  const std::string png = write_rgb_png(20, 14, rgb);
  const auto* bytes = reinterpret_cast<const uint8_t*>(png.data());
  dsv41_image* from_file = nullptr;
  dsv41_image* from_pixels = nullptr;
  REQUIRE(dsv41_model_encode_image_file(model, bytes, png.size(), 0, &from_file) == DSV41_OK);
  REQUIRE(dsv41_model_encode_image(model, rgb.data(), rgb.size(), 20, 14, &from_pixels) ==
          DSV41_OK);
  CHECK(dsv41_image_positions(from_file) == 17);
  // Same pixels, same logits.
  dsv41_session_params sp = dsv41_session_default_params();
  std::vector<std::vector<float>> logits;
  for (dsv41_image* img : {from_file, from_pixels}) {
    dsv41_session* s = nullptr;
    REQUIRE(dsv41_session_create(model, &sp, &s) == DSV41_OK);
    std::vector<float> out(600);
    size_t n = 0;
    REQUIRE(dsv41_session_append_image(s, img, 0, out.data(), out.size(), &n) == DSV41_OK);
    logits.push_back(out);
    dsv41_session_free(s);
  }
  CHECK(logits[0] == logits[1]);
  dsv41_image* none = nullptr;
  require_status(dsv41_model_encode_image_file(model, bytes, png.size(), 279, &none),
                 DSV41_ERR_INVALID_ARGUMENT, "20x14 = 280 pixels exceeds the limit of 279");
  require_status(dsv41_model_encode_image_file(model, bytes, 30, 0, &none),
                 DSV41_ERR_INVALID_ARGUMENT, "PNG");
  require_status(dsv41_model_encode_image_file(model, nullptr, 5, 0, &none),
                 DSV41_ERR_INVALID_ARGUMENT, "bytes is NULL");
  require_status(dsv41_model_encode_image_file(model, bytes, png.size(), -1, &none),
                 DSV41_ERR_INVALID_ARGUMENT, "max_pixels is negative");
  CHECK(none == nullptr);
  dsv41_image_free(from_file);
  dsv41_image_free(from_pixels);
  dsv41_model_free(model);
}

TEST_CASE("C ABI: a text-only checkpoint refuses images", "[golden][vision]") {
  dsv41_model* model = load(fixture("golden/tiny8"));
  const std::vector<uint8_t> rgb = random_rgb(4, 4);
  dsv41_image* image = nullptr;
  require_status(dsv41_model_encode_image(model, rgb.data(), rgb.size(), 4, 4, &image),
                 DSV41_ERR_UNSUPPORTED, "no usable vision tower");
  CHECK(image == nullptr);
  dsv41_model_free(model);
}

}  // namespace
}  // namespace dsv41::test
