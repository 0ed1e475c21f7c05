// UTF-8 scanning shared by encode (validation) and decode (lossy repair, stream hold-back).
// Lossy decoding follows Rust's String::from_utf8_lossy: one U+FFFD per maximal invalid
// subsequence ("substitution of maximal subparts", Unicode §3.9 / W3C encoding standard).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace dsv41::utf8 {

// Byte offset of the first byte that does not start a valid sequence, or nullopt if valid.
std::optional<size_t> first_invalid(std::string_view bytes);

// Appends `bytes` to `out`, replacing each maximal invalid subsequence by U+FFFD (EF BF BD).
// If `hold_incomplete`, a trailing truncated-but-so-far-valid sequence is not written; the
// number of bytes consumed is returned (bytes.size() when nothing is held back).
size_t append_lossy(std::string_view bytes, std::string& out, bool hold_incomplete = false);

inline std::string lossy(std::string_view bytes) {
  std::string out;
  append_lossy(bytes, out);
  return out;
}

// Length of the UTF-8 sequence led by byte `b` (1 for ASCII and for invalid lead bytes).
inline size_t sequence_length(unsigned char b) {
  return b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : b < 0xF8 ? 4 : 1;
}

}  // namespace dsv41::utf8
