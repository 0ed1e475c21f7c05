// JSON text output (see json_writer.hpp). python_float follows CPython's float_repr_style "short":
// repr switches to exponent form when the decimal point position decpt is <= -4 or > 16.
#include "core/json_writer.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <string>
#include <utility>

#include "core/check.hpp"

namespace dsv41::json {

void append_string_body(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  size_t run_start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(text.substr(run_start, i - run_start));
    run_start = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 15];
    }
  }
  out.append(text.substr(run_start));
}

void append_string(std::string& out, std::string_view text) {
  out += '"';
  append_string_body(out, text);
  out += '"';
}

std::string quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  append_string(out, text);
  return out;
}

std::string python_float(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form, e.g. "-2.5e+20", "1e-05".
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  std::string out;
  size_t pos = 0;
  if (sci[0] == '-') {
    out += '-';
    pos = 1;
  }
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (size_t i = pos; i < e_pos; ++i)
    if (sci[i] != '.') digits += sci[i];
  int exponent = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+'), sci.data() + sci.size(),
                  exponent);
  const int decpt = exponent + 1;  // value = 0.DIGITS * 10^decpt
  const int n = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (n > 1) out += '.' + digits.substr(1);
    fmt::format_to(std::back_inserter(out), "e{}{:02d}", exponent < 0 ? '-' : '+',
                   std::abs(exponent));
  } else if (decpt <= 0) {
    out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  } else if (decpt < n) {
    out += digits.substr(0, static_cast<size_t>(decpt)) + '.' +
           digits.substr(static_cast<size_t>(decpt));
  } else {
    out += digits + std::string(static_cast<size_t>(decpt - n), '0') + ".0";
  }
  return out;
}

void append_python_dumps(std::string& out, simdjson::dom::element value) {
  using simdjson::dom::element_type;
  switch (value.type()) {
    case element_type::OBJECT: {
      // A Python dict keeps a repeated key at its first position with its last value.
      std::vector<std::pair<std::string_view, simdjson::dom::element>> fields;
      for (auto field : simdjson::dom::object(value)) {
        bool replaced = false;
        for (auto& f : fields) {
          if (f.first == field.key) {
            f.second = field.value;
            replaced = true;
            break;
          }
        }
        if (!replaced) fields.emplace_back(field.key, field.value);
      }
      out += '{';
      for (size_t i = 0; i < fields.size(); ++i) {
        if (i) out += ", ";
        append_string(out, fields[i].first);
        out += ": ";
        append_python_dumps(out, fields[i].second);
      }
      out += '}';
      return;
    }
    case element_type::ARRAY: {
      out += '[';
      bool first = true;
      for (auto item : simdjson::dom::array(value)) {
        if (!first) out += ", ";
        first = false;
        append_python_dumps(out, item);
      }
      out += ']';
      return;
    }
    case element_type::STRING:
      append_string(out, std::string_view(value));
      return;
    case element_type::INT64:
      out += std::to_string(int64_t(value));
      return;
    case element_type::UINT64:
      out += std::to_string(uint64_t(value));
      return;
    case element_type::DOUBLE:
      out += python_float(double(value));
      return;
    case element_type::BOOL:
      out += bool(value) ? "true" : "false";
      return;
    case element_type::NULL_VALUE:
      out += "null";
      return;
  }
  DSV41_FAIL(kInternal, "unknown simdjson element type");
}

std::string python_dumps(simdjson::dom::element value) {
  std::string out;
  append_python_dumps(out, value);
  return out;
}

void Writer::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!needs_comma_.empty()) {
    if (needs_comma_.back()) out_ += ',';
    needs_comma_.back() = true;
  }
}

Writer& Writer::begin_object() {
  before_value();
  out_ += '{';
  needs_comma_.push_back(false);
  return *this;
}

Writer& Writer::end_object() {
  DSV41_CHECK(!needs_comma_.empty() && !after_key_, kInternal, "json::Writer: unbalanced '}}'");
  needs_comma_.pop_back();
  out_ += '}';
  return *this;
}

Writer& Writer::begin_array() {
  before_value();
  out_ += '[';
  needs_comma_.push_back(false);
  return *this;
}

Writer& Writer::end_array() {
  DSV41_CHECK(!needs_comma_.empty() && !after_key_, kInternal, "json::Writer: unbalanced ']'");
  needs_comma_.pop_back();
  out_ += ']';
  return *this;
}

Writer& Writer::key(std::string_view name) {
  before_value();
  append_string(out_, name);
  out_ += ':';
  after_key_ = true;
  return *this;
}

Writer& Writer::value(std::string_view text) {
  before_value();
  append_string(out_, text);
  return *this;
}

Writer& Writer::value(int64_t number) {
  before_value();
  out_ += std::to_string(number);
  return *this;
}

Writer& Writer::value(double number) {
  before_value();
  // JSON has no non-finite numbers; null is what JavaScript's JSON.stringify writes.
  out_ += std::isfinite(number) ? python_float(number) : "null";
  return *this;
}

Writer& Writer::value(bool flag) {
  before_value();
  out_ += flag ? "true" : "false";
  return *this;
}

Writer& Writer::null() {
  before_value();
  out_ += "null";
  return *this;
}

Writer& Writer::raw(std::string_view json_text) {
  before_value();
  out_ += json_text;
  return *this;
}

}  // namespace dsv41::json
