// Compressed token map normaliser (spec model-architecture.md §5.2.1; HF-mod
// build_compressed_token_map: tokenizers NFKC, NFD, StripAccents, Lowercase, Replace, Strip).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "core/check.hpp"
#include "engram/token_map.hpp"

using dsv41::engram::build_token_map;
using dsv41::engram::normalize_token_text;
using dsv41::engram::token_key;

TEST_CASE("engram: normaliser: case, whitespace runs, strip", "[unit][engram]") {
  CHECK(normalize_token_text("Hello") == "hello");
  CHECK(normalize_token_text("  Hello\t\n World  ") == "hello world");
  CHECK(normalize_token_text("a\r\n\r\nb") == "a b");
  CHECK(normalize_token_text("") == "");
  CHECK(normalize_token_text("\xCE\xA3\xCE\x91\xCE\xA3") ==
        "\xCF\x83\xCE\xB1\xCF\x83");  // no final sigma
}

TEST_CASE("engram: normaliser: a lone space survives through the sentinel", "[unit][engram]") {
  CHECK(normalize_token_text(" ") == " ");
  CHECK(normalize_token_text("  ") == " ");
  CHECK(normalize_token_text("\t\n") == " ");
  CHECK(normalize_token_text("\xE3\x80\x80") == " ");  // U+3000 -> NFKC " "
  // Every U+E000 is turned into a space at the end, also one that was in the text.
  CHECK(normalize_token_text("\xEE\x80\x80") == " ");
  CHECK(normalize_token_text("x\xEE\x80\x80") == "x ");
}

TEST_CASE("engram: normaliser: compatibility forms and accents", "[unit][engram]") {
  CHECK(normalize_token_text("Caf\xC3\xA9") == "cafe");  // precomposed e-acute
  CHECK(normalize_token_text("\xEF\xBD\x86\xEF\xBD\x95\xEF\xBD\x8C") == "ful");  // fullwidth
  CHECK(normalize_token_text("\xEF\xAC\x81") == "fi");                           // U+FB01 ligature
  CHECK(normalize_token_text("\xC7\x84") == "dz");                               // U+01C4 DZ caron
  CHECK(normalize_token_text("\xC4\xB0") == "i");   // U+0130: dot stripped
  CHECK(normalize_token_text("a\xC2\xA0") == "a");  // NBSP -> " " -> strip
}

TEST_CASE("engram: normaliser: StripAccents drops every Mark category, not only Mn",
          "[unit][engram]") {
  // U+0915 U+093E (Devanagari KA + vowel sign AA, category Mc) -> KA.
  CHECK(normalize_token_text("\xE0\xA4\x95\xE0\xA4\xBE") == "\xE0\xA4\x95");
  // U+20DD combining enclosing circle (Me).
  CHECK(normalize_token_text("a\xE2\x83\x9D") == "a");
}

TEST_CASE("engram: normaliser: Strip uses Rust is_whitespace", "[unit][engram]") {
  CHECK(normalize_token_text("x\xC2\x85") == "x");      // U+0085 NEL is White_Space
  CHECK(normalize_token_text("\x1c") == "\x1c");        // U+001C is not (Python strips it)
  CHECK(normalize_token_text("\xE2\x80\xA8y") == "y");  // U+2028
}

TEST_CASE("engram: token key rules", "[unit][engram]") {
  CHECK(token_key(" The", "\xC4\xA0The") == "the");
  CHECK(token_key("\xEF\xBF\xBD", "\xC3\xA6") == "\xC3\xA6");  // U+FFFD -> raw token string
  CHECK(token_key("\xC2\x85", "\xC4\xA5") == "\xC2\x85");      // normalises to "" -> the text
  CHECK_THROWS_AS(token_key("\xFF", "x"), dsv41::detail::Failure);
  CHECK_THROWS_WITH(normalize_token_text("a\xFF"), Catch::Contains("cannot normalise"));
}

TEST_CASE("engram: token map assigns ids in first-seen key order", "[unit][engram]") {
  const std::vector<std::string> decoded = {"A", "a", " a", "\xEF\xBF\xBD", "", "b", "B "};
  const std::vector<std::string> raw = {"A",
                                        "a",
                                        "\xC4\xA0"
                                        "a",
                                        "\xC3\x83",
                                        "",
                                        "b",
                                        "B\xC4\xA0"};
  const auto map = build_token_map(
      7, [&](int32_t id) { return decoded[id]; }, [&](int32_t id) { return raw[id]; });
  CHECK(map.compressed == std::vector<int32_t>{0, 0, 0, 1, 2, 3, 3});
  CHECK(map.n_compressed == 4);
}

TEST_CASE("engram: token map: invalid UTF-8 names the token id", "[unit][engram]") {
  CHECK_THROWS_WITH(
      build_token_map(
          3, [](int32_t id) { return id == 2 ? std::string("\xC3") : std::string("x"); },
          [](int32_t) { return std::string("x"); }),
      Catch::Contains("token id 2"));
  CHECK_THROWS_WITH(
      build_token_map(
          0, [](int32_t) { return std::string(); }, [](int32_t) { return std::string(); }),
      Catch::Contains("vocab size 0"));
}
