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

struct VisionServer {
  VisionServer() {
    ModelParams p;
    p.model_dir = dsv41::test::make_tiny8_vision();
    p.threads = 2;
    p.backend = "cpu";
    Result<Model> m = Model::load(p);
    REQUIRE(m.is_ok());
    auto b = EngineBackend::create(std::move(m).value(), EngineParams{});
    REQUIRE(b.is_ok());
    backend = std::shared_ptr<EngineBackend>(std::move(b).value());
    ServerConfig c;
    c.model_dir = p.model_dir;
    api.emplace(c, std::nullopt);
    api->set_backend(backend);
  }
  std::pair<int, std::string> post(const std::string& body) {
    HttpRequest r;
    r.method = "POST";
    r.path = "/v1/chat/completions";
    r.body = body;
    return collect(api->handle(r));
  }
  std::shared_ptr<EngineBackend> backend;
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
  std::string gif = "GIF89a";
  gif += std::string("\x02\x00\x02\x00\x00\x00\x00", 7);
  expect("image/gif", gif, "GIF images are not decoded");
  std::string broken = random_png(20, 14, 3);
  broken.resize(broken.size() - 30);
  expect("image/png", broken, "image: PNG");
}

}  // namespace
