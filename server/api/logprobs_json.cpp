#include "api/logprobs_json.hpp"

#include <cmath>
#include <set>

namespace dsv41::server {

namespace {

// JSON has no -inf; vLLM reports a ruled-out token as -9999.0. NaN (a non-finite logits row)
// stays null.
double json_logprob(float x) { return std::isinf(x) && x < 0 ? -9999.0 : static_cast<double>(x); }

void write_entry(json::Writer& w, TokenTexts& texts, const TokenLogprob& t) {
  const TokenTexts::Text& tt = texts.get(t.token);
  w.key("token").value(tt.text).key("logprob").value(json_logprob(t.logprob));
  w.key("bytes").begin_array();
  for (unsigned char c : tt.bytes) w.value(static_cast<int64_t>(c));
  w.end_array();
}

// Code points of UTF-8 text (OpenAI's text_offset counts characters, as Python's len does).
int64_t characters(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

}  // namespace

const TokenTexts::Text& TokenTexts::get(int32_t id) {
  auto it = cache_.find(id);
  if (it != cache_.end()) return it->second;
  Text t;
  const int32_t one[1] = {id};
  Result<std::string> text = backend_->detokenize(one);
  Result<std::string> bytes = backend_->token_bytes(id);
  // An id the tokenizer has no token for (the model's vocabulary may be padded past it).
  t.text = text ? *text : "token_id:" + std::to_string(id);
  if (bytes) t.bytes = *bytes;
  return cache_.emplace(id, std::move(t)).first->second;
}

std::optional<TokenLogprobs> logprobs_of(const GenerationEvent& ev) {
  if (!ev.logprob) return std::nullopt;
  return TokenLogprobs{*ev.logprob, ev.top_logprobs};
}

void write_chat_logprobs(json::Writer& w, TokenTexts& texts,
                         const std::vector<TokenLogprobs>& tokens) {
  w.begin_object().key("content").begin_array();
  for (const TokenLogprobs& t : tokens) {
    w.begin_object();
    write_entry(w, texts, t.chosen);
    w.key("top_logprobs").begin_array();
    for (const TokenLogprob& alt : t.top) {
      w.begin_object();
      write_entry(w, texts, alt);
      w.end_object();
    }
    w.end_array().end_object();
  }
  w.end_array().end_object();
}

void write_completion_logprobs(json::Writer& w, TokenTexts& texts,
                               const std::vector<TokenLogprobs>& tokens, bool with_top,
                               int64_t* offset) {
  w.begin_object();
  w.key("tokens").begin_array();
  for (const TokenLogprobs& t : tokens) w.value(texts.get(t.chosen.token).text);
  w.end_array();
  w.key("token_logprobs").begin_array();
  for (const TokenLogprobs& t : tokens)
    t.no_value ? (void)w.null() : (void)w.value(json_logprob(t.chosen.logprob));
  w.end_array();
  w.key("top_logprobs").begin_array();
  for (const TokenLogprobs& t : tokens) {
    if (!with_top || t.no_value) {
      w.null();
      continue;
    }
    // A JSON object cannot repeat a key: the first of equal texts is kept (the chosen token's).
    std::set<std::string> seen;
    w.begin_object();
    auto put = [&](const TokenLogprob& x) {
      const std::string& text = texts.get(x.token).text;
      if (seen.insert(text).second) w.key(text).value(json_logprob(x.logprob));
    };
    put(t.chosen);
    for (const TokenLogprob& alt : t.top) put(alt);
    w.end_object();
  }
  w.end_array();
  w.key("text_offset").begin_array();
  for (const TokenLogprobs& t : tokens) {
    w.value(*offset);
    *offset += characters(texts.get(t.chosen.token).text);
  }
  w.end_array();
  w.end_object();
}

}  // namespace dsv41::server
