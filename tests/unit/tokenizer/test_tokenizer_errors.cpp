// Every refused tokenizer.json structure and every bad input gives a Failure whose message names
// the file and the field (or the id / byte offset). Mutations of the tiny golden tokenizer.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>

#include "core/check.hpp"
#include "support/fixtures.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

using dsv41::ErrorCode;
using dsv41::Tokenizer;
using dsv41::detail::Failure;

const std::string& tiny_json() {
  static const std::string json = [] {
    std::ifstream in(dsv41::test::fixture("golden/tokenizer/tiny_tokenizer.json"),
                     std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }();
  return json;
}

// The tiny file with the first occurrence of `from` replaced by `to` (which must exist).
std::string mutated(const std::string& from, const std::string& to) {
  std::string json = tiny_json();
  const size_t at = json.find(from);
  REQUIRE(at != std::string::npos);
  return json.replace(at, from.size(), to);
}

// Loading `json` fails with `code` and a message containing every one of `needles`.
void expect_refused(const std::string& json, ErrorCode code,
                    std::initializer_list<std::string> needles) {
  try {
    Tokenizer::from_json(json, "mutant.json");
    FAIL("loaded although it should have been refused");
  } catch (const Failure& f) {
    INFO("message: " << f.message());
    CHECK(f.code() == code);
    CHECK(f.message().find("mutant.json") != std::string::npos);
    for (const auto& n : needles) CHECK(f.message().find(n) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("tokenizer / json: unsupported structures are named", "[unit][tokenizer]") {
  using E = ErrorCode;
  expect_refused(mutated("\"type\": \"BPE\"", "\"type\": \"WordPiece\""), E::kUnsupported,
                 {"model.type", "WordPiece"});
  expect_refused(mutated("\"byte_fallback\": false", "\"byte_fallback\": true"), E::kUnsupported,
                 {"model.byte_fallback"});
  expect_refused(mutated("\"dropout\": null", "\"dropout\": 0.1"), E::kUnsupported,
                 {"model.dropout"});
  expect_refused(mutated("\"end_of_word_suffix\": null", "\"end_of_word_suffix\": \"</w>\""),
                 E::kUnsupported, {"model.end_of_word_suffix"});
  expect_refused(mutated("\"normalizers\": []", "\"normalizers\": [{\"type\": \"NFC\"}]"),
                 E::kUnsupported, {"normalizer.normalizers[0].type", "NFC"});
  expect_refused(mutated("\"normalizer\": {\n    \"type\": \"Sequence\"",
                         "\"normalizer\": {\n    \"type\": \"Lowercase\""),
                 E::kUnsupported, {"normalizer.type", "Lowercase"});
  expect_refused(mutated("\"type\": \"Split\"", "\"type\": \"Whitespace\""), E::kUnsupported,
                 {"pre_tokenizer.pretokenizers[0].type", "Whitespace"});
  expect_refused(mutated("\"behavior\": \"Isolated\"", "\"behavior\": \"MergedWithPrevious\""),
                 E::kUnsupported,
                 {"pre_tokenizer.pretokenizers[0].behavior", "MergedWithPrevious"});
  expect_refused(mutated("\"invert\": false", "\"invert\": true"), E::kUnsupported,
                 {"pre_tokenizer.pretokenizers[0].invert"});
  expect_refused(mutated("\"Regex\": \"\\\\p{N}{1,3}\"", "\"Regex\": \"(\\\\p{N}{1,3}\""),
                 E::kUnsupported, {"pre_tokenizer.pretokenizers[0].pattern", "PCRE2"});
  expect_refused(mutated("\"add_prefix_space\": false", "\"add_prefix_space\": true"),
                 E::kUnsupported, {"pre_tokenizer.pretokenizers[3].add_prefix_space"});
  expect_refused(mutated("\"pre_tokenizer\": {", "\"pre_tokenizer\": null, \"unused\": {"),
                 E::kUnsupported, {"pre_tokenizer"});
  expect_refused(mutated("\"decoder\": {\n    \"type\": \"ByteLevel\"",
                         "\"decoder\": {\n    \"type\": \"WordPiece\""),
                 E::kUnsupported, {"decoder.type", "WordPiece"});
  expect_refused(mutated("\"post_processor\": {\n    \"type\": \"ByteLevel\"",
                         "\"post_processor\": {\n    \"type\": \"BertProcessing\""),
                 E::kUnsupported, {"post_processor.type", "BertProcessing"});
  expect_refused(mutated("\"lstrip\": false", "\"lstrip\": true"), E::kUnsupported,
                 {"added_tokens[0].lstrip", "begin▁of▁sentence"});
  expect_refused(mutated("\"truncation\": null", "\"truncation\": {\"max_length\": 5}"),
                 E::kUnsupported, {"truncation"});
}

TEST_CASE("tokenizer / json: malformed files are named", "[unit][tokenizer]") {
  using E = ErrorCode;
  expect_refused("{\"model\": ", E::kCorruptFile, {"not valid JSON"});
  expect_refused("[1, 2]", E::kCorruptFile, {"(root)", "expected an object"});
  expect_refused(mutated("\"model\": {", "\"no_model\": {"), E::kCorruptFile, {"model", "missing"});
  expect_refused(mutated("\"<｜User｜>\": 4,", "\"<｜User｜>\": 3,"), E::kCorruptFile,
                 {"model.vocab", "id 3 already used"});
  expect_refused(mutated("\"<｜User｜>\": 4,", "\"<｜User｜>\": -4,"), E::kCorruptFile,
                 {"model.vocab[\"<｜User｜>\"]", "out of range"});
  expect_refused(mutated("\"<｜User｜>\": 4,", "\"<｜User｜>\": 16777215,"), E::kCorruptFile,
                 {"model.vocab", "largest id 16777215 for"});
  expect_refused(mutated("\"<｜User｜>\": 4,", "\"<｜User｜>\": \"four\","), E::kCorruptFile,
                 {"model.vocab[\"<｜User｜>\"]", "integer"});
  expect_refused(mutated("[\n        \"ã\",\n        \"ģ\"\n      ]", "[\"ã\", \"zzz\"]"),
                 E::kCorruptFile, {"model.merges[0]", "'zzz' is not in the vocab"});
  expect_refused(mutated("[\n        \"ã\",\n        \"ģ\"\n      ]", "\"ã ģ x\""), E::kCorruptFile,
                 {"model.merges[0]", "two tokens"});
  expect_refused(mutated("[\n        \"ã\",\n        \"ģ\"\n      ]", "[\"ã\"]"), E::kCorruptFile,
                 {"model.merges[0]", "expected"});
  expect_refused(mutated("\"content\": \"<｜User｜>\"", "\"content\": \"\""), E::kCorruptFile,
                 {"added_tokens[4].content", "empty"});
  expect_refused(mutated("\"unk_token\": null", "\"unk_token\": \"<unk>\""), E::kCorruptFile,
                 {"model.unk_token", "not in the vocab"});
}

TEST_CASE("tokenizer / json: the legacy \"left right\" merge spelling loads identically",
          "[unit][tokenizer]") {
  auto a = Tokenizer::from_json(tiny_json(), "tiny");
  auto b = Tokenizer::from_json(mutated("[\n        \"ã\",\n        \"ģ\"\n      ]", "\"ã ģ\""),
                                "legacy");
  const std::string text = "日本語のひらがなとカタカナ、漢字。 Hello, world!";
  CHECK(a->encode(text, true) == b->encode(text, true));
}

TEST_CASE("tokenizer / file errors and bad inputs", "[unit][tokenizer]") {
  try {
    Tokenizer::load("/nonexistent/dir/tokenizer.json");
    FAIL("loaded a missing file");
  } catch (const Failure& f) {
    CHECK(f.code() == ErrorCode::kNotFound);
    CHECK(f.message().find("/nonexistent/dir/tokenizer.json") != std::string::npos);
  }
  auto tok = Tokenizer::from_json(tiny_json(), "tiny");
  const int32_t size = static_cast<int32_t>(tok->vocab_size());
  for (int32_t bad : {-1, size, 1 << 30}) {
    const std::vector<int32_t> ids = {5, bad};
    try {
      tok->decode(ids);
      FAIL("decoded id " << bad);
    } catch (const Failure& f) {
      CHECK(f.code() == ErrorCode::kInvalidArgument);
      CHECK(f.message().find("token id " + std::to_string(bad)) != std::string::npos);
    }
    CHECK_THROWS_AS(tok->token_string(bad), Failure);
    CHECK_THROWS_AS(tok->token_bytes(bad), Failure);
    CHECK_FALSE(tok->has_token(bad));
    dsv41::StreamDetokenizer stream(*tok);
    CHECK_THROWS_AS(stream.push(bad), Failure);
  }
  for (const std::string& bad_text : {std::string("ok\xC3"),
                                      std::string("a\xFF"
                                                  "b"),
                                      std::string("\xED\xA0\x80"), std::string("x\xC0\xAF")}) {
    try {
      tok->encode(bad_text, true);
      FAIL("encoded invalid UTF-8");
    } catch (const Failure& f) {
      CHECK(f.code() == ErrorCode::kInvalidArgument);
      CHECK(f.message().find("not valid UTF-8 at byte") != std::string::npos);
    }
  }
}
