// JsonGrammar (see json_grammar.hpp).
#include "sampling/json_grammar.hpp"

namespace dsv41::sampling {

namespace {

bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
constexpr std::string_view kLiterals[3] = {"true", "false", "null"};

}  // namespace

bool JsonGrammar::whitespace(uint8_t c) {
  if (!is_ws(c) || ws_run_ >= kMaxWhitespace) return false;
  ++ws_run_;
  return true;
}

// `c` starts a value (mode is kValue).
bool JsonGrammar::start_value(uint8_t c) {
  switch (c) {
    case '{':
    case '[':
      if (depth_ >= kMaxDepth) return false;
      stack_[depth_++] = c;
      mode_ = c == '{' ? Mode::kKey : Mode::kValue;
      empty_container_ = true;
      return true;
    case ']':
      if (!empty_container_ || depth_ == 0 || stack_[depth_ - 1] != '[') return false;
      --depth_;
      mode_ = depth_ == 0 ? Mode::kDone : Mode::kAfterValue;
      empty_container_ = false;
      return true;
    case '"':
      mode_ = Mode::kString;
      string_is_key_ = false;
      break;
    case '-':
      mode_ = Mode::kNumber;
      num_ = Num::kSign;
      break;
    case 't':
    case 'f':
    case 'n':
      mode_ = Mode::kLiteral;
      literal_ = c == 't' ? 0 : c == 'f' ? 1 : 2;
      literal_at_ = 1;
      break;
    default:
      if (!is_digit(c)) return false;
      mode_ = Mode::kNumber;
      num_ = c == '0' ? Num::kZero : Num::kInt;
      break;
  }
  empty_container_ = false;
  return true;
}

// `c` after a complete value: whitespace, ',' or the enclosing container's close.
bool JsonGrammar::end_value(uint8_t c) {
  mode_ = Mode::kAfterValue;
  if (whitespace(c)) return true;
  const uint8_t top = stack_[depth_ - 1];
  if (c == ',') {
    mode_ = top == '{' ? Mode::kKey : Mode::kValue;
    return true;
  }
  if ((c == '}' && top == '{') || (c == ']' && top == '[')) {
    --depth_;
    mode_ = depth_ == 0 ? Mode::kDone : Mode::kAfterValue;
    return true;
  }
  return false;
}

bool JsonGrammar::string_byte(uint8_t c) {
  if (low_due_ && c != '\\') return false;  // a high surrogate escape needs its low half next
  if (utf8_left_ > 0) {  // a continuation byte, in the range the lead allows for the first
    if (c < utf8_lo_ || c > utf8_hi_) return false;
    --utf8_left_;
    utf8_lo_ = 0x80;
    utf8_hi_ = 0xBF;
    return true;
  }
  if (c < 0x80) {
    if (c == '"') {
      mode_ = string_is_key_ ? Mode::kColon : Mode::kAfterValue;
    } else if (c == '\\') {
      mode_ = Mode::kEscape;
    } else if (c < 0x20) {
      return false;  // control characters must be escaped
    }
    return true;
  }
  // Lead bytes (RFC 3629 table): the count of continuation bytes and the first one's range.
  if (c >= 0xC2 && c <= 0xDF) {
    utf8_left_ = 1;
  } else if (c == 0xE0) {
    utf8_left_ = 2, utf8_lo_ = 0xA0;
  } else if (c == 0xED) {
    utf8_left_ = 2, utf8_hi_ = 0x9F;
  } else if (c >= 0xE1 && c <= 0xEF) {
    utf8_left_ = 2;
  } else if (c == 0xF0) {
    utf8_left_ = 3, utf8_lo_ = 0x90;
  } else if (c >= 0xF1 && c <= 0xF3) {
    utf8_left_ = 3;
  } else if (c == 0xF4) {
    utf8_left_ = 3, utf8_hi_ = 0x8F;
  } else {
    return false;  // a continuation byte without a lead, C0, C1, F5..FF
  }
  return true;
}

// One of the 4 hex digits of \uXXXX. Surrogates must pair (RFC 8259 §7 lets a lone one
// through, but simdjson and other strict parsers refuse it; found by fuzz_json_schema): after a
// high half D800-DBFF only "\\u" + a low half DC00-DFFF may follow, and a low half never
// stands alone. Each violation is refused at its first digit that decides it.
bool JsonGrammar::hex_digit(uint8_t c) {
  const int v = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
  const int pos = 4 - hex_left_;
  if (low_due_) {
    if ((pos == 0 && v != 0xD) || (pos == 1 && v < 0xC)) return false;
  } else if (pos == 1 && hex_value_ == 0xD && v >= 0xC) {
    return false;
  }
  hex_value_ = static_cast<uint16_t>(pos == 0 ? v : hex_value_ * 16 + v);
  if (--hex_left_ == 0) {
    mode_ = Mode::kString;
    low_due_ = !low_due_ && hex_value_ >= 0xD800 && hex_value_ <= 0xDBFF;
  }
  return true;
}

bool JsonGrammar::feed_in_number(uint8_t c) {
  switch (num_) {
    case Num::kSign:
      if (c == '0') return num_ = Num::kZero, true;
      if (is_digit(c)) return num_ = Num::kInt, true;
      return false;
    case Num::kInt:
      if (is_digit(c)) return true;
      [[fallthrough]];
    case Num::kZero:
      if (c == '.') return num_ = Num::kDot, true;
      if (c == 'e' || c == 'E') return num_ = Num::kE, true;
      return end_value(c);
    case Num::kDot:
      return is_digit(c) ? (num_ = Num::kFrac, true) : false;
    case Num::kFrac:
      if (is_digit(c)) return true;
      if (c == 'e' || c == 'E') return num_ = Num::kE, true;
      return end_value(c);
    case Num::kE:
      if (c == '+' || c == '-') return num_ = Num::kESign, true;
      return is_digit(c) ? (num_ = Num::kExp, true) : false;
    case Num::kESign:
      return is_digit(c) ? (num_ = Num::kExp, true) : false;
    case Num::kExp:
      return is_digit(c) ? true : end_value(c);
  }
  return false;
}

bool JsonGrammar::feed(uint8_t c) {
  JsonGrammar g = *this;  // a rejected byte leaves the state as it was
  if (!is_ws(c) || (mode_ == Mode::kString || mode_ == Mode::kEscape || mode_ == Mode::kHex))
    g.ws_run_ = 0;
  bool ok = false;
  switch (mode_) {
    case Mode::kStart:
      ok = g.whitespace(c) || (c == '{' && (g.mode_ = Mode::kValue, g.start_value(c)));
      break;
    case Mode::kValue:
      ok = g.whitespace(c) || g.start_value(c);
      break;
    case Mode::kKey:
      if (g.whitespace(c)) {
        ok = true;
      } else if (c == '"') {
        g.mode_ = Mode::kString;
        g.string_is_key_ = true;
        g.empty_container_ = false;
        ok = true;
      } else if (c == '}' && g.empty_container_) {
        g.empty_container_ = false;
        --g.depth_;
        g.mode_ = g.depth_ == 0 ? Mode::kDone : Mode::kAfterValue;
        ok = true;
      }
      break;
    case Mode::kColon:
      ok = g.whitespace(c) || (c == ':' && (g.mode_ = Mode::kValue, true));
      break;
    case Mode::kString:
      ok = g.string_byte(c);
      break;
    case Mode::kEscape:
      if (c == 'u') {
        g.mode_ = Mode::kHex;
        g.hex_left_ = 4;
        ok = true;
      } else if (!low_due_ && (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' ||
                               c == 'n' || c == 'r' || c == 't')) {
        g.mode_ = Mode::kString;
        ok = true;
      }
      break;
    case Mode::kHex:
      ok = is_hex(c) && g.hex_digit(c);
      break;
    case Mode::kNumber:
      ok = g.feed_in_number(c);
      break;
    case Mode::kLiteral: {
      const std::string_view lit = kLiterals[literal_];
      if (c == static_cast<uint8_t>(lit[literal_at_])) {
        if (++g.literal_at_ == lit.size()) g.mode_ = Mode::kAfterValue;
        ok = true;
      }
      break;
    }
    case Mode::kAfterValue:
      ok = g.end_value(c);
      break;
    case Mode::kDone:
      ok = false;
      break;
  }
  if (ok) *this = g;
  return ok;
}

bool JsonGrammar::feed(std::string_view bytes) {
  for (char ch : bytes)
    if (!feed(static_cast<uint8_t>(ch))) return false;
  return true;
}

std::bitset<256> JsonGrammar::next_bytes() const {
  std::bitset<256> out;
  for (int c = 0; c < 256; ++c) {
    JsonGrammar g = *this;
    if (g.feed(static_cast<uint8_t>(c))) out.set(static_cast<size_t>(c));
  }
  return out;
}

}  // namespace dsv41::sampling
