// StopMatcher: stop strings across every split of the text (incl. inside multibyte characters),
// overlapping candidates, stop tokens / EOS, max_tokens, hold-back, and the named errors.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "core/check.hpp"
#include "dsv41/stop.hpp"
#include "sampling/stop_matcher.hpp"

using dsv41::FinishReason;
using dsv41::StopParams;
using dsv41::sampling::first_invalid_utf8;
using dsv41::sampling::StopMatcher;

namespace {

constexpr int64_t kVocab = 100;
constexpr int32_t kText = 5;  // an ordinary token id
const std::vector<int32_t> kEos = {1};

struct Outcome {
  std::string text;
  FinishReason finish = FinishReason::kNone;
  int32_t stop_string = -1;
  int32_t stop_token = -1;
};

// Feeds the pieces as ordinary tokens; checks after every step that each emitted chunk is
// whole UTF-8 when the input is.
Outcome run(const StopParams& params, const std::vector<std::string>& pieces) {
  StopMatcher m(params, kEos, kVocab);
  Outcome out;
  for (const std::string& piece : pieces) {
    const auto step = m.feed(kText, piece);
    REQUIRE(first_invalid_utf8(step.text) == step.text.size());
    out.text += step.text;
    if (step.finish != FinishReason::kNone) {
      out.finish = step.finish;
      out.stop_string = step.stop_string_index;
      out.stop_token = step.stop_token;
      REQUIRE(m.finished());
      return out;
    }
  }
  out.text += m.flush();
  return out;
}

// Every split of `text` into two pieces, plus one piece per byte.
std::vector<std::vector<std::string>> splits(const std::string& text) {
  std::vector<std::vector<std::string>> all;
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    all.push_back({text.substr(0, cut), text.substr(cut)});
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  all.push_back(bytes);
  return all;
}

// Reference: the stop match with the smallest end (then smallest start) in the whole text.
Outcome reference(const StopParams& params, const std::string& text) {
  size_t best_end = std::string::npos, best_start = 0;
  int32_t best = -1;
  for (size_t j = 0; j < params.stop.size(); ++j) {
    const size_t pos = text.find(params.stop[j]);
    if (pos == std::string::npos) continue;
    const size_t end = pos + params.stop[j].size();
    if (best < 0 || end < best_end || (end == best_end && pos < best_start)) {
      best_end = end;
      best_start = pos;
      best = static_cast<int32_t>(j);
    }
  }
  if (best < 0) return {text, FinishReason::kNone, -1, -1};
  const size_t cut = params.include_stop_str_in_output ? best_end : best_start;
  return {text.substr(0, cut), FinishReason::kStop, best, -1};
}

void require_same(const Outcome& got, const Outcome& want) {
  CHECK(got.text == want.text);
  CHECK(got.finish == want.finish);
  CHECK(got.stop_string == want.stop_string);
}

}  // namespace

TEST_CASE("a stop string is found at every split position", "[unit][sampling]") {
  StopParams p;
  p.stop = {"END"};
  const std::string text = "Hello, world! END more text";
  for (const auto& pieces : splits(text)) {
    INFO("first piece '" << pieces[0] << "' of " << pieces.size());
    require_same(run(p, pieces), {"Hello, world! ", FinishReason::kStop, 0, -1});
  }
  p.include_stop_str_in_output = true;
  for (const auto& pieces : splits(text)) {
    require_same(run(p, pieces), {"Hello, world! END", FinishReason::kStop, 0, -1});
  }
}

TEST_CASE("multibyte stop strings at every byte split", "[unit][sampling]") {
  StopParams p;
  p.stop = {"終わり", "\xF0\x9F\x9B\x91"};  // U+1F6D1 (4 bytes)
  const std::string text = "答えは42です。終わりです";
  for (const auto& pieces : splits(text)) {
    INFO("first piece of " << pieces.size() << " has " << pieces[0].size() << " bytes");
    require_same(run(p, pieces), {"答えは42です。", FinishReason::kStop, 0, -1});
  }
  const std::string emoji = "stop é\xF0\x9F\x9B\x91 here";
  for (const auto& pieces : splits(emoji)) {
    require_same(run(p, pieces), {"stop é", FinishReason::kStop, 1, -1});
  }
}

TEST_CASE("overlapping candidates: the first to complete wins", "[unit][sampling]") {
  StopParams p;
  p.stop = {"abc", "ab"};  // "ab" completes one byte before "abc"
  for (const auto& pieces : splits("xxabcyy")) {
    require_same(run(p, pieces), {"xx", FinishReason::kStop, 1, -1});
  }
  p.include_stop_str_in_output = true;
  for (const auto& pieces : splits("xxabcyy")) {
    require_same(run(p, pieces), {"xxab", FinishReason::kStop, 1, -1});
  }
  StopParams q;
  q.stop = {"bc", "abc"};  // same end: the earlier start ("abc") wins
  for (const auto& pieces : splits("xabcy")) {
    require_same(run(q, pieces), {"x", FinishReason::kStop, 1, -1});
  }
}

TEST_CASE("random texts and splits agree with the whole-text reference", "[unit][sampling]") {
  uint64_t lcg = 0x2545F4914F6CDD1Dull;  // fixed: the test is deterministic
  auto next = [&](uint64_t n) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (lcg >> 33) % n;
  };
  const std::vector<std::vector<std::string>> stop_sets = {
      {"ab", "bca", "cc"}, {"aab", "ab"}, {"abcab", "bcb", "é"}, {"cabc"}};
  for (int iter = 0; iter < 3000; ++iter) {
    StopParams p;
    p.stop = stop_sets[iter % stop_sets.size()];
    p.include_stop_str_in_output = (iter / 4) % 2 == 1;
    std::string text;
    const size_t len = next(14);
    const char* alphabet[] = {"a", "b", "c", "é"};
    for (size_t i = 0; i < len; ++i) text += alphabet[next(4)];
    std::vector<std::string> pieces;
    for (size_t pos = 0; pos < text.size();) {
      const size_t n = std::min(text.size() - pos, static_cast<size_t>(next(4)));
      pieces.push_back(text.substr(pos, n));
      pos += n;
    }
    INFO("text '" << text << "', " << pieces.size() << " pieces, iter " << iter);
    const Outcome want = reference(p, text);
    const Outcome got = run(p, pieces);
    require_same(got, want);
  }
}

TEST_CASE("a possible stop-string prefix is held back, then released", "[unit][sampling]") {
  StopParams p;
  p.stop = {"END"};
  StopMatcher m(p, kEos, kVocab);
  CHECK(m.feed(kText, "abc E").text == "abc ");
  CHECK(m.feed(kText, "N").text == "");
  CHECK(m.feed(kText, "x").text == "ENx");
  CHECK(m.feed(kText, "E").text == "");
  CHECK(m.flush() == "E");
  CHECK(m.finished());
}

TEST_CASE("an incomplete UTF-8 character is held back", "[unit][sampling]") {
  StopMatcher m(StopParams{}, kEos, kVocab);
  CHECK(m.feed(kText, "a\xE3\x81").text == "a");  // first 2 bytes of "あ"
  CHECK(m.feed(kText, "\x82z").text == "\xE3\x81\x82z");
}

TEST_CASE("stop token ids and EOS", "[unit][sampling]") {
  StopParams p;
  p.stop = {"END"};
  p.stop_token_ids = {7};
  StopMatcher m(p, kEos, kVocab);
  CHECK(m.feed(kText, "text E").text == "text ");
  const auto step = m.feed(7, "<stop>");
  CHECK(step.finish == FinishReason::kStop);
  CHECK(step.stop_token == 7);
  CHECK(step.stop_string_index == -1);
  CHECK(step.text == "E");  // the held prefix is released, the stop token's text dropped

  p.include_stop_str_in_output = true;
  StopMatcher inc(p, kEos, kVocab);
  CHECK(inc.feed(7, "<stop>").text == "<stop>");

  StopMatcher eos(StopParams{}, kEos, kVocab);
  const auto e = eos.feed(1, "</s>");
  CHECK(e.finish == FinishReason::kStop);
  CHECK(e.stop_token == 1);
  CHECK(e.text.empty());

  StopParams ignore;
  ignore.ignore_eos = true;
  ignore.stop_token_ids = {7};
  StopMatcher ig(ignore, kEos, kVocab);
  const auto a = ig.feed(1, "</s>");
  CHECK(a.finish == FinishReason::kNone);
  CHECK(a.text == "</s>");
  CHECK(ig.feed(7, "").finish == FinishReason::kStop);  // stop_token_ids still apply
}

TEST_CASE("max_tokens ends with length and releases held text", "[unit][sampling]") {
  StopParams p;
  p.stop = {"END"};
  p.max_tokens = 3;
  StopMatcher m(p, kEos, kVocab);
  CHECK(m.feed(kText, "a").finish == FinishReason::kNone);
  CHECK(m.feed(kText, "b").finish == FinishReason::kNone);
  const auto last = m.feed(kText, " EN");
  CHECK(last.finish == FinishReason::kLength);
  CHECK(last.text == " EN");
  CHECK(m.num_tokens() == 3);
  CHECK(std::string(dsv41::finish_reason_name(last.finish)) == "length");

  // A stop string completed by the last allowed token wins over length (vLLM order).
  StopMatcher s(p, kEos, kVocab);
  CHECK(s.feed(kText, "a").text == "a");
  CHECK(s.feed(kText, "E").text == "");
  const auto st = s.feed(kText, "ND!");
  CHECK(st.finish == FinishReason::kStop);
  CHECK(st.text == "");  // "E" was held back and belongs to the stop string
  // A stop token as the last allowed token: stop (the model ended by itself).
  StopMatcher t(p, kEos, kVocab);
  (void)t.feed(kText, "a");
  (void)t.feed(kText, "b");
  CHECK(t.feed(1, "").finish == FinishReason::kStop);
}

TEST_CASE("min_tokens: stop tokens and stop strings count only after it", "[unit][sampling]") {
  StopParams p;
  p.stop = {"ab"};
  p.stop_token_ids = {7};
  p.min_tokens = 3;
  StopMatcher m(p, kEos, kVocab);
  // Tokens 1-3: EOS, a stop token and a whole stop string do not end the sequence.
  auto a = m.feed(1, "x");
  CHECK(a.finish == FinishReason::kNone);
  auto b = m.feed(7, "ab");
  CHECK(b.finish == FinishReason::kNone);
  auto c = m.feed(kText, "a");  // held back: it may start "ab"
  CHECK(c.finish == FinishReason::kNone);
  CHECK(a.text + b.text + c.text == "xab");
  // Token 4 completes "ab" (its start was in token 3): matched, as vLLM checks the tail.
  auto d = m.feed(kText, "b!");
  CHECK(d.finish == FinishReason::kStop);
  CHECK(d.stop_string_index == 0);
  CHECK(d.text.empty());
  // After min_tokens a stop token ends it as usual.
  StopMatcher m2(p, kEos, kVocab);
  for (int i = 0; i < 3; ++i) CHECK(m2.feed(7, "").finish == FinishReason::kNone);
  CHECK(m2.feed(7, "").finish == FinishReason::kStop);
  // max_tokens still applies.
  p.max_tokens = 3;
  StopMatcher m3(p, kEos, kVocab);
  CHECK(m3.feed(kText, "q").finish == FinishReason::kNone);
  CHECK(m3.feed(kText, "q").finish == FinishReason::kNone);
  CHECK(m3.feed(kText, "q").finish == FinishReason::kLength);
}

TEST_CASE("StopParams rejections name the field", "[unit][sampling]") {
  auto rejected = [](const StopParams& p, const std::string& needle) {
    const dsv41::Status st = p.validate();
    INFO(st.to_string());
    REQUIRE(!st.is_ok());
    CHECK(st.code() == dsv41::ErrorCode::kInvalidArgument);
    CHECK_THAT(st.message(), Catch::Contains(needle));
    try {
      StopMatcher m(p, kEos, kVocab);
      FAIL("StopMatcher accepted invalid params");
    } catch (const dsv41::detail::Failure& f) {
      CHECK(f.message() == st.message());
    }
  };
  CHECK(StopParams{}.validate().is_ok());
  StopParams a;
  a.stop = {"ok", ""};
  rejected(a, "StopParams.stop[1] is empty");
  StopParams b;
  b.stop = {"ab\xC3"};
  rejected(b, "StopParams.stop[0] is not valid UTF-8 (byte 2 of 3)");
  StopParams b2;
  b2.stop = {"\xED\xA0\x80"};  // a UTF-16 surrogate encoded as UTF-8
  rejected(b2, "StopParams.stop[0] is not valid UTF-8 (byte 0 of 3)");
  StopParams c;
  c.stop_token_ids = {3, -2};
  rejected(c, "StopParams.stop_token_ids[1] = -2 must be >= 0");
  StopParams d;
  d.max_tokens = 0;
  rejected(d, "StopParams.max_tokens = 0 must be >= 1");
  StopParams e;
  e.min_tokens = -1;
  rejected(e, "StopParams.min_tokens = -1 must be >= 0");
  e.min_tokens = 5;
  e.max_tokens = 4;
  rejected(e, "StopParams.min_tokens = 5 must be <= max_tokens = 4");
  e.max_tokens = dsv41::kNoTokenLimit;
  CHECK(e.validate().is_ok());
}

TEST_CASE("StopMatcher errors: vocabulary and use after finish", "[unit][sampling]") {
  auto fails = [](auto fn, const std::string& needle) {
    try {
      fn();
      FAIL("no error");
    } catch (const dsv41::detail::Failure& f) {
      CHECK(f.code() == dsv41::ErrorCode::kInvalidArgument);
      CHECK_THAT(f.message(), Catch::Contains(needle));
    }
  };
  StopParams p;
  p.stop_token_ids = {100};
  fails([&] { StopMatcher m(p, kEos, kVocab); },
        "StopParams.stop_token_ids[0] = 100 is outside the vocabulary [0, 100)");
  const std::vector<int32_t> bad_eos = {-1};
  fails([&] { StopMatcher m(StopParams{}, bad_eos, kVocab); }, "EOS token id -1");
  StopMatcher m(StopParams{}, kEos, kVocab);
  fails([&] { (void)m.feed(100, "x"); }, "generated token 100 is outside the vocabulary");
  (void)m.feed(1, "");
  fails([&] { (void)m.feed(kText, "x"); }, "after the sequence finished");
}

TEST_CASE("first_invalid_utf8 follows RFC 3629", "[unit][sampling]") {
  CHECK(first_invalid_utf8("plain") == 5);
  CHECK(first_invalid_utf8("é終\xF0\x9F\x9B\x91") == 9);
  CHECK(first_invalid_utf8("a\xC0\xAF") == 1);         // overlong '/'
  CHECK(first_invalid_utf8("ab\xE0\x80\xAF") == 2);    // overlong 3-byte
  CHECK(first_invalid_utf8("\xF4\x90\x80\x80") == 0);  // > U+10FFFF
  CHECK(first_invalid_utf8("x\x80") == 1);             // stray continuation
  CHECK(first_invalid_utf8("x\xE3\x81") == 1);         // truncated
}
