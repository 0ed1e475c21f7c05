// A HF `tokenizer.json` of the DeepSeek byte-level BPE kind (spec model-architecture.md §8.1-8.2):
// added tokens cut out literally (leftmost-longest), Split-regex pre-tokenizer, GPT-2 byte
// alphabet, ranked merges, ByteLevel decoder. Anything else in the file is refused by name.
// Immutable after load; encode/decode are safe to call from many threads. See docs/tokenizer.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/added_tokens.hpp"
#include "tokenizer/bpe.hpp"
#include "tokenizer/pretokenizer.hpp"
#include "tokenizer/token_index.hpp"

namespace simdjson {
struct padded_string;
}

namespace dsv41 {

class Tokenizer {
 public:
  // Throws detail::Failure naming the file and the unsupported/invalid field.
  static std::unique_ptr<Tokenizer> load(const std::string& tokenizer_json_path);
  // Parses from memory (for the fuzzer and tests); `origin` names the source in errors.
  static std::unique_ptr<Tokenizer> from_json(std::string_view json, const std::string& origin);

  // HF encode(text, add_special_tokens=False). `parse_special`: special added tokens are matched
  // in the text; when false they are encoded as plain text (non-special added tokens still
  // match, like HF split_special_tokens=True). Text that is not valid UTF-8 ->
  // Failure(kInvalidArgument) naming the byte offset.
  std::vector<int32_t> encode(std::string_view text, bool parse_special) const;
  // HF decode(skip_special_tokens=false): token bytes concatenated, then decoded once with one
  // U+FFFD per maximal invalid subsequence (Rust from_utf8_lossy). An id out of range or without
  // a token -> Failure(kInvalidArgument) naming the id.
  std::string decode(std::span<const int32_t> ids) const;
  // The pre-tokenizer pieces of `text` in the byte-level alphabet (HF
  // pre_tokenizer.pre_tokenize_str); added tokens are not cut out. For tests and debugging.
  std::vector<std::string> pre_tokenize(std::string_view text) const;

  // Raw bytes of one token (added tokens: their content).
  const std::string& token_bytes(int32_t id) const;
  // The vocab key as stored in tokenizer.json (byte-level chars); an added token that is not in
  // the model vocab: its content.
  const std::string& token_string(int32_t id) const;
  // Vocab key or added-token content.
  std::optional<int32_t> token_to_id(std::string_view token_string) const;
  // Max id + 1 over vocab and added tokens.
  size_t vocab_size() const { return entries_.size(); }
  // False for ids inside [0, vocab_size) that no vocab entry or added token uses.
  bool has_token(int32_t id) const;
  bool is_special(int32_t id) const;
  bool is_added(int32_t id) const;
  const std::string& origin() const { return origin_; }

 private:
  friend class TokenizerJsonReader;
  struct Entry {
    std::string key;    // vocab key, or added content when not in the vocab
    std::string bytes;  // what decode writes for this id
    bool assigned = false;
    bool added = false;
    bool special = false;
  };
  struct EncodeState;
  static std::unique_ptr<Tokenizer> from_padded_json(const simdjson::padded_string& json,
                                                     const std::string& origin);
  const Entry& entry(int32_t id) const;
  void encode_plain(std::string_view text, size_t begin, size_t end, EncodeState& st) const;
  void encode_piece(std::string_view piece, EncodeState& st) const;

  std::string origin_;
  std::vector<Entry> entries_;          // by id; never resized after load (keys below view into it)
  TokenIndex vocab_;                    // vocab key -> id
  TokenIndex added_;                    // added content -> id
  AddedTokenMatcher raw_added_;         // normalized=false tokens: matched first
  AddedTokenMatcher normalized_added_;  // normalized=true: matched in the remaining gaps
  PreTokenizer pretokenizer_;
  BpeMerges merges_;
  int32_t byte_ids_[256];
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
};

// Incremental decode for streaming: concatenating every push() and the final flush() gives
// exactly decode(all ids). Holds back a trailing incomplete UTF-8 sequence (at most 3 bytes).
class StreamDetokenizer {
 public:
  explicit StreamDetokenizer(const Tokenizer& tok) : tok_(&tok) {}
  // The newly completed text (may be empty). Bad id -> Failure(kInvalidArgument).
  std::string push(int32_t id);
  // The held-back bytes, lossily decoded; the detokenizer is then empty again.
  std::string flush();

 private:
  const Tokenizer* tok_;
  std::string pending_;
};

}  // namespace dsv41
