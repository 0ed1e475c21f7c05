// Byte-level pushdown automaton of one JSON object (RFC 8259), used by JsonConstraint to keep a
// response_format json_object / json_schema answer valid JSON (docs/sampling.md "JSON output").
// Accepted language: optional whitespace, then an object whose values are any JSON values
// (objects, arrays, strings, numbers, true / false / null), nested at most kMaxDepth deep; runs
// of whitespace are cut at kMaxWhitespace bytes so the model cannot stall in them. String bytes
// >= 0x80 must form valid UTF-8 (RFC 3629: no overlongs, surrogates or code points past
// U+10FFFF; found missing by fuzz_json_grammar, whose oracle is simdjson), and \u escapes of
// surrogates must pair (a high half then "\u" + a low half; found by fuzz_json_schema). Plain
// value type, trivially copyable, so a trial feed on a copy is cheap.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <string_view>

namespace dsv41::sampling {

class JsonGrammar {
 public:
  static constexpr int kMaxDepth = 32;
  static constexpr int kMaxWhitespace = 16;

  // Feeds one byte; false (state unchanged) when it cannot continue a valid prefix.
  bool feed(uint8_t c);
  // Feeds every byte; false when one is rejected (the state is then unspecified: use a copy).
  bool feed(std::string_view bytes);
  // The top-level object is closed: only the end of turn may follow.
  bool complete() const { return mode_ == Mode::kDone; }
  // Bytes feed() would take now (a cheap first-byte filter for the vocabulary scan).
  std::bitset<256> next_bytes() const;

 private:
  // kValue: a value must start; kAfterValue: ',' or the container's close; kKey: '"' of a key
  // or (right after '{') '}'; kColon; kString / kEscape / kHex: inside a string (key or value);
  // kNumber: inside a number (sub-state in num_); kLiteral: inside true / false / null.
  enum class Mode : uint8_t {
    kStart,
    kValue,
    kAfterValue,
    kKey,
    kColon,
    kString,
    kEscape,
    kHex,
    kNumber,
    kLiteral,
    kDone
  };
  // Number grammar -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?: where we are in it.
  enum class Num : uint8_t { kSign, kZero, kInt, kDot, kFrac, kE, kESign, kExp };

  bool feed_in_number(uint8_t c);
  bool end_value(uint8_t c);  // after a value ended on `c` (a number's terminator)
  bool whitespace(uint8_t c);
  bool start_value(uint8_t c);
  bool string_byte(uint8_t c);  // a byte inside a string, UTF-8 checked
  bool hex_digit(uint8_t c);    // a digit of \uXXXX, surrogate pairs checked

  Mode mode_ = Mode::kStart;
  Num num_ = Num::kSign;
  bool string_is_key_ = false;
  bool empty_container_ = false;  // right after '{' or '[' (the close may follow)
  uint8_t hex_left_ = 0;
  uint16_t hex_value_ = 0;  // the \u code unit read so far
  bool low_due_ = false;    // a high surrogate was escaped: its low half must follow
  uint8_t utf8_left_ = 0, utf8_lo_ = 0x80, utf8_hi_ = 0xBF;  // continuation bytes still due
  uint8_t literal_at_ = 0, literal_ = 0;                     // literal_: 0 true, 1 false, 2 null
  uint8_t ws_run_ = 0;
  uint8_t depth_ = 0;
  std::array<uint8_t, kMaxDepth> stack_{};  // '{' or '['
};

}  // namespace dsv41::sampling
