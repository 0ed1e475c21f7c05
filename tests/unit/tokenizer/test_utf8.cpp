// Lossy UTF-8 decoding = Rust String::from_utf8_lossy (one U+FFFD per maximal invalid subpart).
#include <catch2/catch.hpp>
#include <string>

#include "tokenizer/utf8.hpp"

namespace {
const std::string R = "\xEF\xBF\xBD";  // U+FFFD
}

TEST_CASE("tokenizer / utf8: lossy decoding replaces maximal subparts", "[unit][tokenizer]") {
  using dsv41::utf8::lossy;
  CHECK(lossy("plain ascii") == "plain ascii");
  CHECK(lossy("é中😀") == "é中😀");
  CHECK(lossy("\xC3") == R);          // truncated 2-byte
  CHECK(lossy("\xF0\x9F\x98") == R);  // truncated 4-byte: one replacement
  CHECK(lossy("\xF0\x9F\x98"
              "a") == R + "a");
  CHECK(lossy("\xFF\xFE") == R + R);                  // never-valid bytes: one each
  CHECK(lossy("\x80\x80") == R + R);                  // lone continuation bytes
  CHECK(lossy("\xC0\xAF") == R + R);                  // overlong lead C0: invalid lead
  CHECK(lossy("\xE0\x80\xAF") == R + R + R);          // E0 needs A0..BF second
  CHECK(lossy("\xED\xA0\x80") == R + R + R);          // surrogate
  CHECK(lossy("\xF4\x90\x80\x80") == R + R + R + R);  // > U+10FFFF
  CHECK(lossy("\xE4\xB8"
              "\xE4\xB8\xAD") == R + "中");
  // The W3C / Unicode §3.9 example: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64.
  CHECK(lossy("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64") ==
        "a" + R + R + R + "b" + R + "c" + R + R + "d");
}

TEST_CASE("tokenizer / utf8: first_invalid and hold-back", "[unit][tokenizer]") {
  using dsv41::utf8::append_lossy;
  using dsv41::utf8::first_invalid;
  CHECK_FALSE(first_invalid("ok é 😀").has_value());
  CHECK(first_invalid("ok\xC3") == 2u);
  CHECK(first_invalid("abc\xF5") == 3u);
  std::string out;
  CHECK(append_lossy("a\xF0\x9F", out, true) == 1u);  // incomplete tail held back
  CHECK(out == "a");
  out.clear();
  CHECK(append_lossy("a\xF0\x41", out, true) == 3u);  // broken, not incomplete: replaced
  CHECK(out == "a" + R + "A");
}
