// Handler-level tests of dsv41-server without sockets: Api::handle over a ScriptedBackend, so that
// the exact model output (reasoning, DSML tool calls) is known; plus config, auth and image-header
// units. The HTTP black-box tests against the real engine are in test_http.py.
#include <fmt/format.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <string>

#include "api/api.hpp"
#include "api/api_errors.hpp"
#include "api/image_input.hpp"
#include "auth/api_key.hpp"
#include "channel_collect.hpp"
#include "config.hpp"
#include "scripted_backend.hpp"

using namespace dsv41;
using namespace dsv41::server;
using dsv41::server::test::ScriptedBackend;
using dsv41::server::test::split_utf8;

namespace {

const std::string kToolScript =
    "hmm, weather</think>Let me check.\n\n<｜DSML｜ calls>\n"
    "<｜DSML｜ invoke name=\"get_weather\">\n"
    "<｜DSML｜ parameter name=\"city\" string=\"true\">Paris \"south\"</｜DSML｜ parameter>\n"
    "<｜DSML｜ parameter name=\"days\" string=\"false\">3</｜DSML｜ parameter>\n"
    "</｜DSML｜ invoke>\n"
    "<｜DSML｜ invoke name=\"get_time\">\n"
    "</｜DSML｜ invoke>\n"
    "</｜DSML｜ calls>";

const std::string kTools =
    R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
    R"("properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}},)"
    R"({"type":"function","function":{"name":"get_time","parameters":{"type":"object"}}}])";

HttpRequest post(const std::string& path, const std::string& body) {
  HttpRequest r;
  r.method = "POST";
  r.path = path;
  r.body = body;
  return r;
}

std::pair<int, std::string> collect(HttpResponse res) {
  return dsv41::server::test::collect(std::move(res), std::chrono::seconds(10));
}

std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < body.size()) {
    const size_t end = body.find("\n\n", i);
    REQUIRE(end != std::string::npos);
    const std::string event = body.substr(i, end - i);
    REQUIRE(event.rfind("data: ", 0) == 0);
    out.push_back(event.substr(6));
    i = end + 2;
  }
  return out;
}

struct Fixture {
  explicit Fixture(std::vector<std::string> pieces,
                   std::string reasoning_field = "reasoning_content")
      : backend(std::make_shared<ScriptedBackend>(std::move(pieces))) {
    ServerConfig c;
    c.model_dir = "scripted";
    c.reasoning_field = std::move(reasoning_field);
    api.emplace(c, std::nullopt);
    api->set_backend(backend);
  }
  std::shared_ptr<ScriptedBackend> backend;
  std::optional<Api> api;
};

std::string chat_body(const std::string& extra) {
  return R"({"model":"deepseek-v4.1-flash","messages":[{"role":"user","content":"weather?"}])" +
         extra + "}";
}

}  // namespace

TEST_CASE("stream: tool-call deltas carry id/type/name only on the first fragment", "[server]") {
  Fixture f(split_utf8(kToolScript, 5));
  auto [status, body] = collect(f.api->handle(
      post("/v1/chat/completions",
           chat_body(R"(,"stream":true,"stream_options":{"include_usage":true},)" + kTools))));
  REQUIRE(status == 200);
  const std::vector<std::string> events = sse_payloads(body);
  REQUIRE(events.back() == "[DONE]");
  simdjson::dom::parser parser;
  std::string reasoning, content;
  std::map<int64_t, std::string> args;
  std::map<int64_t, std::string> names;
  std::string finish;
  bool saw_usage = false;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    simdjson::dom::element e = parser.parse(events[i]);
    simdjson::dom::array choices = e["choices"];
    if (choices.size() == 0) {
      saw_usage = true;
      CHECK(int64_t(e["usage"]["completion_tokens"]) > 0);
      continue;
    }
    simdjson::dom::element choice = choices.at(0);
    simdjson::dom::element delta = choice["delta"];
    if (!choice["finish_reason"].is_null())
      finish = std::string(std::string_view(choice["finish_reason"]));
    std::string_view text;
    if (!delta["reasoning_content"].get(text)) reasoning += text;
    if (!delta["content"].get(text)) content += text;
    simdjson::dom::array calls;
    if (delta["tool_calls"].get(calls)) continue;
    for (simdjson::dom::element call : calls) {
      const int64_t index = call["index"];
      simdjson::dom::element fn = call["function"];
      if (!names.count(index)) {
        // First fragment: id, type, name all present as strings.
        CHECK(std::string_view(call["id"]).rfind("call_", 0) == 0);
        CHECK(std::string_view(call["type"]) == "function");
        names[index] = std::string(std::string_view(fn["name"]));
        CHECK(std::string_view(fn["arguments"]).empty());
      } else {
        // Continuations: the keys are absent, never null.
        simdjson::dom::element ignored;
        CHECK(call["id"].get(ignored) == simdjson::NO_SUCH_FIELD);
        CHECK(call["type"].get(ignored) == simdjson::NO_SUCH_FIELD);
        CHECK(fn["name"].get(ignored) == simdjson::NO_SUCH_FIELD);
        args[index] += std::string_view(fn["arguments"]);
      }
    }
  }
  CHECK(saw_usage);
  CHECK(finish == "tool_calls");
  CHECK(reasoning == "hmm, weather");
  CHECK(content.rfind("Let me check.", 0) == 0);
  REQUIRE(names.size() == 2);
  CHECK(names[0] == "get_weather");
  CHECK(names[1] == "get_time");
  simdjson::dom::parser p2;
  simdjson::dom::element a0 = p2.parse(args[0]);
  CHECK(std::string_view(a0["city"]) == "Paris \"south\"");
  CHECK(int64_t(a0["days"]) == 3);
  CHECK(args[1] == "{}");
}

TEST_CASE("stream: continuous usage counts the prompt from the role chunk on", "[server]") {
  Fixture f(split_utf8("Hello there.", 4));
  auto [status, body] = collect(f.api->handle(post(
      "/v1/chat/completions", chat_body(R"(,"stream":true,"stream_options":{"include_usage":true,)"
                                        R"("continuous_usage_stats":true})"))));
  REQUIRE(status == 200);
  const std::vector<std::string> events = sse_payloads(body);
  REQUIRE(events.size() >= 3);
  simdjson::dom::parser parser;
  int64_t prompt = -1, last_completion = -1;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    simdjson::dom::element e = parser.parse(events[i]);
    const int64_t p = e["usage"]["prompt_tokens"], c = e["usage"]["completion_tokens"];
    INFO("event " << i << ": " << events[i]);
    if (i == 0) {
      CHECK(std::string_view(e["choices"].at(0)["delta"]["role"]) == "assistant");
      CHECK(p > 0);
      CHECK(c == 0);
      prompt = p;
    }
    CHECK(p == prompt);  // the same prompt count in every chunk
    CHECK(c >= last_completion);
    last_completion = c;
  }
  CHECK(last_completion > 0);
}

TEST_CASE("non-stream: tool calls, null content rules, reasoning field switch", "[server]") {
  Fixture f(split_utf8(kToolScript, 7), "reasoning");
  auto [status, body] =
      collect(f.api->handle(post("/v1/chat/completions", chat_body("," + kTools))));
  REQUIRE(status == 200);
  simdjson::dom::parser parser;
  simdjson::dom::element r = parser.parse(body);
  simdjson::dom::element choice = r["choices"].at(0);
  CHECK(std::string_view(choice["finish_reason"]) == "tool_calls");
  simdjson::dom::element msg = choice["message"];
  CHECK(std::string_view(msg["content"]) == "Let me check.");
  CHECK(std::string_view(msg["reasoning"]) == "hmm, weather");
  simdjson::dom::element ignored;
  CHECK(msg["reasoning_content"].get(ignored) == simdjson::NO_SUCH_FIELD);
  simdjson::dom::array calls = msg["tool_calls"];
  REQUIRE(calls.size() == 2);
  simdjson::dom::parser p2;
  simdjson::dom::element args =
      p2.parse(std::string(std::string_view(calls.at(0)["function"]["arguments"])));
  CHECK(int64_t(args["days"]) == 3);
  CHECK(std::string_view(calls.at(1)["function"]["name"]) == "get_time");
}

TEST_CASE("parallel_tool_calls false keeps only the first call", "[server]") {
  // kToolScript writes two calls; the reply must carry get_weather alone, in both modes.
  for (const bool stream : {false, true}) {
    Fixture f(split_utf8(kToolScript, 7));
    const std::string fields =
        fmt::format(R"(,"parallel_tool_calls":false,"stream":{},)", stream ? "true" : "false");
    auto [status, body] =
        collect(f.api->handle(post("/v1/chat/completions", chat_body(fields + kTools))));
    REQUIRE(status == 200);
    INFO(body);
    CHECK(body.find("get_weather") != std::string::npos);
    CHECK(body.find("get_time") == std::string::npos);
    CHECK(body.find(R"("index":1)") == std::string::npos);
    CHECK(body.find(R"("finish_reason":"tool_calls")") != std::string::npos);
    if (!stream) {
      simdjson::dom::parser parser;
      simdjson::dom::element r = parser.parse(body);
      CHECK(simdjson::dom::array(r["choices"].at(0)["message"]["tool_calls"]).size() == 1);
    }
  }
  Fixture f(split_utf8(kToolScript, 7));
  auto [status, body] = collect(f.api->handle(
      post("/v1/chat/completions", chat_body(R"(,"parallel_tool_calls":"no",)" + kTools))));
  CHECK(status == 400);
  CHECK(body.find("parallel_tool_calls: expected a boolean") != std::string::npos);
}

TEST_CASE("request fields reach the engine, max_tokens clamps to the context", "[server]") {
  Fixture f({"a", "b", "c"});
  auto [status, body] = collect(f.api->handle(post(
      "/v1/chat/completions",
      chat_body(R"(,"temperature":0.5,"top_p":0.9,"top_k":7,"min_p":0.1,"seed":42,)"
                R"("stop":"END","stop_token_ids":[3],"ignore_eos":true,"logit_bias":{"65":-100},)"
                R"("presence_penalty":0.5,"frequency_penalty":0.25,"repetition_penalty":1.1,)"
                R"("max_tokens":999999)"))));
  REQUIRE(status == 200);
  GenerationRequest req = f.backend->last_request();
  CHECK(req.sampling.temperature == Approx(0.5));
  CHECK(req.sampling.top_p == Approx(0.9));
  CHECK(req.sampling.top_k == 7);
  CHECK(req.sampling.min_p == Approx(0.1));
  CHECK(req.sampling.seed.value() == 42);
  CHECK(req.sampling.logit_bias.at(65) == Approx(-100));
  CHECK(req.sampling.presence_penalty == Approx(0.5));
  CHECK(req.sampling.frequency_penalty == Approx(0.25));
  CHECK(req.sampling.repetition_penalty == Approx(1.1));
  CHECK(req.stop.stop == std::vector<std::string>{"END"});
  CHECK(req.stop.stop_token_ids == std::vector<int32_t>{3});
  CHECK(req.stop.ignore_eos);
  CHECK(req.stop.max_tokens == 4096 - static_cast<int64_t>(req.prompt.size()));
}

TEST_CASE("a leading developer message is the system prompt", "[server]") {
  // Pi sends its system prompt as role developer when reasoning is on; rendered as the release
  // encoder does (a user turn, dropped with the thinking history) it was lost.
  const auto prompt_of = [](const std::string& messages) {
    Fixture f({"a"});
    auto [status, body] = collect(f.api->handle(
        post("/v1/chat/completions",
             R"({"model":"deepseek-v4.1-flash","max_tokens":1,"messages":)" + messages + "}")));
    INFO(body);
    REQUIRE(status == 200);
    return f.backend->last_request().prompt;
  };
  const std::string rules = R"("content":"Always answer in French.")";
  const std::string user = R"({"role":"user","content":"hi"})";
  const auto as_system = prompt_of(R"([{"role":"system",)" + rules + "}," + user + "]");
  const auto as_developer = prompt_of(R"([{"role":"developer",)" + rules + "}," + user + "]");
  const auto without = prompt_of("[" + user + "]");
  CHECK(as_developer == as_system);
  CHECK(as_developer != without);
}

TEST_CASE("max_tokens stop gives finish_reason length", "[server]") {
  Fixture f({"a", "b", "c", "d"});
  auto [status, body] = collect(f.api->handle(
      post("/v1/chat/completions", chat_body(R"(,"max_tokens":2,"reasoning_effort":"none")"))));
  REQUIRE(status == 200);
  simdjson::dom::parser parser;
  simdjson::dom::element r = parser.parse(body);
  CHECK(std::string_view(r["choices"].at(0)["finish_reason"]) == "length");
  CHECK(std::string_view(r["choices"].at(0)["message"]["content"]) == "ab");
}

TEST_CASE("a tool call cut by max_tokens or a stop finishes with length or stop, not tool_calls",
          "[server]") {
  // Pieces of one call, ended inside its parameter value by max_tokens ("length") or by the
  // script running out as a stop string or stop token would end it (FinishReason::kStop: "stop").
  // Clients execute tool_calls, so a call whose arguments the parser had to close must not be
  // reported as one.
  const std::string call =
      "Let me check.\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_weather\">\n"
      "<｜DSML｜ parameter name=\"city\" string=\"true\">Paris is a long city name";
  const std::vector<std::string> pieces = split_utf8(call, 6);
  for (const bool by_length : {true, false})
    for (const bool stream : {false, true}) {
      Fixture f(pieces);
      const std::string limit =
          by_length ? fmt::format(R"("max_tokens":{},)", pieces.size() - 2) : "";
      const std::string fields = fmt::format(R"(,{}"reasoning_effort":"none","stream":{},)", limit,
                                             stream ? "true" : "false");
      auto [status, body] =
          collect(f.api->handle(post("/v1/chat/completions", chat_body(fields + kTools))));
      REQUIRE(status == 200);
      INFO(body);
      CHECK(body.find(by_length ? R"("finish_reason":"length")" : R"("finish_reason":"stop")") !=
            std::string::npos);
      CHECK(body.find(R"("finish_reason":"tool_calls")") == std::string::npos);
    }
  // The whole call within max_tokens is still tool_calls.
  Fixture f(split_utf8(kToolScript, 5));
  auto [status, body] = collect(
      f.api->handle(post("/v1/chat/completions", chat_body(R"(,"max_tokens":1000,)" + kTools))));
  REQUIRE(status == 200);
  CHECK(body.find(R"("finish_reason":"tool_calls")") != std::string::npos);
}

TEST_CASE("/metrics escapes the model name label", "[server]") {
  // A served name with a backslash, a quote and a newline must not break the exposition format.
  ServerConfig c;
  c.model_dir = "scripted";
  c.served_model_name = "acme\\team \"v4\"\nx";
  Api api(c, std::nullopt);
  api.set_backend(std::make_shared<ScriptedBackend>(std::vector<std::string>{"a"}));
  HttpRequest r;
  r.method = "GET";
  r.path = "/metrics";
  auto [status, body] = collect(api.handle(r));
  REQUIRE(status == 200);
  INFO(body);
  CHECK(body.find(R"(model_name="acme\\team \"v4\"\nx",engine="0")") != std::string::npos);
  CHECK(body.find("\"v4\"\"") == std::string::npos);
}

TEST_CASE("no backend yet: health and generation answer 503", "[server]") {
  ServerConfig c;
  Api api(c, ApiKey("k"));
  HttpRequest h;
  h.method = "GET";
  h.path = "/health";
  CHECK(api.handle(h).status == 503);
  HttpRequest p = post("/v1/chat/completions", chat_body(""));
  p.headers["authorization"] = "Bearer k";
  HttpResponse r = api.handle(p);
  CHECK(r.status == 503);
  CHECK(r.headers.at(0).first == "Retry-After");
}

TEST_CASE("error JSON shape and status mapping", "[server]") {
  simdjson::dom::parser parser;
  simdjson::dom::element e = parser.parse(error_json(400, "n: only n = 1", "n"));
  CHECK(std::string_view(e["error"]["message"]) == "n: only n = 1");
  CHECK(std::string_view(e["error"]["type"]) == "invalid_request_error");
  CHECK(std::string_view(e["error"]["param"]) == "n");
  CHECK(int64_t(e["error"]["code"]) == 400);
  CHECK(http_status_for(ErrorCode::kContextOverflow) == 400);
  CHECK(http_status_for(ErrorCode::kOutOfMemory) == 503);
  CHECK(http_status_for(ErrorCode::kInternal) == 500);
  CHECK(param_of("messages[2].content: expected a string") == "messages[2].content");
  CHECK(param_of("the prompt: has spaces").empty());
}

TEST_CASE("api key: bearer check, constant-time compare, generated file", "[server]") {
  ApiKey key("secret-key");
  CHECK(key.check("Bearer secret-key"));
  CHECK(key.check("bearer secret-key"));
  CHECK_FALSE(key.check("Bearer secret-ke"));
  CHECK_FALSE(key.check("Bearer secret-keyy"));
  CHECK_FALSE(key.check("secret-key"));
  CHECK_FALSE(key.check(""));
  CHECK(constant_time_equal("abc", "abc"));
  CHECK_FALSE(constant_time_equal("abc", "abd"));
  CHECK_FALSE(constant_time_equal("", "a"));
  CHECK_FALSE(constant_time_equal("ab", "abab"));

  const std::string path = "/tmp/dsv41-test-key-" + std::to_string(::getpid());
  ::unlink(path.c_str());
  Result<ApiKey> made = ApiKey::load_or_create(path);
  REQUIRE(made.is_ok());
  CHECK(made->key().size() == 64);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  Result<ApiKey> again = ApiKey::load_or_create(path);
  REQUIRE(again.is_ok());
  CHECK(again->key() == made->key());
  ::chmod(path.c_str(), 0644);
  Result<ApiKey> loose = ApiKey::load_or_create(path);
  REQUIRE_FALSE(loose.is_ok());
  CHECK(loose.status().message().find("chmod 600") != std::string::npos);
  ::unlink(path.c_str());
}

TEST_CASE("config: flags override env defaults, errors name the flag", "[server]") {
  const char* argv1[] = {"dsv41-server",
                         "--model",
                         "m",
                         "--port",
                         "9000",
                         "--max-sequences=4",
                         "--metrics-require-key",
                         "--reasoning-field",
                         "reasoning"};
  Result<ParsedArgs> a = parse_args(9, const_cast<char**>(argv1));
  REQUIRE(a.is_ok());
  CHECK(a->config.port == 9000);
  CHECK(a->config.engine.max_sequences == 4);
  CHECK(a->config.metrics_require_key);
  CHECK(a->config.reasoning_field == "reasoning");
  CHECK(a->config.served_model_name == "deepseek-v4.1-flash");
  CHECK(a->config.validate().is_ok());

  const char* argv2[] = {"dsv41-server", "--bogus", "1"};
  Result<ParsedArgs> b = parse_args(3, const_cast<char**>(argv2));
  REQUIRE_FALSE(b.is_ok());
  CHECK(b.status().message().find("--bogus") != std::string::npos);

  const char* argv3[] = {"dsv41-server", "--model", "m", "--port", "70000"};
  Result<ParsedArgs> c = parse_args(5, const_cast<char**>(argv3));
  REQUIRE(c.is_ok());
  Status v = c->config.validate();
  REQUIRE_FALSE(v.is_ok());
  CHECK(v.message().find("--port (DSV41_PORT)") != std::string::npos);

  const char* argv_ic[] = {"dsv41-server", "--model", "m", "--image-cache-bytes", "-1"};
  Result<ParsedArgs> ic = parse_args(5, const_cast<char**>(argv_ic));
  REQUIRE(ic.is_ok());
  Status vic = ic->config.validate();
  REQUIRE_FALSE(vic.is_ok());
  CHECK(vic.message().find("--image-cache-bytes (DSV41_IMAGE_CACHE_BYTES) = -1 must be >= 0") !=
        std::string::npos);

  const char* argv5[] = {"dsv41-server", "--model", "m", "--backend", "cuda"};
  Result<ParsedArgs> d = parse_args(5, const_cast<char**>(argv5));
  REQUIRE(d.is_ok());
  CHECK(d->config.backend == "cuda");
  CHECK(d->config.validate().is_ok());
  const char* argv6[] = {"dsv41-server", "--model", "m", "--backend", "gpu"};
  Result<ParsedArgs> e = parse_args(5, const_cast<char**>(argv6));
  REQUIRE(e.is_ok());
  Status ve = e->config.validate();
  REQUIRE_FALSE(ve.is_ok());
  CHECK(ve.message().find("--backend (DSV41_BACKEND) = \"gpu\" must be cpu or cuda") !=
        std::string::npos);

  const char* argv7[] = {"dsv41-server", "--model", "m", "--speculative-tokens", "5"};
  Result<ParsedArgs> f = parse_args(5, const_cast<char**>(argv7));
  REQUIRE(f.is_ok());
  CHECK(f->config.engine.speculative_tokens == 5);
  CHECK(f->config.validate().is_ok());
  const char* argv8[] = {"dsv41-server", "--model", "m", "--speculative-tokens", "16"};
  Result<ParsedArgs> g = parse_args(5, const_cast<char**>(argv8));
  REQUIRE(g.is_ok());
  Status vg = g->config.validate();
  CHECK(vg.message().find("EngineParams.speculative_tokens = 16 must be in [0, 15]") !=
        std::string::npos);
  CHECK(vg.message().find("--speculative-tokens") != std::string::npos);
  const char* argv9[] = {"dsv41-server",
                         "--model",
                         "m",
                         "--speculative-tokens",
                         "5",
                         "--speculative-method",
                         "dspark",
                         "--speculative-confidence",
                         "0.5"};
  Result<ParsedArgs> h = parse_args(9, const_cast<char**>(argv9));
  REQUIRE(h.is_ok());
  CHECK(h->config.engine.speculative_method == "dspark");
  CHECK(h->config.engine.speculative_confidence == 0.5f);
  CHECK(h->config.dspark());
  CHECK(h->config.validate().is_ok());
  const char* argv10[] = {"dsv41-server", "--model", "m", "--speculative-method", "eagle"};
  Result<ParsedArgs> k = parse_args(5, const_cast<char**>(argv10));
  REQUIRE(k.is_ok());
  CHECK_FALSE(k->config.dspark());
  CHECK(k->config.validate().message().find(
            "EngineParams.speculative_method = \"eagle\" must be \"ngram\" or \"dspark\"") !=
        std::string::npos);

  const char* argv4[] = {"dsv41-server", "--port", "eighty"};
  CHECK_FALSE(parse_args(3, const_cast<char**>(argv4)).is_ok());

  const std::string help = help_text();
  for (const char* env : {"DSV41_HOST", "DSV41_PORT", "DSV41_API_KEY_FILE", "DSV41_MAX_BODY_BYTES",
                          "DSV41_MAX_SEQUENCES", "DSV41_KV_BYTES", "DSV41_SERVED_MODEL_NAME"})
    CHECK(help.find(env) != std::string::npos);
}

TEST_CASE("image headers: format and size without decoding pixels", "[server]") {
  const std::string png = std::string("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\x01\x00\0\0\0\x80", 24);
  Result<ImageInfo> p = probe_image(png);
  REQUIRE(p.is_ok());
  CHECK((p->format == "png" && p->width == 256 && p->height == 128));
  const std::string gif = std::string("GIF89a\x0a\x00\x14\x00", 10);
  Result<ImageInfo> g = probe_image(gif);
  REQUIRE(g.is_ok());
  CHECK((g->width == 10 && g->height == 20));
  // JPEG: SOI, APP0 (length 4), SOF0 with height 0x0030, width 0x0040.
  const std::string jpg =
      std::string("\xFF\xD8\xFF\xE0\x00\x04\x00\x00\xFF\xC0\x00\x11\x08\x00\x30\x00\x40\x03", 18);
  Result<ImageInfo> j = probe_image(jpg);
  REQUIRE(j.is_ok());
  CHECK((j->format == "jpeg" && j->width == 64 && j->height == 48));
  // WebP VP8X: canvas 300x200 stored minus one, 24-bit little endian.
  std::string webp = std::string("RIFF\0\0\0\0WEBPVP8X", 16) + std::string(8, '\0') +
                     std::string("\x2B\x01\x00\xC7\x00\x00", 6);
  Result<ImageInfo> w = probe_image(webp);
  REQUIRE(w.is_ok());
  CHECK((w->width == 300 && w->height == 200));
  CHECK_FALSE(probe_image("BM not supported").is_ok());
  CHECK_FALSE(probe_image(png.substr(0, 20)).is_ok());

  CHECK(decode_base64("aGVsbG8=").value() == "hello");
  CHECK(decode_base64("aGVsbG8").value() == "hello");
  CHECK_FALSE(decode_base64("aGV$bG8=").is_ok());
  CHECK(check_image_url("https://x/y.png", 100).status().code() == ErrorCode::kUnsupported);
  CHECK_FALSE(check_image_url("data:image/png,raw", 100).is_ok());
}
