// libFuzzer target: arbitrary bytes through JsonGrammar (sampling/json_grammar.hpp), with simdjson
// as the oracle. Whatever prefix the grammar takes must be valid JSON once the grammar says the
// object is complete: simdjson must parse it as an object. simdjson also refuses numbers outside
// double / 64-bit range ("Problem while parsing a number"), which RFC 8259 allows: each number
// is then checked against the RFC's number rule with std::regex and replaced by 0 before the
// parse. A rejected byte must leave the state as it was (next_bytes() unchanged), and
// next_bytes() must agree with feed() byte by byte.
#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <regex>
#include <string>

#include "sampling/json_grammar.hpp"

namespace {

// `text` with every number outside strings replaced by 0; false when one breaks the RFC rule.
bool numbers_to_zero(const std::string& text, std::string* out) {
  static const std::regex kNumber(R"(-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?)");
  bool in_string = false, escape = false;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (in_string) {
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
      } else if (c == '"') {
        in_string = false;
      }
      out->push_back(c);
      ++i;
      continue;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      size_t j = i;
      while (j < text.size() && std::string("+-.eE0123456789").find(text[j]) != std::string::npos)
        ++j;
      if (!std::regex_match(text.substr(i, j - i), kNumber)) return false;
      out->push_back('0');
      i = j;
      continue;
    }
    in_string = c == '"';
    out->push_back(c);
    ++i;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dsv41::sampling::JsonGrammar g;
  std::string taken;
  for (size_t i = 0; i < size; ++i) {
    const std::bitset<256> next = g.next_bytes();
    const bool ok = g.feed(data[i]);
    if (ok != next.test(data[i])) __builtin_trap();
    if (!ok) {
      if (g.next_bytes() != next) __builtin_trap();
      continue;  // skip the byte: the rest may still continue the object
    }
    taken.push_back(static_cast<char>(data[i]));
    if (g.complete()) break;
  }
  if (!g.complete()) return 0;
  std::string zeroed;
  if (!numbers_to_zero(taken, &zeroed)) __builtin_trap();
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(zeroed).get(root)) __builtin_trap();
  if (root.type() != simdjson::dom::element_type::OBJECT) __builtin_trap();
  return 0;
}
