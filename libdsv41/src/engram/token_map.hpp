// The Engram compressed token map (spec model-architecture.md §5.2.1): every token id is decoded
// alone; tokens whose normalised text is equal share one compressed id, assigned in first-seen
// order of the keys. Released: 129,280 ids -> 99,092 keys (= engram_compressed_vocab_size).
// The normaliser mirrors the HF `tokenizers` sequence the reference builds (HF-mod
// `build_compressed_token_map`), implemented with utf8proc; docs/formats/engram.md lists where
// utf8proc's Unicode data and the Rust crates' can disagree.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#ifdef DSV41_ENGRAM_WITH_TOKENIZER
#include "tokenizer/tokenizer.hpp"
#endif

namespace dsv41::engram {

// U+E000 (private use): stands in for a text that is exactly one space so Strip keeps it.
inline constexpr char32_t kSpaceSentinel = 0xE000;

// NFKC -> NFD -> drop General_Category Mark (Mn, Mc, Me: tokenizers' StripAccents) -> per-code-
// point full lowercase (Rust char::to_lowercase) -> runs of [space, tab, CR, LF] become one
// space -> a text equal to " " becomes U+E000 -> strip Rust-`is_whitespace` code points at both
// ends -> every U+E000 becomes " ". May return "". Throws kInvalidArgument on invalid UTF-8.
std::string normalize_token_text(std::string_view text);

// The key of one token: its raw vocab string when the decoded text contains U+FFFD (a partial
// UTF-8 byte token), else the normalised text, or the decoded text when that normalises to "".
std::string token_key(std::string_view decoded, std::string_view raw_token);

struct TokenMap {
  std::vector<int32_t> compressed;  // [vocab_size]: token id -> compressed id
  int32_t n_compressed = 0;         // number of distinct keys
};

// decode_one(id): HF `decode([id], skip_special_tokens=False)` (lossy UTF-8, U+FFFD for partial
// byte sequences); raw_token_string(id): the vocab key (`id_to_token`). Errors of either
// callback propagate; a token whose text is invalid UTF-8 fails naming its id.
TokenMap build_token_map(int32_t vocab_size, const std::function<std::string(int32_t)>& decode_one,
                         const std::function<std::string(int32_t)>& raw_token_string);

#ifdef DSV41_ENGRAM_WITH_TOKENIZER
// The same over a loaded tokenizer: decode({id}) and token_string(id); ids that no token uses
// decode to "" (HF decode skips them), so they share the key "".
TokenMap build_token_map(const Tokenizer& tokenizer);
#endif

}  // namespace dsv41::engram
