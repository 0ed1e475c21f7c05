#include "tokenizer/tokenizer.hpp"

#include "core/check.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/utf8.hpp"

namespace dsv41 {

struct Tokenizer::EncodeState {
  PreTokenizer::ScratchPtr regex;
  BpeMerges::Scratch bpe;
  std::vector<int32_t>* out;
  bool parse_special;
};

const Tokenizer::Entry& Tokenizer::entry(int32_t id) const {
  DSV41_CHECK(id >= 0 && static_cast<size_t>(id) < entries_.size(), kInvalidArgument,
              "token id {} is out of range [0, {}) of tokenizer '{}'", id, entries_.size(),
              origin_);
  const Entry& e = entries_[id];
  DSV41_CHECK(e.assigned, kInvalidArgument, "token id {} has no token in tokenizer '{}'", id,
              origin_);
  return e;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  if (auto bad = utf8::first_invalid(text))
    DSV41_FAIL(kInvalidArgument, "text to encode is not valid UTF-8 at byte {} (of {})", *bad,
               text.size());
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  EncodeState st{pretokenizer_.make_scratch(), {}, &out, parse_special};
  // Pass 1: tokens with normalized=false; pass 2 (inside encode_plain): normalized=true ones in
  // the gaps. `tokenizers` splits in this order; there is no normalizer, so both see raw text.
  size_t pos = 0;
  while (auto m = raw_added_.find(text, pos, parse_special)) {
    encode_plain(text, pos, m->start, st);
    out.push_back(m->id);
    pos = m->start + m->length;
  }
  encode_plain(text, pos, text.size(), st);
  return out;
}

void Tokenizer::encode_plain(std::string_view text, size_t begin, size_t end,
                             EncodeState& st) const {
  if (begin == end) return;
  const std::string_view gap = text.substr(begin, end - begin);
  struct PieceCtx {
    const Tokenizer* tok;
    EncodeState* st;
    std::string_view part;
  };
  auto split = [&](std::string_view part) {
    PieceCtx ctx{this, &st, part};
    pretokenizer_.split(
        part, *st.regex,
        [](void* c, size_t b, size_t e) {
          auto* p = static_cast<PieceCtx*>(c);
          p->tok->encode_piece(p->part.substr(b, e - b), *p->st);
        },
        &ctx);
  };
  size_t pos = 0;
  while (auto m = normalized_added_.find(gap, pos, st.parse_special)) {
    if (m->start > pos) split(gap.substr(pos, m->start - pos));
    st.out->push_back(m->id);
    pos = m->start + m->length;
  }
  if (pos < gap.size()) split(gap.substr(pos));
}

void Tokenizer::encode_piece(std::string_view piece, EncodeState& st) const {
  if (ignore_merges_) {  // a piece that is itself a vocab entry is taken whole
    if (auto id = vocab_.find(byte_level::encode(piece))) {
      st.out->push_back(*id);
      return;
    }
  }
  merges_.encode_word(piece, byte_ids_, unk_id_, fuse_unk_, st.bpe, *st.out);
}

std::vector<std::string> Tokenizer::pre_tokenize(std::string_view text) const {
  if (auto bad = utf8::first_invalid(text))
    DSV41_FAIL(kInvalidArgument, "text to pre-tokenize is not valid UTF-8 at byte {}", *bad);
  struct Ctx {
    std::string_view text;
    std::vector<std::string> pieces;
  } ctx{text, {}};
  auto scratch = pretokenizer_.make_scratch();
  pretokenizer_.split(
      text, *scratch,
      [](void* c, size_t b, size_t e) {
        auto* p = static_cast<Ctx*>(c);
        p->pieces.push_back(byte_level::encode(p->text.substr(b, e - b)));
      },
      &ctx);
  return ctx.pieces;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  if (ids.size() == 1) return utf8::lossy(entry(ids[0]).bytes);
  std::string bytes;
  for (int32_t id : ids) bytes += entry(id).bytes;
  return utf8::lossy(bytes);
}

const std::string& Tokenizer::token_bytes(int32_t id) const { return entry(id).bytes; }
const std::string& Tokenizer::token_string(int32_t id) const { return entry(id).key; }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token_string) const {
  if (auto id = vocab_.find(token_string)) return id;
  return added_.find(token_string);
}

bool Tokenizer::has_token(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < entries_.size() && entries_[id].assigned;
}
bool Tokenizer::is_special(int32_t id) const { return entry(id).special; }
bool Tokenizer::is_added(int32_t id) const { return entry(id).added; }

}  // namespace dsv41
