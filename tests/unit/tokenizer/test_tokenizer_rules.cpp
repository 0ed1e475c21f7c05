// Engine rules on hand-built tokenizer.json files: added-token matching order, BPE merge order,
// pre-tokenizer variants, unk handling, ignore_merges, streaming, and a round-trip property.
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "support/fixtures.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"

namespace {

using dsv41::Tokenizer;
namespace byte_level = dsv41::byte_level;

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

struct Added {
  std::string content;
  int id;
  bool special = true;
  bool normalized = false;
};

// A byte-level BPE: byte b is id b (bytes in `drop` have no token), then one id per merge result
// and per `extra` entry (raw bytes), in order.
struct Mini {
  std::vector<std::pair<std::string, std::string>> merges;  // raw bytes
  std::vector<std::string> extra;
  std::vector<Added> added;
  std::string drop;
  std::string pre_tokenizer =
      R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": false})";
  std::string model_flags;  // extra "key": value pairs for "model"
  std::optional<std::string> unk;

  std::string json(std::vector<std::string>* keys_out = nullptr) const {
    std::vector<std::string> keys;
    for (int b = 0; b < 256; ++b) {
      const std::string byte(1, static_cast<char>(b));
      keys.push_back(drop.find(byte) == std::string::npos ? byte_level::encode(byte) : "");
    }
    auto add_key = [&](const std::string& k) {
      for (const auto& e : keys)
        if (e == k) return;
      keys.push_back(k);
    };
    for (const auto& [l, r] : merges) add_key(byte_level::encode(l + r));
    for (const auto& e : extra) add_key(byte_level::encode(e));
    if (unk) add_key(*unk);
    std::string vocab;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i].empty()) continue;
      vocab += (vocab.empty() ? "" : ", ") + quote(keys[i]) + ": " + std::to_string(i);
    }
    std::string m;
    for (const auto& [l, r] : merges)
      m += (m.empty() ? "[" : ", [") + quote(byte_level::encode(l)) + ", " +
           quote(byte_level::encode(r)) + "]";
    std::string a;
    for (const auto& t : added)
      a += std::string(a.empty() ? "" : ", ") + "{\"id\": " + std::to_string(t.id) +
           ", \"content\": " + quote(t.content) +
           ", \"special\": " + (t.special ? "true" : "false") +
           ", \"normalized\": " + (t.normalized ? "true" : "false") + "}";
    if (keys_out) *keys_out = keys;
    return "{\"added_tokens\": [" + a +
           "], \"normalizer\": null, \"pre_tokenizer\": " + pre_tokenizer +
           ", \"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\"" +
           (unk ? ", \"unk_token\": " + quote(*unk) : "") + model_flags + ", \"vocab\": {" + vocab +
           "}, \"merges\": [" + m + "]}}";
  }
  std::unique_ptr<Tokenizer> load() const { return Tokenizer::from_json(json(), "mini"); }
};

// The ids of raw-byte strings in a Mini tokenizer.
std::vector<int32_t> ids(const Tokenizer& tok, std::initializer_list<std::string> pieces) {
  std::vector<int32_t> out;
  for (const auto& p : pieces) {
    auto id = tok.token_to_id(byte_level::encode(p));
    if (!id) id = tok.token_to_id(p);  // added token content
    REQUIRE(id.has_value());
    out.push_back(*id);
  }
  return out;
}

}  // namespace

TEST_CASE("tokenizer / added tokens: leftmost-longest, specials skippable, raw before normalized",
          "[unit][tokenizer]") {
  Mini mini;
  mini.added = {{"ab", 300}, {"abc", 301}, {"bcd", 302, /*special=*/false}};
  auto tok = mini.load();
  CHECK(tok->vocab_size() == 303);
  CHECK(tok->encode("xabcd", true) == std::vector<int32_t>{'x', 301, 'd'});
  CHECK(tok->encode("xbcd", true) == std::vector<int32_t>{'x', 302});
  CHECK(tok->encode("abab", true) == std::vector<int32_t>{300, 300});
  // parse_special=false: "ab"/"abc" are text; the non-special "bcd" still matches.
  CHECK(tok->encode("xabcd", false) == std::vector<int32_t>{'x', 'a', 302});
  CHECK(tok->is_special(301));
  CHECK_FALSE(tok->is_special(302));
  CHECK(tok->is_added(302));
  CHECK_FALSE(tok->is_added('x'));
  CHECK(tok->token_string(301) == "abc");
  CHECK_FALSE(tok->has_token(299));  // the gap between the byte ids and the added ids
  CHECK_THROWS(tok->decode(std::vector<int32_t>{299}));

  // normalized=false tokens are cut out first; normalized=true ones only in what is left, so
  // "ab" wins over the leftmost "xa" (HF AddedVocabulary order).
  Mini two;
  two.added = {{"ab", 300, true, false}, {"xa", 301, true, true}};
  auto tok2 = two.load();
  CHECK(tok2->encode("xab", true) == std::vector<int32_t>{'x', 300});
  CHECK(tok2->encode("xaxa", true) == std::vector<int32_t>{301, 301});
}

TEST_CASE("tokenizer / BPE: lowest rank first, leftmost among equal ranks, long pieces",
          "[unit][tokenizer]") {
  Mini ab_first;
  ab_first.merges = {{"a", "b"}, {"b", "c"}};
  auto t1 = ab_first.load();
  CHECK(t1->encode("abc", true) == ids(*t1, {"ab", "c"}));
  Mini bc_first;
  bc_first.merges = {{"b", "c"}, {"a", "b"}};
  auto t2 = bc_first.load();
  CHECK(t2->encode("abc", true) == ids(*t2, {"a", "bc"}));

  Mini aa;
  aa.merges = {{"a", "a"}, {"aa", "aa"}};
  auto t3 = aa.load();
  CHECK(t3->encode("aaa", true) == ids(*t3, {"aa", "a"}));
  CHECK(t3->encode("aaaaaaa", true) == ids(*t3, {"aaaa", "aa", "a"}));
  // One 400 KB piece: the heap merge is O(n log n); a quadratic merge would not finish.
  const std::string run(400000, 'a');
  const auto out = t3->encode(run, true);
  CHECK(out.size() == 100000);
  CHECK(t3->decode(out) == run);
}

TEST_CASE("tokenizer / BPE: ignore_merges and unknown bytes", "[unit][tokenizer]") {
  Mini m;
  m.merges = {{"a", "b"}};
  m.extra = {"abc"};
  CHECK(m.load()->encode("abc", true) == ids(*m.load(), {"ab", "c"}));
  m.model_flags = ", \"ignore_merges\": true";
  auto t = m.load();
  CHECK(t->encode("abc", true) == ids(*t, {"abc"}));
  CHECK(t->encode("abcd", true) == ids(*t, {"ab", "c", "d"}));

  Mini z;
  z.drop = "z";
  CHECK(z.load()->encode("azzb", true) == std::vector<int32_t>{'a', 'b'});  // dropped, as HF
  z.unk = "<unk>";
  auto tu = z.load();
  const int32_t unk = *tu->token_to_id("<unk>");
  CHECK(tu->encode("azzb", true) == std::vector<int32_t>{'a', unk, unk, 'b'});
  z.model_flags = ", \"fuse_unk\": true";
  CHECK(z.load()->encode("azzb", true) == std::vector<int32_t>{'a', unk, 'b'});
}

TEST_CASE("tokenizer / pre-tokenizer: GPT-2 ByteLevel regex, Removed, String patterns",
          "[unit][tokenizer]") {
  Mini gpt2;
  gpt2.pre_tokenizer = R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})";
  CHECK(gpt2.load()->pre_tokenize("Hello world's  x") ==
        std::vector<std::string>{"Hello", "Ġworld", "'s", "Ġ", "Ġx"});

  Mini removed;
  removed.pre_tokenizer = R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"String": "+"}, "behavior": "Removed", "invert": false},
      {"type": "Split", "pattern": {"Regex": "\\d"}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})";
  auto t = removed.load();
  CHECK(t->pre_tokenize("ab+c1d++e") == std::vector<std::string>{"ab", "c", "1", "d", "e"});
  CHECK(t->decode(t->encode("ab+c", true)) == "abc");

  Mini after;
  after.pre_tokenizer = R"({"type": "Sequence", "pretokenizers": [
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
      {"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Isolated", "invert": false}]})";
  CHECK_THROWS_WITH(after.load(), Catch::Contains("after ByteLevel"));
}

TEST_CASE(
    "tokenizer / pre-tokenizer: the whitespace class is Unicode White_Space (Oniguruma), not "
    "PCRE2's",
    "[unit][tokenizer]") {
  using dsv41::PreTokenizer;
  const std::string ws =
      "\\x{9}-\\x{d}\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}"
      "\\x{205f}\\x{3000}";
  CHECK(PreTokenizer::rewrite_whitespace_classes("\\s+(?!\\S)") ==
        "[" + ws + "]+(?![^" + ws + "])");
  CHECK(PreTokenizer::rewrite_whitespace_classes("[^\\s\\p{L}]") == "[^" + ws + "\\p{L}]");
  CHECK(PreTokenizer::rewrite_whitespace_classes("\\\\s[]\\s]\\Q\\s\\E") ==
        "\\\\s[]" + ws + "]\\Q\\s\\E");
  // U+180E MONGOLIAN VOWEL SEPARATOR is in PCRE2's UCP \s but not in White_Space: with the
  // DeepSeek regex, Oniguruma leaves it as its own gap piece instead of joining the space run.
  auto tok = Tokenizer::load(dsv41::test::fixture("golden/tokenizer/tiny_tokenizer.json"));
  const std::string mvs = "\xE1\xA0\x8E";
  CHECK(tok->pre_tokenize("a " + mvs + mvs + " b") ==
        std::vector<std::string>{"a", "Ġ", byte_level::encode(mvs + mvs), "Ġb"});
}

TEST_CASE("tokenizer / stream detokenizer: holds partial UTF-8, flushes lossily",
          "[unit][tokenizer]") {
  Mini m;
  m.added = {{"<｜User｜>", 300}};
  auto tok = m.load();
  dsv41::StreamDetokenizer s(*tok);
  CHECK(s.push(0xC3).empty());
  CHECK(s.push(0xA9) == "é");
  CHECK(s.push(0xF0).empty());
  CHECK(s.push(0x9F).empty());
  CHECK(s.push(300) == "\xEF\xBF\xBD<｜User｜>");  // the cut emoji is one U+FFFD
  CHECK(s.push(0xFF) == "\xEF\xBF\xBD");           // never valid: not held back
  CHECK(s.push(0xE4).empty());
  CHECK(s.flush() == "\xEF\xBF\xBD");
  CHECK(s.flush().empty());
  CHECK(s.push('a') == "a");
}

TEST_CASE("tokenizer / round trip: decode(encode(x)) == x on random valid UTF-8",
          "[unit][tokenizer]") {
  auto tok = Tokenizer::load(dsv41::test::fixture("golden/tokenizer/tiny_tokenizer.json"));
  std::mt19937 rng(41);
  const std::vector<std::string> atoms = {
      "<｜User｜>", "<think>", "｜DSML｜", "<|EOT|>",      "<｜",      "｜>",         " ",
      "  ",         "\n",      "\r\n",     "\t",           "123",      "ab",          "Ω",
      "中文",       "カ",      "😀",        "\xE2\x80\x8D", "\xCC\x81", "\xE1\xA0\x8E"};
  for (int n = 0; n < 300; ++n) {
    std::string text;
    const int len = static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) {
      if (rng() % 3 == 0) {
        text += atoms[rng() % atoms.size()];
      } else {  // a random scalar value, surrogates excluded
        uint32_t cp = rng() % 3 == 0 ? rng() % 0x80 : rng() % 0x110000;
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
        char buf[4];
        int k = 0;
        if (cp < 0x80) {
          buf[k++] = static_cast<char>(cp);
        } else if (cp < 0x800) {
          buf[k++] = static_cast<char>(0xC0 | (cp >> 6));
          buf[k++] = static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
          buf[k++] = static_cast<char>(0xE0 | (cp >> 12));
          buf[k++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
          buf[k++] = static_cast<char>(0x80 | (cp & 0x3F));
        } else {
          buf[k++] = static_cast<char>(0xF0 | (cp >> 18));
          buf[k++] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
          buf[k++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
          buf[k++] = static_cast<char>(0x80 | (cp & 0x3F));
        }
        text.append(buf, k);
      }
    }
    INFO("case " << n);
    REQUIRE_FALSE(dsv41::utf8::first_invalid(text).has_value());
    for (bool special : {true, false}) CHECK(tok->decode(tok->encode(text, special)) == text);
  }
}
