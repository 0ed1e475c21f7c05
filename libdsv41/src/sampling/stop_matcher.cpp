// StopMatcher: stop tokens, stop strings across token boundaries, max_tokens (see
// stop_matcher.hpp for the rules).
#include "sampling/stop_matcher.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace dsv41::sampling {

namespace {

// Length of the UTF-8 sequence a lead byte starts; 0 for a continuation or invalid byte.
size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Bytes at the end of `text` that start a multibyte sequence whose remaining bytes have not
// arrived yet (0..3).
size_t incomplete_utf8_tail(std::string_view text) {
  for (size_t k = 1; k <= 3 && k <= text.size(); ++k) {
    const auto b = static_cast<unsigned char>(text[text.size() - k]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const size_t len = utf8_sequence_length(b);
    return len > k ? k : 0;
  }
  return 0;
}

}  // namespace

size_t first_invalid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const size_t len = utf8_sequence_length(lead);
    if (len == 0 || i + len > text.size()) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return i;
    }
    if (len >= 3) {
      const auto second = static_cast<unsigned char>(text[i + 1]);
      if (lead == 0xE0 && second < 0xA0) return i;  // overlong 3-byte form
      if (lead == 0xED && second > 0x9F) return i;  // UTF-16 surrogate
      if (lead == 0xF0 && second < 0x90) return i;  // overlong 4-byte form
      if (lead == 0xF4 && second > 0x8F) return i;  // above U+10FFFF
    }
    i += len;
  }
  return text.size();
}

StopMatcher::StopMatcher(const StopParams& params, std::span<const int32_t> eos_token_ids,
                         int64_t vocab_size)
    : params_(params),
      eos_ids_(eos_token_ids.begin(), eos_token_ids.end()),
      vocab_size_(vocab_size) {
  const Status st = params_.validate();
  DSV41_CHECK(st.is_ok(), kInvalidArgument, "{}", st.message());
  for (size_t i = 0; i < params_.stop_token_ids.size(); ++i) {
    DSV41_CHECK(params_.stop_token_ids[i] < vocab_size_, kInvalidArgument,
                "StopParams.stop_token_ids[{}] = {} is outside the vocabulary [0, {})", i,
                params_.stop_token_ids[i], vocab_size_);
  }
  for (int32_t id : eos_ids_) {
    DSV41_CHECK(id >= 0 && id < vocab_size_, kInvalidArgument,
                "EOS token id {} is outside the vocabulary [0, {})", id, vocab_size_);
  }
  for (const std::string& s : params_.stop) max_stop_len_ = std::max(max_stop_len_, s.size());
}

bool StopMatcher::is_stop_token(int32_t token) const {
  const auto& ids = params_.stop_token_ids;
  if (std::find(ids.begin(), ids.end(), token) != ids.end()) return true;
  return !params_.ignore_eos &&
         std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end();
}

size_t StopMatcher::held_stop_prefix() const {
  const std::string_view pending = std::string_view(buffer_).substr(emitted_);
  size_t longest = 0;
  for (const std::string& s : params_.stop) {
    // Proper prefixes only: a whole stop string would have been matched already.
    for (size_t len = std::min(pending.size(), s.size() - 1); len > longest; --len) {
      if (pending.substr(pending.size() - len) == std::string_view(s).substr(0, len)) {
        longest = len;
        break;
      }
    }
  }
  return longest;
}

void StopMatcher::trim() {
  const size_t context = max_stop_len_ > 0 ? max_stop_len_ - 1 : 0;
  const size_t keep_from = std::min(emitted_, buffer_.size() - std::min(buffer_.size(), context));
  buffer_.erase(0, keep_from);
  emitted_ -= keep_from;
}

StopStep StopMatcher::feed(int32_t token, std::string_view text) {
  DSV41_CHECK(!finished_, kInvalidArgument,
              "StopMatcher fed token {} after the sequence finished ({} tokens)", token,
              num_tokens_);
  DSV41_CHECK(token >= 0 && token < vocab_size_, kInvalidArgument,
              "generated token {} is outside the vocabulary [0, {})", token, vocab_size_);
  ++num_tokens_;
  StopStep step;
  // min_tokens: no stop rule but max_tokens before then (the sampler keeps stop tokens out).
  const bool may_stop = num_tokens_ > params_.min_tokens;
  if (may_stop && is_stop_token(token)) {
    if (params_.include_stop_str_in_output) buffer_.append(text);
    step.text = buffer_.substr(emitted_);
    step.finish = FinishReason::kStop;
    step.stop_token = token;
    finished_ = true;
    return step;
  }

  const size_t old_size = buffer_.size();
  buffer_.append(text);
  // Matches that end inside the new text; anything ending earlier was checked by earlier calls.
  size_t best_end = SIZE_MAX, best_start = SIZE_MAX;
  for (size_t j = 0; may_stop && j < params_.stop.size(); ++j) {
    const std::string& s = params_.stop[j];
    const size_t from = old_size + 1 > s.size() ? old_size + 1 - s.size() : 0;
    const size_t pos = buffer_.find(s, from);
    if (pos == std::string::npos) continue;
    const size_t end = pos + s.size();
    if (end < best_end || (end == best_end && pos < best_start)) {
      best_end = end;
      best_start = pos;
      step.stop_string_index = static_cast<int32_t>(j);
    }
  }
  if (step.stop_string_index >= 0) {
    const size_t cut = params_.include_stop_str_in_output ? best_end : best_start;
    DSV41_CHECK(cut >= emitted_, kInternal,
                "stop string [{}] starts at {} inside text already emitted (up to {})",
                step.stop_string_index, best_start, emitted_);
    step.text = buffer_.substr(emitted_, cut - emitted_);
    step.finish = FinishReason::kStop;
    finished_ = true;
    return step;
  }
  if (params_.max_tokens != kNoTokenLimit && num_tokens_ >= params_.max_tokens) {
    step.text = buffer_.substr(emitted_);
    step.finish = FinishReason::kLength;
    finished_ = true;
    return step;
  }

  size_t held = incomplete_utf8_tail(std::string_view(buffer_).substr(emitted_));
  if (!params_.include_stop_str_in_output) held = std::max(held, held_stop_prefix());
  const size_t safe = buffer_.size() - held;
  step.text = buffer_.substr(emitted_, safe - emitted_);
  emitted_ = safe;
  trim();
  return step;
}

std::string StopMatcher::flush() {
  std::string rest = finished_ ? std::string() : buffer_.substr(emitted_);
  finished_ = true;
  buffer_.clear();
  emitted_ = 0;
  return rest;
}

}  // namespace dsv41::sampling
