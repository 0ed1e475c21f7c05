// JsonGrammar (one JSON object, byte by byte) and JsonConstraint (the logits mask over a toy
// vocabulary): valid objects are accepted whole and at every split, invalid ones are rejected at
// the first bad byte with the state unchanged, depth and whitespace runs are bounded, and the
// constraint frees the reasoning, then forces an object and the end of turn.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "sampling/json_constraint.hpp"
#include "sampling/json_grammar.hpp"

using dsv41::sampling::JsonConstraint;
using dsv41::sampling::JsonGrammar;
using dsv41::sampling::TokenVocabulary;

namespace {

// Index of the first rejected byte, or -1 when all were taken; *done: complete() after them.
int first_rejected(const std::string& text, bool* done) {
  JsonGrammar g;
  for (size_t i = 0; i < text.size(); ++i) {
    const JsonGrammar before = g;
    if (!g.feed(static_cast<uint8_t>(text[i]))) {
      // The state is unchanged: the byte before still continues as it did.
      CHECK(before.next_bytes() == g.next_bytes());
      return static_cast<int>(i);
    }
  }
  *done = g.complete();
  return -1;
}

}  // namespace

TEST_CASE("json grammar: objects with every kind of value are accepted", "[unit][sampling]") {
  const std::vector<std::string> good = {
      "{}",
      " \n{ }",
      R"({"a":1})",
      R"({"a": -0.5e+10, "b": [1, 2.25, -3E2, 0], "c": {"d": [], "e": {}}})",
      R"({"s": "tab\t \"q\" \\ \/ \u00e9 \uD83D\uDE00", "t": true, "f": false, "n": null})",
      "{\"utf8\": \"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xED\x9F\xBF\xF4\x8F\xBF\xBF\"}",
      R"({"nested": [[[{"x": [null]}]]]})",
  };
  for (const std::string& text : good) {
    INFO(text);
    bool done = false;
    CHECK(first_rejected(text, &done) == -1);
    CHECK(done);
    // After the object nothing, not even whitespace, is taken (the end of turn follows).
    JsonGrammar g;
    REQUIRE(g.feed(text));
    CHECK_FALSE(g.feed(static_cast<uint8_t>(' ')));
    CHECK(g.next_bytes().none());
  }
}

TEST_CASE("json grammar: the first bad byte is rejected", "[unit][sampling]") {
  const std::vector<std::pair<std::string, int>> bad = {
      {"[]", 0},              // the top level is an object
      {"\"x\"", 0},           //
      {R"({"a" 1})", 5},      // missing ':'
      {R"({a: 1})", 1},       // unquoted key
      {R"({"a": 01})", 7},    // leading zero
      {R"({"a": 1.})", 8},    // digits after the dot
      {R"({"a": -})", 7},     //
      {R"({"a": tru})", 9},   //
      {R"({"a": 1,})", 8},    // trailing comma
      {R"({"a": [1,]})", 9},  //
      {R"({"a": "\x"})", 8},  // bad escape
      {R"({"a": "\u12g4"})", 11},
      {"{\"a\": \"\x01\"}", 7},  // a raw control character
      {R"({"a": 1}})", 8},       // after the object
      {R"({"a": 1])", 7},        // wrong close
      // Strings are UTF-8 (RFC 3629): a bad lead, an overlong form, a surrogate, past U+10FFFF,
      // a missing continuation.
      {"{\"a\": \"\xC0\xAF\"}", 7},
      {"{\"a\": \"\xE0\x80\x80\"}", 8},
      {"{\"a\": \"\xED\xA0\x80\"}", 8},
      {"{\"a\": \"\xF4\x90\x80\x80\"}", 8},
      {"{\"a\": \"\xC3\"}", 8},
  };
  for (const auto& [text, at] : bad) {
    INFO(text);
    bool done = false;
    CHECK(first_rejected(text, &done) == at);
  }
}

TEST_CASE("json grammar: surrogate escapes must pair", "[unit][sampling]") {
  bool done = false;
  CHECK(first_rejected(R"({"k": "\ud83d\ude00 \u00e9 \uD7FF \uE000"})", &done) == -1);
  CHECK(done);
  CHECK(first_rejected(R"({"k": "\udc00"})", &done) == 10);   // a lone low half
  CHECK(first_rejected(R"({"k": "\ud83dx"})", &done) == 13);  // a high half, then no escape
  CHECK(first_rejected(R"({"k": "\ud83d\n"})", &done) == 14);  // an escape other than \u
  CHECK(first_rejected(R"({"k": "\ud83d\u0041"})", &done) == 15);  // not a low half
  CHECK(first_rejected(R"({"k": "\ud83d\ud83d"})", &done) == 16);
  CHECK(first_rejected(R"({"k": "\ud83d"})", &done) == 13);   // the string ends unpaired
}

TEST_CASE("json grammar: depth and whitespace runs are bounded", "[unit][sampling]") {
  JsonGrammar g;
  REQUIRE(g.feed("{\"a\":"));
  for (int d = 1; d < JsonGrammar::kMaxDepth; ++d) REQUIRE(g.feed("["));
  CHECK_FALSE(g.feed(static_cast<uint8_t>('[')));  // depth kMaxDepth reached
  CHECK(g.feed("1"));
  JsonGrammar w;
  for (int i = 0; i < JsonGrammar::kMaxWhitespace; ++i) REQUIRE(w.feed(static_cast<uint8_t>(' ')));
  CHECK_FALSE(w.feed(static_cast<uint8_t>('\n')));
  CHECK(w.feed(static_cast<uint8_t>('{')));
  // Whitespace inside strings is content, not a run.
  CHECK(w.feed("\"" + std::string(100, ' ') + "\""));
}

TEST_CASE("json constraint: free reasoning, then an object, then the end of turn",
          "[unit][sampling]") {
  auto v = std::make_shared<TokenVocabulary>();
  // 0 eos, 1 </think>, 2 "{", 3 "\"k\"", 4 ":", 5 " 1", 6 "}", 7 "hello", 8 "<｜DSML｜x", 9 "{}",
  // 10 "\"<｜x\""
  v->bytes = {"<｜end▁of▁sentence｜>",
              "</think>",
              "{",
              "\"k\"",
              ":",
              " 1",
              "}",
              "hello",
              "<｜DSML｜x",
              "{}",
              "\"<｜x\""};
  v->end_of_turn = 0;
  JsonConstraint c(v, 1, {"<｜", "<think>", "</think>"});
  std::vector<float> logits(v->bytes.size(), 1.0f);
  c.mask(logits);  // reasoning: everything but the end of turn
  CHECK(std::isinf(logits[0]));
  CHECK(logits[7] == 1.0f);
  c.accept(7);
  CHECK(c.reasoning());
  c.accept(1);
  CHECK_FALSE(c.reasoning());
  CHECK(c.allowed() == std::vector<int32_t>{2, 9});  // an object starts
  c.accept(2);
  CHECK(c.allowed() == std::vector<int32_t>{3, 6});  // a key (no reserved markers) or '}'
  c.accept(3);
  CHECK(c.allowed() == std::vector<int32_t>{4});
  c.accept(4);
  CHECK(c.allowed() == std::vector<int32_t>{2, 3, 5, 9});  // any value
  c.accept(5);
  std::vector<float> l2(v->bytes.size(), 2.0f);
  l2[6] = -std::numeric_limits<float>::infinity();  // a masked-out close still stays possible
  c.mask(l2);
  CHECK(l2[6] == 0.0f);
  CHECK(std::isinf(l2[7]));
  c.accept(6);
  CHECK(c.grammar().complete());
  CHECK(c.allowed() == std::vector<int32_t>{0});
  // A token that does not continue the object is an internal error naming it.
  JsonConstraint fresh(v, -1, {});
  CHECK_THROWS_WITH(fresh.accept(7), Catch::Contains("token 7 does not continue the object"));
}
