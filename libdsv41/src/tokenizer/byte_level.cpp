#include "tokenizer/byte_level.hpp"

#include <array>

namespace dsv41::byte_level {
namespace {

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, 324> to_byte{};  // indexed by code point; the alphabet ends at U+0143
  Tables() {
    to_byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      to_char[b] = printable ? static_cast<char32_t>(b) : next++;
      to_byte[to_char[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

void append_utf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else {  // the alphabet is below U+0800: two bytes
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

}  // namespace

char32_t char_of_byte(uint8_t b) { return tables().to_char[b]; }

std::optional<uint8_t> byte_of_char(char32_t c) {
  if (c >= tables().to_byte.size() || tables().to_byte[c] < 0) return std::nullopt;
  return static_cast<uint8_t>(tables().to_byte[c]);
}

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char ch : bytes) append_utf8(char_of_byte(static_cast<uint8_t>(ch)), out);
  return out;
}

std::string decode_token(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  size_t i = 0;
  while (i < token.size()) {
    const auto b0 = static_cast<unsigned char>(token[i]);
    char32_t c;
    if (b0 < 0x80) {
      c = b0;
      i += 1;
    } else if ((b0 & 0xE0) == 0xC0 && i + 1 < token.size()) {
      c = (static_cast<char32_t>(b0 & 0x1F) << 6) |
          (static_cast<unsigned char>(token[i + 1]) & 0x3F);
      i += 2;
    } else {
      return std::string(token);  // a 3- or 4-byte code point is never in the alphabet
    }
    const auto b = byte_of_char(c);
    if (!b) return std::string(token);
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

}  // namespace dsv41::byte_level
