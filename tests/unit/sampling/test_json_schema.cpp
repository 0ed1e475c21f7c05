// compile_json_schema (the enforced subset, the refused keywords named with their path) and
// JsonSchemaTracker beside JsonGrammar: documents that follow the schema are taken whole and at
// every byte, each kind of violation is refused at its first byte (state unchanged), and
// JsonConstraint with a schema only opens the tokens that keep to it.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "sampling/json_constraint.hpp"
#include "sampling/json_grammar.hpp"
#include "sampling/json_schema.hpp"
#include "sampling/json_schema_tracker.hpp"

using dsv41::ErrorCode;
using dsv41::sampling::compile_json_schema;
using dsv41::sampling::JsonConstraint;
using dsv41::sampling::JsonGrammar;
using dsv41::sampling::JsonSchema;
using dsv41::sampling::JsonSchemaTracker;
using dsv41::sampling::TokenVocabulary;

namespace {

std::shared_ptr<const JsonSchema> compile(const std::string& text) {
  auto r = compile_json_schema(text);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return *r;
}

// Index of the first byte the grammar or the schema refuses (-1: none); *done: the object closed.
int first_refused(const JsonSchema& s, const std::string& text, bool* done = nullptr) {
  JsonGrammar g;
  JsonSchemaTracker t(&s);
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<uint8_t>(text[i]);
    if (!g.feed(c)) return static_cast<int>(i);
    const JsonSchemaTracker before = t;
    if (!t.feed(c)) {
      CHECK(before.next_bytes() == t.next_bytes());  // unchanged
      return static_cast<int>(i);
    }
  }
  if (done) *done = g.complete();
  return -1;
}

void require_refused_at(const JsonSchema& s, const std::string& text, size_t at) {
  INFO(text);
  CHECK(first_refused(s, text) == static_cast<int>(at));
}

const char* kPerson = R"({
  "title": "Person", "type": "object",
  "properties": {
    "name": {"type": "string", "description": "full name"},
    "age": {"type": "integer"},
    "height": {"type": "number"},
    "role": {"enum": ["admin", "user", "say \"hi\""]},
    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
    "nick": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    "extra": {},
    "home": {"$ref": "#/$defs/Place"}
  },
  "required": ["name", "age"],
  "additionalProperties": false,
  "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}},
                      "required": ["city"]}}
})";

}  // namespace

TEST_CASE("json schema: documents that keep to the schema are taken", "[unit][sampling]") {
  const auto s = compile(kPerson);
  for (const std::string doc :
       {R"({"name": "Ada", "age": 36})", R"({"age":-1,"name":""})",
        R"({"name": "A", "age": 0, "height": 1.5e3, "role": "user", "tags": ["x"]})",
        R"({"name": "A", "age": 2, "role": "say \"hi\"", "tags": ["a", "b"], "nick": null})",
        R"({"name": "A", "age": 2, "nick": "bo", "extra": {"any": [1, {"x": "}"}, true]}})",
        R"({"name": "A", "age": 2, "extra": "s]\"", "home": {"city": "Oslo"}})",
        R"({"name": "A", "age": 2, "extra": 12.5})"}) {
    INFO(doc);
    bool done = false;
    CHECK(first_refused(*s, doc, &done) == -1);
    CHECK(done);
  }
}

TEST_CASE("json schema: each violation is refused at its first byte", "[unit][sampling]") {
  const auto s = compile(kPerson);
  require_refused_at(*s, R"({"nam": 1})", 5);    // no key ends at "nam
  require_refused_at(*s, R"({"x": 1})", 2);      // no key starts with x
  require_refused_at(*s, R"({"name": 1})", 9);   // name is a string
  require_refused_at(*s, R"({"age": 1.5})", 9);  // age is an integer
  require_refused_at(*s, R"({"age": 1e3})", 9);
  require_refused_at(*s, R"({"name": "a"})", 12);  // age is required
  require_refused_at(*s, R"({})", 1);              // so is everything
  require_refused_at(*s, R"({"name": "a", "name": "b"})",
                     16);  // a key once: of the n-keys only nick is left
  require_refused_at(*s, R"({"role": "guest"})", 10);          // outside the enum
  require_refused_at(*s, R"({"role": "user2"})", 14);          // a prefix is not enough
  require_refused_at(*s, R"({"tags": []})", 10);               // minItems 1
  require_refused_at(*s, R"({"tags": ["a", "b", "c"]})", 18);  // maxItems 2
  require_refused_at(*s, R"({"tags": [1]})", 10);              // string items
  require_refused_at(*s, R"({"nick": 3})", 9);                 // string or null
  require_refused_at(*s, R"({"home": {}})", 10);               // city required ($ref)
  require_refused_at(*s, R"({"home": {"town": 1}})", 11);
}

TEST_CASE("json schema: a key can end only when every key is not yet spent", "[unit][sampling]") {
  // Two properties, both written: ',' would open a key that cannot exist.
  const auto s = compile(R"({"type":"object","properties":{"a":{"type":"null"},
                             "b":{"type":"boolean"}}})");
  require_refused_at(*s, R"({"a": null, "b": true, )", 21);
  bool done = false;
  CHECK(first_refused(*s, R"({"b": false, "a": null})", &done) == -1);
  CHECK(done);
  CHECK(first_refused(*s, R"({})", &done) == -1);  // nothing required
}

TEST_CASE("json schema: keywords outside the subset are refused by name and path",
          "[unit][sampling]") {
  auto refused = [](const std::string& text, ErrorCode code, const std::string& needle) {
    auto r = compile_json_schema(text);
    INFO(text);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == code);
    CHECK_THAT(r.status().message(), Catch::Contains(needle));
  };
  refused(R"({"type":"object","properties":{"zip":{"type":"string","pattern":"^[0-9]+$"}}})",
          ErrorCode::kUnsupported, "$.properties.zip.pattern is not enforced");
  refused(R"({"type":"object","properties":{"n":{"type":"integer","minimum":0}}})",
          ErrorCode::kUnsupported, "$.properties.n.minimum is not enforced");
  refused(R"({"type":"object","oneOf":[]})", ErrorCode::kUnsupported, "$.oneOf");
  refused(R"({"type":"array"})", ErrorCode::kUnsupported, "the root must be an object");
  refused(R"({"type":"object","properties":{"v":{"anyOf":[{"type":"string"},
             {"type":"string","enum":["x"]}]}}})",
          ErrorCode::kUnsupported, "anyOf branches must have different types");
  refused(R"({"type":"object","properties":{"v":{"enum":[1,2]}}})", ErrorCode::kUnsupported,
          "only string values are enforced");
  refused(R"({"type":"object","properties":{"v":{"$ref":"#/$defs/Missing"}}})",
          ErrorCode::kInvalidArgument, "names no definition");
  refused(R"({"type":"object","properties":{"v":{"$ref":"other.json#/x"}}})",
          ErrorCode::kUnsupported, "only #/$defs/NAME");
  refused(R"({"type":"object","required":["ghost"],"properties":{"a":{}}})",
          ErrorCode::kUnsupported, "'ghost' is not in properties");
  refused(R"({"type":"object","properties":{"v":{"type":"decimal"}}})", ErrorCode::kInvalidArgument,
          "unknown type 'decimal'");
  refused("{not json", ErrorCode::kInvalidArgument, "not valid JSON");
  refused(R"({"type":"object","properties":{"v":{"const":")" + std::string(5000, 'x') + R"("}}})",
          ErrorCode::kUnsupported, "a value longer than 4096 bytes");
}

TEST_CASE("json schema: recursive $ref and type lists", "[unit][sampling]") {
  const auto s = compile(R"({"$ref":"#/definitions/Node","definitions":{"Node":{
      "type":"object","properties":{"v":{"type":["integer","null"]},
      "kids":{"type":"array","items":{"$ref":"#/definitions/Node"}}},"required":["v"]}}})");
  bool done = false;
  CHECK(first_refused(*s, R"({"v": 1, "kids": [{"v": null}, {"v": 2, "kids": []}]})", &done) == -1);
  CHECK(done);
  require_refused_at(*s, R"({"v": 1, "kids": [{"kids": []}]})", 29);  // inner v required
  require_refused_at(*s, R"({"v": "x"})", 6);
}

TEST_CASE("json constraint with a schema opens only the tokens that keep to it",
          "[unit][sampling]") {
  auto v = std::make_shared<TokenVocabulary>();
  // 0 eos, 1 "{", 2 "\"a", 3 "\"b\"", 4 "\":", 5 ":", 6 " 1", 7 " \"x\"", 8 "}", 9 "\"",
  // 10 "\"a\":", 11 " 1.5", 12 "}"
  v->bytes = {"<eos>", "{",      "\"a", "\"b\"", "\":",    ":",
              " 1",    " \"x\"", "}",   "\"",    "\"a\":", " 1.5"};
  v->end_of_turn = 0;
  const auto s = compile(R"({"type":"object","properties":{"a":{"type":"integer"}},
                             "required":["a"]})");
  JsonConstraint c(v, -1, {}, s);
  CHECK(c.allowed() == std::vector<int32_t>{1});  // "{" only
  c.accept(1);
  // A key: "a... (not "b", not '}' while a is required, and the bare '"' may still become "a").
  CHECK(c.allowed() == std::vector<int32_t>{2, 9, 10});
  c.accept(10);
  CHECK(c.allowed() == std::vector<int32_t>{6});  // an integer, not " 1.5" nor a string
  c.accept(6);
  CHECK(c.allowed() == std::vector<int32_t>{8});
  c.accept(8);
  CHECK(c.allowed() == std::vector<int32_t>{0});
  JsonConstraint d(v, -1, {}, s);
  d.accept(1);
  CHECK_THROWS_WITH(d.accept(3), Catch::Contains("does not continue the object of the schema"));
}
