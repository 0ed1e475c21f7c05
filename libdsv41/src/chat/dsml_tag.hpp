// Reading DSML tags and the text around them for the streaming output parser: tag
// classification (V4.1 spaced names, tolerated V4 / V3.2 spellings), marker hold-back and UTF-8
// boundaries (api-and-clients.md §3.4).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

namespace dsv41::chat {

struct DsmlTag {
  enum class Kind { kCalls, kInvoke, kParameter, kUnknown };
  Kind kind = Kind::kUnknown;
  bool closing = false;
  bool has_name = false;
  std::string name;         // name="..." attribute
  std::string string_flag;  // string="..." attribute ("" when absent)
};

// `tag` is a whole tag from "<｜DSML｜" / "</｜DSML｜" through ">". Accepts " calls" (V4.1),
// "tool_calls" (V4) and "function_calls" (V3.2) as the block name, with or without the space.
DsmlTag classify_dsml_tag(std::string_view tag);

// Length of the longest suffix of `text` that is a proper prefix of one of `markers`: text that
// must be held back because the next chunk may complete a marker.
size_t partial_marker_suffix(std::string_view text,
                             std::initializer_list<std::string_view> markers);

// Length of the longest prefix of `text` that does not end inside a UTF-8 sequence (a stream
// delta must be valid UTF-8 on its own; a chunk may end mid code point).
size_t utf8_complete_prefix(std::string_view text);

// Position and length of the earliest occurrence of any of `markers` at or after `from`
// (ties: the longer marker). npos when none occurs.
struct MarkerHit {
  size_t pos = std::string_view::npos;
  std::string_view marker;
};
MarkerHit find_first_marker(std::string_view text, std::initializer_list<std::string_view> markers,
                            size_t from = 0);

}  // namespace dsv41::chat
