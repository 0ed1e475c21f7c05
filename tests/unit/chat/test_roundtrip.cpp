// Round trip: render a generated assistant turn, parse the rendered text back, get the message
// again. Seeded generator: strings with quotes, backslashes, newlines, unicode, '<', marker-like
// text; numbers; nested JSON arguments. raw = render(context + [assistant]) − render(context), as
// the goldens were built (golden/chat/README.md).
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "chat/parsed_message.hpp"
#include "chat/prompt_renderer.hpp"
#include "core/json_writer.hpp"
#include "parse_check.hpp"

using namespace dsv41;
using namespace dsv41::chat;

namespace {

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  // Free text: the pieces below never form </think>, <think>, EOS or a DSML tag anchor, which
  // the format itself cannot carry inside reasoning or content.
  std::string text(size_t max_pieces) {
    static const std::vector<std::string> kPieces = {"a",
                                                     "Hello",
                                                     " ",
                                                     "  ",
                                                     "\n",
                                                     "\n\n",
                                                     "\t",
                                                     "\r\n",
                                                     "\"",
                                                     "'",
                                                     "\\",
                                                     "\\\"",
                                                     "{",
                                                     "}",
                                                     "[1, 2]",
                                                     "<",
                                                     ">",
                                                     "<<",
                                                     "</a>",
                                                     "<b>bold</b>",
                                                     "<think",
                                                     "think>",
                                                     "</thin",
                                                     "<｜User｜>",
                                                     "<｜Assistant｜>",
                                                     "<tool_result>",
                                                     "｜",
                                                     "<｜",
                                                     "<｜DSML",
                                                     "｜DSML",
                                                     "DSML｜ calls",
                                                     "é",
                                                     "会议",
                                                     "📅",
                                                     "Título",
                                                     "\x07",
                                                     "0",
                                                     "42",
                                                     "-3.5",
                                                     "null",
                                                     "true",
                                                     "x > y",
                                                     "a < b"};
    while (true) {
      std::string out;
      const size_t n = pick(max_pieces + 1);
      for (size_t i = 0; i < n; ++i) out += kPieces[pick(kPieces.size())];
      // Adjacent pieces can join into a marker ("<" + "think>"); draw again then.
      bool clean = true;
      for (std::string_view m : {"<think>", "</think>", "<｜DSML｜", "</｜DSML｜"})
        clean &= out.find(m) == std::string::npos;
      if (clean) return out;
    }
  }

  // A string argument value may also contain an invoke tag (the reference keeps it as text).
  std::string value_text() {
    std::string s = text(6);
    if (pick(8) == 0) s += "<｜DSML｜ invoke name=\"x\">";
    return s;
  }

  std::string json_value(int depth) {
    switch (pick(depth > 0 ? 8 : 6)) {
      case 0:
        return std::to_string(static_cast<int64_t>(rng_()) >> pick(60));
      case 1:
        return json::python_float(std::uniform_real_distribution<double>(-1e6, 1e6)(rng_) *
                                  std::pow(10.0, static_cast<double>(pick(40)) - 20.0));
      case 2:
        return pick(2) ? "true" : "false";
      case 3:
        return "null";
      case 4:
      case 5:
        return json::quote(value_text());
      case 6: {
        std::string out = "[";
        for (size_t i = 0, n = pick(4); i < n; ++i) out += (i ? ", " : "") + json_value(depth - 1);
        return out + "]";
      }
      default: {
        std::string out = "{";
        for (size_t i = 0, n = pick(4); i < n; ++i)
          out += (i ? ", " : "") + json::quote("k" + std::to_string(i) + text(2)) + ": " +
                 json_value(depth - 1);
        return out + "}";
      }
    }
  }

  std::string key(size_t i) {
    static const std::vector<std::string> kKeys = {"path", "名前", "clé", "a b", "x-y", "n_1"};
    return kKeys[pick(kKeys.size())] + std::to_string(i);
  }

  ChatMessage assistant(bool thinking) {
    ChatMessage m;
    m.role = Role::kAssistant;
    m.text = text(8);
    if (thinking) m.reasoning_content = text(8);
    for (size_t c = 0, n = pick(4); c < n; ++c) {
      std::string args = "{";
      for (size_t i = 0, k = pick(5); i < k; ++i)
        args += (i ? ", " : "") + json::quote(key(i)) + ": " + json_value(2);
      args += "}";
      static const std::vector<std::string> kNames = {"get_weather", "web.search", "read-file", "f",
                                                      "工具"};
      m.tool_calls.push_back({"id" + std::to_string(c), kNames[pick(kNames.size())], args});
    }
    return m;
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace

TEST_CASE("chat round trip: render an assistant turn, parse it back", "[unit][chat]") {
  Generator gen(20261202);
  ChatMessage system;
  system.role = Role::kSystem;
  system.text = "You are an agent.";
  ChatMessage user;
  user.role = Role::kUser;
  user.text = "Do the task.";
  for (int n = 0; n < 600; ++n) {
    const bool thinking = n % 3 != 0;
    const EncoderOptions options{thinking, 75, true};
    const ChatMessage message = gen.assistant(thinking);
    const std::string context = render_messages({system, user}, options).text;
    const std::string full = render_messages({system, user, message}, options).text;
    REQUIRE(full.rfind(context, 0) == 0);
    const std::string raw = full.substr(context.size());
    INFO("message " << n << " raw: " << raw);
    for (int mode = 0; mode < 2; ++mode) {
      const ParsedMessage got =
          mode == 0 ? parse_completion(raw, {thinking, 3})
                    : test::parse_in_chunks(raw, test::code_point_cuts(raw), thinking);
      CHECK(got.warnings.empty());
      CHECK(got.reasoning_content == message.reasoning_content.value_or(""));
      CHECK(got.content == *message.text);
      REQUIRE(got.tool_calls.size() == message.tool_calls.size());
      for (size_t i = 0; i < got.tool_calls.size(); ++i) {
        CHECK(got.tool_calls[i].name == message.tool_calls[i].name);
        CHECK(test::normal_json(got.tool_calls[i].arguments_json) ==
              test::normal_json(message.tool_calls[i].arguments_json));
      }
    }
  }
}
