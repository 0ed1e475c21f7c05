// tokenizer.json -> Tokenizer. Field names and defaults follow the HF `tokenizers` serde format
// (version "1.0"). Every structure this engine does not implement is refused by its JSON path.
#include <simdjson.h>

#include "core/check.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/tokenizer.hpp"

namespace dsv41 {

// The GPT-2 pre-tokenizer regex a ByteLevel step with use_regex=true applies (HF byte_level.rs).
static constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class TokenizerJsonReader {
 public:
  TokenizerJsonReader(Tokenizer& tok, std::string origin) : tok_(tok), origin_(std::move(origin)) {}

  void read(const simdjson::padded_string& json) {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    const auto err = parser.parse(json).get(root);
    DSV41_CHECK(!err, kCorruptFile, "{}: not valid JSON: {}", origin_,
                simdjson::error_message(err));
    simdjson::dom::object obj = object(root, "(root)");
    for (const char* ignored_if_null : {"truncation", "padding"}) {
      simdjson::dom::element e;
      if (!obj[ignored_if_null].get(e))
        DSV41_CHECK(e.is_null(), kUnsupported, "{}: '{}' must be null (this engine never {}s)",
                    origin_, ignored_if_null,
                    ignored_if_null == std::string_view("padding") ? "pad" : "truncate");
    }
    read_model(required(obj, "model", ""));
    read_added_tokens(obj);
    read_normalizer(optional(obj, "normalizer"), "normalizer");
    read_pre_tokenizer(optional(obj, "pre_tokenizer"));
    read_post_processor(optional(obj, "post_processor"));
    read_decoder(optional(obj, "decoder"));
    finish();
  }

 private:
  using Element = simdjson::dom::element;

  [[noreturn]] void bad(const std::string& path, const std::string& what) const {
    DSV41_FAIL(kCorruptFile, "{}: {}: {}", origin_, path, what);
  }
  [[noreturn]] void unsupported(const std::string& path, const std::string& what) const {
    DSV41_FAIL(kUnsupported, "{}: {}: {} is not supported (byte-level BPE only, docs/tokenizer.md)",
               origin_, path, what);
  }
  simdjson::dom::object object(Element e, const std::string& path) const {
    simdjson::dom::object o;
    if (e.get(o)) bad(path, "expected an object");
    return o;
  }
  Element required(simdjson::dom::object o, const char* key, const std::string& parent) const {
    Element e;
    if (o[key].get(e)) bad(parent.empty() ? key : parent + "." + key, "missing");
    return e;
  }
  // Missing and null are both "absent".
  std::optional<Element> optional(simdjson::dom::object o, const char* key) const {
    Element e;
    if (o[key].get(e) || e.is_null()) return std::nullopt;
    return e;
  }
  std::string_view string(Element e, const std::string& path) const {
    std::string_view s;
    if (e.get(s)) bad(path, "expected a string");
    return s;
  }
  bool boolean(simdjson::dom::object o, const char* key, const std::string& parent,
               bool dflt) const {
    auto e = optional(o, key);
    if (!e) return dflt;
    bool b;
    if (e->get(b)) bad(parent + "." + key, "expected true/false");
    return b;
  }
  int32_t id_value(Element e, const std::string& path) const {
    int64_t v;
    if (e.get(v)) bad(path, "expected an integer id");
    // 2^24 bounds the id table (the real vocabulary ends at 129,279).
    if (v < 0 || v >= (int64_t{1} << 24)) bad(path, fmt::format("id {} out of range [0, 2^24)", v));
    return static_cast<int32_t>(v);
  }
  std::string_view type_of(simdjson::dom::object o, const std::string& path) const {
    return string(required(o, "type", path), path + ".type");
  }

  void read_model(Element e) {
    auto m = object(e, "model");
    const auto type = type_of(m, "model");
    if (type != "BPE") unsupported("model.type", fmt::format("model type '{}'", type));
    if (boolean(m, "byte_fallback", "model", false)) unsupported("model.byte_fallback", "true");
    if (auto d = optional(m, "dropout")) {
      double p;
      if (d->get(p)) bad("model.dropout", "expected a number or null");
      if (p != 0.0) unsupported("model.dropout", fmt::format("BPE dropout {}", p));
    }
    for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (auto a = optional(m, affix); a && !string(*a, std::string("model.") + affix).empty())
        unsupported(std::string("model.") + affix, "a non-empty value");
    }
    tok_.fuse_unk_ = boolean(m, "fuse_unk", "model", false);
    tok_.ignore_merges_ = boolean(m, "ignore_merges", "model", false);
    if (auto u = optional(m, "unk_token")) unk_token_ = string(*u, "model.unk_token");

    for (auto [key, value] : object(required(m, "vocab", "model"), "model.vocab")) {
      const int32_t id = id_value(value, fmt::format("model.vocab[\"{}\"]", key));
      vocab_.emplace_back(key, id);
      max_id_ = std::max(max_id_, id);
    }
    simdjson::dom::array merges;
    if (required(m, "merges", "model").get(merges)) bad("model.merges", "expected an array");
    for (Element me : merges) merges_.push_back(me);
  }

  void read_added_tokens(simdjson::dom::object root) {
    auto arr_e = optional(root, "added_tokens");
    if (!arr_e) return;
    simdjson::dom::array arr;
    if (arr_e->get(arr)) bad("added_tokens", "expected an array");
    size_t i = 0;
    for (Element te : arr) {
      const std::string path = fmt::format("added_tokens[{}]", i++);
      auto t = object(te, path);
      Added a;
      a.id = id_value(required(t, "id", path), path + ".id");
      a.content = string(required(t, "content", path), path + ".content");
      if (a.content.empty()) bad(path + ".content", "empty");
      for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
        if (boolean(t, flag, path, false))
          unsupported(path + "." + flag, fmt::format("true (token '{}')", a.content));
      }
      a.normalized = boolean(t, "normalized", path, true);
      a.special = boolean(t, "special", path, false);
      added_.push_back(a);
      max_id_ = std::max(max_id_, a.id);
    }
  }

  // No normalisation only: null, or a Sequence whose members are all (recursively) empty.
  void read_normalizer(std::optional<Element> e, const std::string& path) {
    if (!e) return;
    auto n = object(*e, path);
    const auto type = type_of(n, path);
    if (type != "Sequence") unsupported(path + ".type", fmt::format("normalizer '{}'", type));
    simdjson::dom::array list;
    if (required(n, "normalizers", path).get(list)) bad(path + ".normalizers", "expected an array");
    size_t i = 0;
    for (Element sub : list) read_normalizer(sub, fmt::format("{}.normalizers[{}]", path, i++));
  }

  void read_pre_tokenizer(std::optional<Element> e) {
    if (!e) unsupported("pre_tokenizer", "a missing pre_tokenizer (no ByteLevel step)");
    add_pre_tokenizer(*e, "pre_tokenizer");
    if (!saw_byte_level_) unsupported("pre_tokenizer", "a pre-tokenizer without a ByteLevel step");
  }

  void add_pre_tokenizer(Element e, const std::string& path) {
    auto p = object(e, path);
    const auto type = type_of(p, path);
    if (saw_byte_level_) unsupported(path, fmt::format("a '{}' step after ByteLevel", type));
    if (type == "Sequence") {
      simdjson::dom::array list;
      if (required(p, "pretokenizers", path).get(list))
        bad(path + ".pretokenizers", "expected an array");
      size_t i = 0;
      for (Element sub : list)
        add_pre_tokenizer(sub, fmt::format("{}.pretokenizers[{}]", path, i++));
    } else if (type == "Split") {
      add_split(p, path);
    } else if (type == "ByteLevel") {
      if (boolean(p, "add_prefix_space", path, true))
        unsupported(path + ".add_prefix_space", "true");
      if (boolean(p, "use_regex", path, true))
        tok_.pretokenizer_.add_split(kGpt2Regex, SplitBehavior::kIsolated, origin_ + ": " + path);
      saw_byte_level_ = true;
    } else {
      unsupported(path + ".type", fmt::format("pre-tokenizer '{}'", type));
    }
  }

  void add_split(simdjson::dom::object p, const std::string& path) {
    if (boolean(p, "invert", path, false)) unsupported(path + ".invert", "true");
    const auto behavior = string(required(p, "behavior", path), path + ".behavior");
    SplitBehavior b;
    if (behavior == "Isolated") {
      b = SplitBehavior::kIsolated;
    } else if (behavior == "Removed") {
      b = SplitBehavior::kRemoved;
    } else {
      unsupported(path + ".behavior", fmt::format("split behavior '{}'", behavior));
    }
    auto pat = object(required(p, "pattern", path), path + ".pattern");
    const std::string where = origin_ + ": " + path + ".pattern";
    if (auto r = optional(pat, "Regex")) {
      tok_.pretokenizer_.add_split(string(*r, path + ".pattern.Regex"), b, where);
    } else if (auto s = optional(pat, "String")) {
      tok_.pretokenizer_.add_literal_split(string(*s, path + ".pattern.String"), b, where);
    } else {
      bad(path + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
    }
  }

  // Post-processors only matter with add_special_tokens=True / offsets; encode() is the
  // add_special_tokens=False path, so the two kinds seen on byte-level BPE files are accepted.
  void read_post_processor(std::optional<Element> e) {
    if (!e) return;
    const auto type = type_of(object(*e, "post_processor"), "post_processor");
    if (type != "ByteLevel" && type != "TemplateProcessing")
      unsupported("post_processor.type", fmt::format("post-processor '{}'", type));
  }

  void read_decoder(std::optional<Element> e) {
    if (!e) unsupported("decoder", "a missing decoder (ByteLevel expected)");
    const auto type = type_of(object(*e, "decoder"), "decoder");
    if (type != "ByteLevel") unsupported("decoder.type", fmt::format("decoder '{}'", type));
  }

  void finish() {
    // The id table is dense (an entry per id up to the largest): a 150-byte file naming id 2^24 - 1
    // would allocate 1.2 GB of entries. Real files leave no holes (the release: 129,280 ids, all
    // assigned), so a table more than half holes (past 1024 ids of slack) is refused.
    const int64_t named = static_cast<int64_t>(vocab_.size() + added_.size());
    if (max_id_ >= 2 * named + 1024)
      bad("model.vocab", fmt::format("largest id {} for {} named tokens (more than half the id "
                                     "table [0, {}] would be unassigned)",
                                     max_id_, named, max_id_));
    auto& entries = tok_.entries_;
    entries.assign(static_cast<size_t>(max_id_) + 1, Tokenizer::Entry{});
    if (vocab_.empty() && added_.empty()) entries.clear();
    for (const auto& [key, id] : vocab_) {
      auto& en = entries[id];
      if (en.assigned)
        bad(fmt::format("model.vocab[\"{}\"]", key),
            fmt::format("id {} already used by \"{}\"", id, en.key));
      en.key = std::string(key);
      en.bytes = byte_level::decode_token(key);
      en.assigned = true;
    }
    for (size_t i = 0; i < added_.size(); ++i) {
      const Added& a = added_[i];
      auto& en = entries[a.id];
      if (en.added)
        bad(fmt::format("added_tokens[{}].id", i),
            fmt::format("id {} already used by added token \"{}\"", a.id, en.bytes));
      if (!en.assigned) en.key = std::string(a.content);
      en.bytes = std::string(a.content);
      en.assigned = en.added = true;
      en.special = a.special;
    }
    // entries never move from here on: the maps below hold views of their keys.
    tok_.vocab_.reserve(vocab_.size());
    for (const auto& [key, id] : vocab_) tok_.vocab_.insert(entries[id].key, id);
    for (const auto& a : added_) {
      tok_.added_.insert(entries[a.id].bytes, a.id);
      (a.normalized ? tok_.normalized_added_ : tok_.raw_added_).add(a.content, a.id, a.special);
    }
    for (int b = 0; b < 256; ++b) {
      const char byte = static_cast<char>(b);
      tok_.byte_ids_[b] = tok_.vocab_.find(byte_level::encode({&byte, 1})).value_or(-1);
    }
    if (unk_token_) {
      const auto id = tok_.vocab_.find(*unk_token_);
      if (!id) bad("model.unk_token", fmt::format("'{}' is not in the vocab", *unk_token_));
      tok_.unk_id_ = *id;
    }
    read_merges();
  }

  void read_merges() {
    tok_.merges_.reserve(merges_.size());
    std::string joined;
    for (size_t i = 0; i < merges_.size(); ++i) {
      const std::string path = fmt::format("model.merges[{}]", i);
      std::string_view left, right;
      std::string_view s;
      simdjson::dom::array pair;
      if (!merges_[i].get(s)) {  // legacy "left right"
        const size_t sp = s.find(' ');
        if (sp == std::string_view::npos || s.find(' ', sp + 1) != std::string_view::npos)
          bad(path, fmt::format("'{}' is not two tokens separated by one space", s));
        left = s.substr(0, sp);
        right = s.substr(sp + 1);
      } else if (!merges_[i].get(pair) && pair.size() == 2) {
        left = string(pair.at(0).value_unsafe(), path + "[0]");
        right = string(pair.at(1).value_unsafe(), path + "[1]");
      } else {
        bad(path, "expected \"left right\" or [\"left\", \"right\"]");
      }
      const int32_t l = vocab_id(left, path), r = vocab_id(right, path);
      joined.assign(left);
      joined.append(right);
      const int32_t m = vocab_id(joined, path);
      tok_.merges_.add(l, r, m, static_cast<int32_t>(i));
    }
  }

  int32_t vocab_id(std::string_view key, const std::string& path) const {
    const auto id = tok_.vocab_.find(key);
    if (!id) bad(path, fmt::format("token '{}' is not in the vocab", key));
    return *id;
  }

  struct Added {
    int32_t id = 0;
    std::string_view content;
    bool normalized = true;
    bool special = false;
  };
  Tokenizer& tok_;
  std::string origin_;
  std::vector<std::pair<std::string_view, int32_t>> vocab_;  // views into the parser's document
  std::vector<Element> merges_;
  std::vector<Added> added_;
  std::optional<std::string> unk_token_;
  int32_t max_id_ = -1;
  bool saw_byte_level_ = false;
};

std::unique_ptr<Tokenizer> Tokenizer::from_json(std::string_view json, const std::string& origin) {
  return from_padded_json(simdjson::padded_string(json), origin);
}

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& path) {
  simdjson::padded_string json;
  const auto err = simdjson::padded_string::load(path).get(json);
  DSV41_CHECK(!err, kNotFound, "tokenizer file '{}' cannot be read: {}", path,
              simdjson::error_message(err));
  return from_padded_json(json, path);
}

std::unique_ptr<Tokenizer> Tokenizer::from_padded_json(const simdjson::padded_string& json,
                                                       const std::string& origin) {
  std::unique_ptr<Tokenizer> tok(new Tokenizer());
  tok->origin_ = origin;
  TokenizerJsonReader(*tok, origin).read(json);
  return tok;
}

}  // namespace dsv41
