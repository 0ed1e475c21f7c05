// [unit] ToolCallGrammar / ToolCallConstraint: valid prefixes accepted, invalid rejected, a
// completion always reachable, and every completion parses (chat::parse_completion) as one call
// of an allowed name with JSON-object arguments.
#include <simdjson.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <string>

#include "chat/parsed_message.hpp"
#include "sampling/tool_call_constraint.hpp"
#include "sampling/tool_call_grammar.hpp"

using dsv41::sampling::TokenVocabulary;
using dsv41::sampling::ToolCallConstraint;
using dsv41::sampling::ToolCallGrammar;
using dsv41::sampling::ToolCallGrammarSpec;

namespace {

const std::string kOpen = "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"";
const std::string kEnd = "</｜DSML｜ invoke>\n</｜DSML｜ calls>";

ToolCallGrammarSpec spec(std::vector<std::string> names, bool think = false) {
  ToolCallGrammarSpec s;
  s.names = std::move(names);
  s.close_think = think;
  return s;
}

std::string param(const std::string& key, bool is_string, const std::string& value) {
  return "<｜DSML｜ parameter name=\"" + key + "\" string=\"" + (is_string ? "true" : "false") +
         "\">" + value + "</｜DSML｜ parameter>\n";
}

// Checks that `text` parses as exactly one call named `name` with JSON-object arguments.
void check_parses(const std::string& text, const std::vector<std::string>& names) {
  INFO("completion: " << text);
  dsv41::chat::ParsedMessage m = dsv41::chat::parse_completion(text, {.thinking = false});
  REQUIRE(m.tool_calls.size() == 1);
  CHECK(std::find(names.begin(), names.end(), m.tool_calls[0].name) != names.end());
  INFO("arguments: " << m.tool_calls[0].arguments_json);
  simdjson::dom::parser parser;
  simdjson::dom::element args;
  REQUIRE(!parser.parse(m.tool_calls[0].arguments_json).get(args));
  CHECK(args.type() == simdjson::dom::element_type::OBJECT);
  CHECK(m.warnings.empty());
}

}  // namespace

TEST_CASE("tool-call grammar accepts the writer's format", "[unit]") {
  const std::vector<std::string> names = {"get_weather", "get_time"};
  const std::string no_params = kOpen + "get_time\">\n\n" + kEnd;
  const std::string two = kOpen + "get_weather\">\n" + param("city", true, "Paris, FR") +
                          param("days", false, "-3.25") + kEnd;
  const std::string words = kOpen + "get_weather\">\n" + param("a", false, "true") +
                            param("b", false, "null") + param("c", false, "0") + kEnd;
  for (const std::string& text : {no_params, two, words}) {
    ToolCallGrammar g(spec(names));
    INFO(text);
    REQUIRE(g.feed(text));
    CHECK(g.complete());
    check_parses(text, names);
  }
  ToolCallGrammar think(spec(names, true));
  CHECK(think.forced() == "</think>" + kOpen);
  REQUIRE(think.feed("</think>" + kOpen));
  CHECK(think.forced() == "get_");  // the names' common prefix
  CHECK(think.feed(no_params.substr(kOpen.size())));
  CHECK(think.complete());
}

TEST_CASE("tool-call grammar rejects what the parser would not take", "[unit]") {
  const std::vector<std::string> names = {"get_weather"};
  auto rejects = [&](const std::string& text) {
    ToolCallGrammar g(spec(names));
    INFO("text: " << text);
    CHECK_FALSE(g.feed(text));
  };
  rejects("hello");
  rejects(kOpen + "get_time\"");                                      // undeclared name
  rejects(kOpen + "get_weather\">\n<｜DSML｜ parameter name=\"a b");  // bad key byte
  rejects(kOpen + "get_weather\">\n" + param("n", false, "01"));      // leading zero
  rejects(kOpen + "get_weather\">\n" + param("n", false, "1."));      // no fraction digit
  rejects(kOpen + "get_weather\">\n" + param("n", false, "tru"));     // broken literal
  rejects(kOpen + "get_weather\">\n" + param("s", true, std::string(49, 'x')));  // too long
  std::string five = kOpen + "get_weather\">\n";
  for (int i = 0; i < 5; ++i) five += param("k", false, "1");
  rejects(five);  // more than max_params
  ToolCallGrammar done(spec(names));
  REQUIRE(done.feed(kOpen + "get_weather\">\n\n" + kEnd));
  CHECK_FALSE(done.feed('\n'));  // nothing after the call
  ToolCallGrammar prefix(spec(names));
  CHECK(prefix.feed(kOpen + "get_wea"));  // a valid prefix is accepted, not complete
  CHECK_FALSE(prefix.complete());
  CHECK(prefix.forced() == "ther\">\n");
}

TEST_CASE("tool-call grammar rejects names it cannot force", "[unit]") {
  CHECK_THROWS(ToolCallGrammar(spec({})));
  CHECK_THROWS(ToolCallGrammar(spec({"a\"b"})));
  CHECK_THROWS(
      ToolCallGrammar(spec(std::vector<std::string>(ToolCallGrammar::kMaxNames + 1, "f"))));
}

TEST_CASE("every random walk of the tool-call grammar completes and parses", "[unit]") {
  const std::vector<std::string> names = {"read", "read_file", "write"};
  std::mt19937 rng(7);
  for (int walk = 0; walk < 300; ++walk) {
    ToolCallGrammar g(spec(names, false));
    std::string text;
    int steps = 0;
    while (!g.complete()) {
      REQUIRE(++steps < 5000);
      const std::string f = g.forced();
      if (!f.empty()) {
        REQUIRE(g.feed(f));
        text += f;
        continue;
      }
      std::vector<uint8_t> ok;
      for (int c = 0; c < 256; ++c) {
        ToolCallGrammar copy = g;
        if (copy.feed(static_cast<uint8_t>(c))) ok.push_back(static_cast<uint8_t>(c));
      }
      INFO("stuck after: " << text);
      REQUIRE(!ok.empty());
      const uint8_t c = ok[rng() % ok.size()];
      REQUIRE(g.feed(c));
      text += static_cast<char>(c);
    }
    check_parses(text, names);
  }
}

TEST_CASE("tool-call constraint masks a toy vocabulary into a parseable call", "[unit]") {
  // Vocabulary: every printable ASCII byte, a few words, "｜", and an EOS at the end.
  auto vocab = std::make_shared<TokenVocabulary>();
  for (int c = 0x20; c < 0x7f; ++c) vocab->bytes.emplace_back(1, static_cast<char>(c));
  vocab->bytes.emplace_back("\n");
  for (const char* w : {"｜", "DSML", "parameter", "invoke", "calls", "\">", "true", "name=\"",
                        "get_weather", "\" string=\"", "12", "city"})
    vocab->bytes.emplace_back(w);
  vocab->bytes.emplace_back("<｜end▁of▁sentence｜>");
  vocab->end_of_turn = static_cast<int32_t>(vocab->bytes.size() - 1);
  const auto* table = &vocab->bytes;
  vocab->tokenize = [table](std::string_view s) {  // greedy longest match
    std::vector<int32_t> ids;
    while (!s.empty()) {
      int32_t best = -1;
      size_t len = 0;
      for (size_t i = 0; i + 1 < table->size(); ++i) {
        const std::string& t = (*table)[i];
        if (t.size() > len && s.substr(0, t.size()) == t)
          best = static_cast<int32_t>(i), len = t.size();
      }
      REQUIRE(best >= 0);
      ids.push_back(best);
      s.remove_prefix(len);
    }
    return ids;
  };
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> logit(-5.0f, 5.0f);
  for (int run = 0; run < 40; ++run) {
    ToolCallConstraint c(vocab, spec({"get_weather", "get_time"}, run % 2 == 1));
    std::string text;
    for (int step = 0;; ++step) {
      REQUIRE(step < 3000);
      std::vector<float> logits(vocab->bytes.size());
      for (float& v : logits) v = logit(rng);
      c.mask(logits);
      const int32_t id =
          static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      REQUIRE(logits[id] > -1e30f);
      c.accept(id);
      if (id == vocab->end_of_turn) break;
      text += vocab->bytes[id];
    }
    CHECK(c.grammar().complete());
    if (run % 2 == 1) {
      REQUIRE(text.rfind("</think>", 0) == 0);
      text.erase(0, 8);
    }
    check_parses(text, {"get_weather", "get_time"});
  }
}
