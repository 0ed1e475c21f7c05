// Images through the chat handler on the real engine: tiny8 with the synthetic vision tower of
// tests/golden/vision/vision_fixture.hpp, PNGs written here with libpng. The span reaches the
// prompt (usage counts it), different images steer the output, and undecodable images are
// answered 400 naming the content part.
#include <simdjson.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <random>
#include <string>

#include "api/api.hpp"
#include "api/generation_backend.hpp"
#include "channel_collect.hpp"
#include "golden/vision/vision_fixture.hpp"
#include "support/png_writer.hpp"

using namespace dsv41;
using namespace dsv41::server;

namespace {

std::string random_png(int w, int h, uint32_t seed) {
  return dsv41::test::write_rgb_png(w, h, dsv41::test::random_rgb(w, h, seed));
}

std::string base64(const std::string& in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += k[(v >> s) & 63];
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint8_t(in[i]) << 16;
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += k[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

std::string chat_with_image(const std::string& mime, const std::string& file) {
  return R"({"model":"deepseek-v4.1-flash","max_tokens":8,"temperature":0,"messages":[)"
         R"({"role":"user","content":[{"type":"text","text":"what is this?"},)"
         R"({"type":"image_url","image_url":{"url":"data:)" +
         mime + ";base64," + base64(file) + R"("}}]}]})";
}

std::pair<int, std::string> collect(HttpResponse res) {
  return dsv41::server::test::collect(std::move(res), std::chrono::seconds(60));
}

// The real engine, with encode_image held at a gate until the test opens it (or failing on
// demand): shows where the vision tower runs and what its failures become.
class GatedBackend final : public GenerationBackend {
 public:
  explicit GatedBackend(std::shared_ptr<EngineBackend> b) : b_(std::move(b)) {}
  Result<std::vector<int32_t>> tokenize(std::string_view t, bool special) const override {
    return b_->tokenize(t, special);
  }
  Result<std::string> detokenize(std::span<const int32_t> ids) const override {
    return b_->detokenize(ids);
  }
  Result<RequestId> submit(GenerationRequest r, EventCallback cb) override {
    return b_->submit(std::move(r), std::move(cb));
  }
  Status cancel(RequestId id) override { return b_->cancel(id); }
  EngineStats stats() const override { return b_->stats(); }
  int64_t vocab_size() const override { return b_->vocab_size(); }
  int64_t max_context() const override { return b_->max_context(); }
  Status image_support() const override { return b_->image_support(); }
  int32_t image_token_id() const override { return b_->image_token_id(); }
  Result<int64_t> image_positions(int w, int h) const override { return b_->image_positions(w, h); }
  Result<ImageEmbedding> encode_image(const ImagePixels& image) const override {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
    --waiting_;
    if (fail_) return Status(ErrorCode::kOutOfMemory, "gate: encode failed on purpose");
    ++encodes_;
    lock.unlock();
    return b_->encode_image(image);
  }
  void shutdown() override { b_->shutdown(); }

  void open(bool fail = false) {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    fail_ = fail;
    cv_.notify_all();
  }
  int encodes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return encodes_;
  }
  // Waits until an encode is held at the gate.
  bool wait_for_encode() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return waiting_ > 0; });
  }

 private:
  std::shared_ptr<EngineBackend> b_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable int waiting_ = 0, encodes_ = 0;
  bool open_ = false, fail_ = false;
};

struct VisionServer {
  explicit VisionServer(bool gated = false, int64_t image_cache_bytes = 256 << 20) {
    ModelParams p;
    p.model_dir = dsv41::test::make_tiny8_vision();
    p.threads = 2;
    p.backend = "cpu";
    Result<Model> m = Model::load(p);
    REQUIRE(m.is_ok());
    auto b = EngineBackend::create(std::move(m).value(), EngineParams{});
    REQUIRE(b.is_ok());
    backend = std::shared_ptr<EngineBackend>(std::move(b).value());
    if (gated) gate = std::make_shared<GatedBackend>(backend);
    ServerConfig c;
    c.model_dir = p.model_dir;
    c.image_cache_bytes = image_cache_bytes;
    api.emplace(c, std::nullopt);
    if (gate)
      api->set_backend(gate);
    else
      api->set_backend(backend);
  }
  std::pair<int, std::string> post(const std::string& body) {
    HttpRequest r;
    r.method = "POST";
    r.path = "/v1/chat/completions";
    r.body = body;
    return collect(api->handle(r));
  }
  HttpResponse send(const std::string& path, const std::string& body, const char* method = "POST") {
    HttpRequest r;
    r.method = method;
    r.path = path;
    r.body = body;
    return api->handle(r);
  }
  std::shared_ptr<EngineBackend> backend;
  std::shared_ptr<GatedBackend> gate;
  std::optional<Api> api;
};

struct Reply {
  std::string text;  // reasoning + content
  int64_t prompt_tokens = 0;
};

Reply parse(const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(body);
  Reply r;
  simdjson::dom::element m = doc["choices"].at(0)["message"];
  std::string_view reasoning;
  if (m["reasoning_content"].get(reasoning)) reasoning = {};
  r.text = std::string(reasoning) + "|" + std::string(std::string_view(m["content"]));
  r.prompt_tokens = int64_t(doc["usage"]["prompt_tokens"]);
  return r;
}

TEST_CASE("chat with an image: the span is in the prompt and the image steers the output",
          "[server]") {
  VisionServer s;
  auto [st_a, body_a] = s.post(chat_with_image("image/png", random_png(20, 14, 1)));
  INFO(body_a);
  REQUIRE(st_a == 200);
  auto [st_b, body_b] = s.post(chat_with_image("image/png", random_png(20, 14, 2)));
  REQUIRE(st_b == 200);
  auto [st_a2, body_a2] = s.post(chat_with_image("image/png", random_png(20, 14, 1)));
  REQUIRE(st_a2 == 200);
  const Reply a = parse(body_a), b = parse(body_b), a2 = parse(body_a2);
  // 20x14 on the fixture's tower: a 3x4 grid, 3·5 + 2 = 17 span positions for one placeholder.
  CHECK(a.prompt_tokens == b.prompt_tokens);
  CHECK(a.prompt_tokens >= 17 + 4);
  CHECK(a.text == a2.text);  // greedy and deterministic
  CHECK(a.text != b.text);
}

TEST_CASE("chat images that cannot be decoded are 400 naming the part", "[server]") {
  VisionServer s;
  auto expect = [&](const std::string& mime, const std::string& file, const std::string& needle) {
    auto [status, body] = s.post(chat_with_image(mime, file));
    INFO(body);
    CHECK(status == 400);
    CHECK_THAT(body,
               Catch::Contains("messages[0].content[1].image_url") && Catch::Contains(needle));
  };
  // A GIF header with no image after it: the GIF decoder names what it could not read.
  std::string gif = "GIF89a";
  gif += std::string("\x02\x00\x02\x00\x00\x00\x00", 7);
  expect("image/gif", gif, "image: GIF: ");
  std::string broken = random_png(20, 14, 3);
  broken.resize(broken.size() - 30);
  expect("image/png", broken, "image: PNG");
}

TEST_CASE("the vision tower runs off the I/O thread: /health answers while an image encodes",
          "[server]") {
  VisionServer s(/*gated=*/true);
  // handle() returns at once with the response still pending; the encode waits at the gate.
  HttpResponse pending =
      s.send("/v1/chat/completions", chat_with_image("image/png", random_png(20, 14, 1)));
  REQUIRE(pending.channel != nullptr);
  REQUIRE(s.gate->wait_for_encode());
  auto [health_status, health_body] = collect(s.send("/health", "", "GET"));
  CHECK(health_status == 200);
  s.gate->open();
  auto [status, body] = collect(std::move(pending));
  INFO(body);
  CHECK(status == 200);
  CHECK_THAT(body, Catch::Contains("\"prompt_tokens\""));
}

TEST_CASE("a failed image encode reaches the client, streamed or not", "[server]") {
  VisionServer s(/*gated=*/true);
  s.gate->open(/*fail=*/true);
  auto [status, body] =
      collect(s.send("/v1/chat/completions", chat_with_image("image/png", random_png(20, 14, 2))));
  CHECK(status == 503);  // kOutOfMemory
  CHECK_THAT(body, Catch::Contains("gate: encode failed on purpose"));
  std::string streamed = chat_with_image("image/png", random_png(20, 14, 3));
  streamed.insert(1, R"("stream":true,)");
  auto [s2, body2] = collect(s.send("/v1/chat/completions", streamed));
  CHECK(s2 == 200);
  CHECK_THAT(body2, Catch::Contains("\"role\":\"assistant\"") &&
                        Catch::Contains("gate: encode failed on purpose"));
}

TEST_CASE("shutdown abandons queued image requests and refuses new ones", "[server]") {
  VisionServer s(/*gated=*/true);
  HttpResponse first =
      s.send("/v1/chat/completions", chat_with_image("image/png", random_png(20, 14, 4)));
  REQUIRE(s.gate->wait_for_encode());
  HttpResponse second =
      s.send("/v1/chat/completions", chat_with_image("image/png", random_png(20, 14, 5)));
  s.api->begin_shutdown();
  auto [st2, body2] = collect(std::move(second));  // abandoned in the queue
  CHECK(st2 == 503);
  CHECK_THAT(body2, Catch::Contains("shutting down"));
  s.gate->open();
  auto [st1, body1] = collect(std::move(first));  // encoded, then the engine is gone
  CHECK(st1 == 503);
  auto [st3, body3] =
      collect(s.send("/v1/chat/completions", chat_with_image("image/png", random_png(20, 14, 6))));
  CHECK(st3 == 503);
}

TEST_CASE("an image resent in the next turn is not encoded again", "[server]") {
  for (int64_t cache : {int64_t{256} << 20, int64_t{0}}) {
    INFO("image cache bytes " << cache);
    VisionServer s(/*gated=*/true, cache);
    s.gate->open();
    const std::string a = random_png(20, 14, 7), b = random_png(20, 14, 8);
    auto [st1, body1] = collect(s.send("/v1/chat/completions", chat_with_image("image/png", a)));
    auto [st2, body2] = collect(s.send("/v1/chat/completions", chat_with_image("image/png", a)));
    auto [st3, body3] = collect(s.send("/v1/chat/completions", chat_with_image("image/png", b)));
    CHECK(st1 == 200);
    CHECK(st2 == 200);
    CHECK(st3 == 200);
    CHECK(parse(body1).text == parse(body2).text);  // the cached embedding gives the same answer
    CHECK(s.gate->encodes() == (cache > 0 ? 2 : 3));
    CHECK(s.api->image_cache().hits() == (cache > 0 ? 1 : 0));
  }
}

std::string image_part(const std::string& png) {
  return R"({"type":"image_url","image_url":{"url":"data:image/png;base64,)" + base64(png) +
         R"("}})";
}

// Two tool results, each with an image, in the order given; the assistant called c1 then c2, so
// the prompt renders c1's result (and image) first whatever the order here.
std::string chat_with_tool_images(const std::string& first_id, const std::string& first_png,
                                  const std::string& second_id, const std::string& second_png) {
  const auto tool = [](const std::string& id, const std::string& png) {
    return R"({"role":"tool","tool_call_id":")" + id +
           R"(","content":[{"type":"text","text":"shot"},)" + image_part(png) + "]}";
  };
  return R"({"model":"deepseek-v4.1-flash","max_tokens":8,"temperature":0,)"
         R"("tools":[{"type":"function","function":{"name":"shot","parameters":{"type":"object"}}}],)"
         R"("messages":[{"role":"user","content":"take two screenshots"},)"
         R"({"role":"assistant","content":null,"tool_calls":[)"
         R"({"id":"c1","type":"function","function":{"name":"shot","arguments":"{}"}},)"
         R"({"id":"c2","type":"function","function":{"name":"shot","arguments":"{}"}}]},)" +
         tool(first_id, first_png) + "," + tool(second_id, second_png) + "]}";
}

TEST_CASE("tool-result images bind to their results in the rendered order", "[server]") {
  VisionServer s;
  const std::string a = random_png(20, 14, 11), b = random_png(20, 14, 12);
  auto [st1, in_order] = s.post(chat_with_tool_images("c1", a, "c2", b));
  auto [st2, reversed] = s.post(chat_with_tool_images("c2", b, "c1", a));
  auto [st3, swapped] = s.post(chat_with_tool_images("c1", b, "c2", a));
  INFO(in_order << "\n" << reversed << "\n" << swapped);
  REQUIRE(st1 == 200);
  REQUIRE(st2 == 200);
  REQUIRE(st3 == 200);
  // Results sent c2-first render c1-first: a goes with c1 as in the first request.
  CHECK(parse(reversed).text == parse(in_order).text);
  CHECK(parse(swapped).text != parse(in_order).text);  // the test can tell the images apart
}

TEST_CASE("an image in a developer turn that drop_thinking removes is not a 500", "[server]") {
  VisionServer s;
  const std::string body =
      R"({"model":"deepseek-v4.1-flash","max_tokens":4,"temperature":0,"messages":[)"
      R"({"role":"user","content":"hi"},{"role":"assistant","content":"hello"},)"
      R"({"role":"developer","content":[{"type":"text","text":"see"},)" +
      image_part(random_png(20, 14, 13)) + R"(]},{"role":"user","content":"and now?"}]})";
  auto [status, reply] = s.post(body);
  INFO(reply);
  CHECK(status == 200);
}

TEST_CASE("a literal image placeholder in a tool schema is a 400, not a 500", "[server]") {
  VisionServer s;
  const std::string body =
      R"({"model":"deepseek-v4.1-flash","max_tokens":4,"messages":[)"
      R"({"role":"user","content":[{"type":"text","text":"x"},)" +
      image_part(random_png(20, 14, 14)) +
      R"(]}],"tools":[{"type":"function","function":{"name":"f","description":)"
      R"("<｜deepseek_image｜>","parameters":{"type":"object"}}}]})";
  auto [status, reply] = s.post(body);
  INFO(reply);
  CHECK(status == 400);
  CHECK_THAT(reply, Catch::Contains("2 image placeholders"));
}

}  // namespace
