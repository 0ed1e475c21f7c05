// JsonSchemaTracker: walks the bytes of one JSON object beside JsonGrammar and refuses the bytes
// that would leave a JsonSchema (json_schema.hpp): a key not among the object's properties or
// repeated, a value of another type, a fraction or exponent in an integer, a string outside its
// enum, an object closed before its required keys, an array outside its item bounds. It reads
// only what it needs of the lexical structure and relies on JsonGrammar, fed the same bytes first,
// for the syntax (strings, escapes, numbers, literals, whitespace, depth). Trivially copyable
// (the schema is held by pointer), so trial feeds on a copy stay cheap.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <string_view>

#include "sampling/json_grammar.hpp"
#include "sampling/json_schema.hpp"

namespace dsv41::sampling {

class JsonSchemaTracker {
 public:
  // schema must outlive the tracker.
  explicit JsonSchemaTracker(const JsonSchema* schema) : schema_(schema) {}

  // One byte that JsonGrammar accepted; false (state unchanged) when the schema rules it out.
  bool feed(uint8_t c);
  // Every byte; false when one is refused (the state is then unspecified: use a copy).
  bool feed(std::string_view bytes);
  // Bytes feed() could take now: inside a key or an enum string only the continuations of the
  // remaining candidates; everywhere else all 256 (JsonGrammar filters those).
  std::bitset<256> next_bytes() const;

 private:
  // kValue: a value of node_ starts; kOpenObject / kOpenArray: right after '{' / '['; kKey: a key
  // must start (after ','); kKeyString / kEnum: inside a key / enum string, matching candidates;
  // kColon; kString: a string with no enum; kNumber; kLiteral; kAfterValue: ',' or a close;
  // kFree: inside a value the schema leaves open (free_depth_ containers deep); kDone.
  enum class Mode : uint8_t {
    kValue,
    kOpenObject,
    kOpenArray,
    kKey,
    kKeyString,
    kColon,
    kEnum,
    kString,
    kNumber,
    kLiteral,
    kAfterValue,
    kFree,
    kDone
  };
  struct Frame {
    uint64_t seen = 0;  // object: keys written so far
    int32_t node = 0;
    uint32_t count = 0;  // array: items so far
    bool object = false;
  };

  const JsonSchemaNode& node(int n) const { return schema_->nodes[static_cast<size_t>(n)]; }
  bool start_value(uint8_t c);  // first byte of a value of node_
  bool end_value();             // a value ended: its container (or the root) moves on
  bool after_value(uint8_t c);
  bool match_string_byte(uint8_t c, bool keys);  // kKeyString / kEnum
  bool free_byte(uint8_t c);

  const JsonSchema* schema_;
  Mode mode_ = Mode::kValue;
  int32_t node_ = 0;         // the node of the value that starts (kValue) or runs
  uint64_t candidates_ = 0;  // kKeyString / kEnum: keys or enum values still matching
  uint16_t offset_ = 0;      // bytes of the string body matched so far
  bool escape_ = false;      // inside a string: the previous byte began an escape
  bool integer_ = false;     // kNumber: no '.', 'e', 'E'
  uint8_t literal_left_ = 0;
  uint8_t free_depth_ = 0;
  bool free_string_ = false;
  bool free_scalar_ = false;
  uint8_t depth_ = 0;
  std::array<Frame, JsonGrammar::kMaxDepth> stack_{};
};

}  // namespace dsv41::sampling
