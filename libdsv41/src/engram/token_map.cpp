#include "engram/token_map.hpp"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>
#include <unordered_map>

#include "core/check.hpp"

namespace dsv41::engram {
namespace {

constexpr char32_t kReplacementChar = 0xFFFD;

// One utf8proc_map pass (NFKC or NFD); the result is a fresh malloc'd buffer.
std::string utf8proc_transform(std::string_view text, int options) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  DSV41_CHECK(n >= 0, kInvalidArgument, "Engram token map: cannot normalise text ({})",
              utf8proc_errmsg(n));
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

std::u32string decode_utf8(std::string_view text) {
  std::u32string cps;
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(text.size());
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t used = utf8proc_iterate(p, left, &cp);
    DSV41_CHECK(used > 0, kInvalidArgument, "Engram token map: invalid UTF-8 ({})",
                utf8proc_errmsg(used));
    cps.push_back(static_cast<char32_t>(cp));
    p += used;
    left -= used;
  }
  return cps;
}

std::string encode_utf8(const std::u32string& cps) {
  std::string out;
  utf8proc_uint8_t buf[4];
  for (char32_t cp : cps) {
    const utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
    out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
  }
  return out;
}

bool is_mark(char32_t cp) {
  const utf8proc_category_t c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME;
}

// Rust char::to_lowercase: the simple mapping, except U+0130 (the only unconditional multi-code-
// point lowercase in SpecialCasing.txt) -> "i" U+0307.
void append_lowercase(char32_t cp, std::u32string& out) {
  if (cp == 0x0130) {
    out.push_back(U'i');
    out.push_back(0x0307);
    return;
  }
  out.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
}

// Rust char::is_whitespace (Unicode White_Space), which tokenizers' Strip uses. Unlike Python's
// str.strip it excludes U+001C..U+001F.
bool is_rust_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool is_collapsed_space(char32_t c) { return c == U' ' || c == U'\t' || c == U'\r' || c == U'\n'; }

}  // namespace

std::string normalize_token_text(std::string_view text) {
  const std::string nfkc =
      utf8proc_transform(text, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  const std::string nfd = utf8proc_transform(nfkc, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
  std::u32string lowered;
  for (char32_t cp : decode_utf8(nfd)) {
    if (!is_mark(cp)) append_lowercase(cp, lowered);
  }
  std::u32string collapsed;
  bool in_run = false;
  for (char32_t cp : lowered) {
    const bool space = is_collapsed_space(cp);
    if (!space) collapsed.push_back(cp);
    if (space && !in_run) collapsed.push_back(U' ');
    in_run = space;
  }
  if (collapsed == U" ") collapsed = std::u32string(1, kSpaceSentinel);
  size_t begin = 0, end = collapsed.size();
  while (begin < end && is_rust_whitespace(collapsed[begin])) ++begin;
  while (end > begin && is_rust_whitespace(collapsed[end - 1])) --end;
  std::u32string stripped = collapsed.substr(begin, end - begin);
  for (char32_t& cp : stripped) {
    if (cp == kSpaceSentinel) cp = U' ';
  }
  return encode_utf8(stripped);
}

std::string token_key(std::string_view decoded, std::string_view raw_token) {
  for (char32_t cp : decode_utf8(decoded)) {
    if (cp == kReplacementChar) return std::string(raw_token);
  }
  std::string normalized = normalize_token_text(decoded);
  return normalized.empty() ? std::string(decoded) : normalized;
}

TokenMap build_token_map(int32_t vocab_size, const std::function<std::string(int32_t)>& decode_one,
                         const std::function<std::string(int32_t)>& raw_token_string) {
  DSV41_CHECK(vocab_size >= 1, kInvalidArgument, "Engram token map: vocab size {}", vocab_size);
  TokenMap map;
  map.compressed.resize(static_cast<size_t>(vocab_size));
  std::unordered_map<std::string, int32_t> key_to_id;
  key_to_id.reserve(static_cast<size_t>(vocab_size));
  for (int32_t id = 0; id < vocab_size; ++id) {
    const std::string decoded = decode_one(id);
    std::string key;
    try {
      key = token_key(decoded, raw_token_string(id));
    } catch (const detail::Failure& f) {
      DSV41_FAIL(kInvalidArgument, "Engram token map, token id {}: {}", id, f.message());
    }
    const auto [it, inserted] = key_to_id.emplace(std::move(key), map.n_compressed);
    if (inserted) ++map.n_compressed;
    map.compressed[static_cast<size_t>(id)] = it->second;
  }
  return map;
}

#ifdef DSV41_ENGRAM_WITH_TOKENIZER
TokenMap build_token_map(const Tokenizer& tokenizer) {
  DSV41_CHECK(tokenizer.vocab_size() <= static_cast<size_t>(INT32_MAX), kInvalidArgument,
              "Engram token map: vocabulary of {} ids", tokenizer.vocab_size());
  return build_token_map(
      static_cast<int32_t>(tokenizer.vocab_size()),
      [&](int32_t id) {
        const int32_t ids[1] = {id};
        return tokenizer.has_token(id) ? tokenizer.decode(ids) : std::string();
      },
      [&](int32_t id) {
        return tokenizer.has_token(id) ? tokenizer.token_string(id) : std::string();
      });
}
#endif

}  // namespace dsv41::engram
