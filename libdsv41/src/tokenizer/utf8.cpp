#include "tokenizer/utf8.hpp"

namespace dsv41::utf8 {
namespace {

// Outcome of reading one sequence at bytes[i].
struct Step {
  size_t length;  // bytes consumed (valid: the whole sequence; invalid: the maximal subpart)
  bool valid;
  bool truncated;  // invalid only because the input ended inside a so-far-valid sequence
};

// Table 3-7 of the Unicode standard: allowed range of the second byte depends on the lead byte.
Step step(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {1, true, false};
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    return {1, false, false};
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) return {k, false, true};
    const auto b = static_cast<unsigned char>(s[i + k]);
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) return {k, false, false};
  }
  return {need + 1, true, false};
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

}  // namespace

std::optional<size_t> first_invalid(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    if (static_cast<unsigned char>(bytes[i]) < 0x80) {
      ++i;
      continue;
    }
    const Step st = step(bytes, i);
    if (!st.valid) return i;
    i += st.length;
  }
  return std::nullopt;
}

size_t append_lossy(std::string_view bytes, std::string& out, bool hold_incomplete) {
  size_t i = 0, run = 0;  // [run, i) is a pending valid run not yet copied
  while (i < bytes.size()) {
    if (static_cast<unsigned char>(bytes[i]) < 0x80) {
      ++i;
      continue;
    }
    const Step st = step(bytes, i);
    if (st.valid) {
      i += st.length;
      continue;
    }
    out.append(bytes.substr(run, i - run));
    if (st.truncated && hold_incomplete) return i;
    out.append(kReplacement);
    i += st.length;
    run = i;
  }
  out.append(bytes.substr(run));
  return bytes.size();
}

}  // namespace dsv41::utf8
