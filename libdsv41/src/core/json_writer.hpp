// JSON text output: string escaping, a small streaming writer, and a serializer of simdjson DOM
// values that reproduces Python's json.dumps(v, ensure_ascii=False) byte for byte (the chat
// renderer must match the reference encoder, api-and-clients.md §3.2).
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dsv41::json {

// Appends `text` as a quoted JSON string. Escapes `"`, `\`, \b \f \n \r \t and the other control
// characters below 0x20 as \u00XX (Python's ensure_ascii=False set); all other bytes, including
// non-ASCII UTF-8, are copied unchanged.
void append_string(std::string& out, std::string_view text);
// Appends the escaped body only (no surrounding quotes): used to stream a string piece by piece.
void append_string_body(std::string& out, std::string_view text);
std::string quote(std::string_view text);

// Python repr() of a float: shortest round-trip digits; fixed notation when the decimal exponent
// is in [-4, 16), else d.ddde±XX; integral fixed values get ".0" (45.0, 1e-05, 1e+16, -2.5e+20).
// Non-finite values are written as Python writes them (Infinity, -Infinity, NaN).
std::string python_float(double value);

// json.dumps(value, ensure_ascii=False): ", " and ": " separators, object keys in document order
// (a repeated key keeps its first position and its last value, like a Python dict), integers
// exact, floats via python_float.
void append_python_dumps(std::string& out, simdjson::dom::element value);
std::string python_dumps(simdjson::dom::element value);

// Compact streaming writer for responses (no spaces; commas inserted automatically).
class Writer {
 public:
  Writer& begin_object();
  Writer& end_object();
  Writer& begin_array();
  Writer& end_array();
  Writer& key(std::string_view name);
  Writer& value(std::string_view text);
  Writer& value(const char* text) { return value(std::string_view(text)); }
  Writer& value(int64_t number);
  Writer& value(double number);
  Writer& value(bool flag);
  Writer& null();
  // Inserts already-serialized JSON text as one value.
  Writer& raw(std::string_view json_text);

  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void before_value();

  std::string out_;
  std::vector<bool> needs_comma_;  // one entry per open container
  bool after_key_ = false;
};

}  // namespace dsv41::json
