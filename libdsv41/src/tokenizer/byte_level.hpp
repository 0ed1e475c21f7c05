// GPT-2 byte-level alphabet (HF ByteLevel pre-tokenizer/decoder): every byte maps to one
// printable code point. Bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF map to themselves; the other 68
// map to U+0100.. in byte order (so ' ' -> U+0120 'Ġ', '\n' -> U+010A 'Ċ').
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dsv41::byte_level {

// The code point that byte `b` is written as.
char32_t char_of_byte(uint8_t b);

// The byte written as code point `c`, if `c` is in the alphabet.
std::optional<uint8_t> byte_of_char(char32_t c);

// Raw bytes -> byte-level string (UTF-8 of the mapped code points).
std::string encode(std::string_view bytes);

// Byte-level string -> raw bytes, as the HF ByteLevel decoder does per token: if every code point
// is in the alphabet, the mapped bytes; otherwise the token's own UTF-8 bytes unchanged.
// `token` must be valid UTF-8.
std::string decode_token(std::string_view token);

}  // namespace dsv41::byte_level
