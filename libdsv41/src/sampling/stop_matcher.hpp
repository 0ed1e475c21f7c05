// Incremental stop detection for one sequence: fed each generated token with the text it
// detokenized to, it decides when the sequence ends (FinishReason) and which text is safe to
// stream now. Rules (docs/sampling.md §Stop rules, vLLM v1 check_stop + detokenizer):
//  - A stop token (EOS unless ignore_eos, or one of stop_token_ids) ends the sequence; its text
//    is dropped unless include_stop_str_in_output, and stop strings are not searched in it.
//  - Stop strings are matched on the byte stream, across token boundaries. The match that
//    completes first (smallest end offset; equal ends: the earliest start) wins, so the result
//    does not depend on how the text was split into pieces. Output ends before the match (or
//    after it with include_stop_str_in_output); text after it is dropped.
//  - Otherwise the max_tokens-th token ends the sequence with kLength and all text is emitted.
//  - While min_tokens or fewer tokens were fed, neither stop tokens nor stop strings end the
//    sequence (vLLM checks stop strings only once more than min_tokens were generated, on the
//    text the newest token added, so a match that ended earlier never counts).
//  - While running, the longest suffix that is a proper prefix of some stop string is held back
//    (unless include_stop_str_in_output, where nothing of a match is ever dropped), and so are
//    the bytes of a UTF-8 sequence that is not complete yet, so every emitted chunk is whole
//    characters of the final output.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dsv41/stop.hpp"

namespace dsv41::sampling {

// Offset of the first byte that starts an invalid or truncated UTF-8 sequence (RFC 3629: no
// overlongs, no surrogates, <= U+10FFFF); text.size() when the whole text is valid.
size_t first_invalid_utf8(std::string_view text);

struct StopStep {
  std::string text;  // append to the output now (may be empty)
  FinishReason finish = FinishReason::kNone;
  int32_t stop_token = -1;         // kStop by token: its id
  int32_t stop_string_index = -1;  // kStop by string: index into StopParams::stop
};

class StopMatcher {
 public:
  // `params` is validated here (throws kInvalidArgument naming the field), as are the ids in
  // stop_token_ids and eos_token_ids against [0, vocab_size).
  StopMatcher(const StopParams& params, std::span<const int32_t> eos_token_ids, int64_t vocab_size);

  // One generated token and its text piece. Throws kInvalidArgument for a token outside the
  // vocabulary or a call after the sequence finished.
  StopStep feed(int32_t token, std::string_view text);
  // The sequence ended for a reason outside the matcher (context full, cancelled): returns the
  // text still held back and marks the matcher finished.
  std::string flush();

  bool finished() const { return finished_; }
  int64_t num_tokens() const { return num_tokens_; }
  // Stop rules apply from the next token on whatever min_tokens said (the Engine lifts min_tokens
  // when a constraint leaves only stop tokens: the output is complete).
  void end_min_tokens() { params_.min_tokens = 0; }

 private:
  bool is_stop_token(int32_t token) const;
  // Longest suffix of buffer_[emitted_, end) that is a proper prefix of some stop string.
  size_t held_stop_prefix() const;
  void trim();

  StopParams params_;
  std::vector<int32_t> eos_ids_;
  int64_t vocab_size_;
  size_t max_stop_len_ = 0;
  std::string buffer_;  // recent text: unemitted bytes plus max_stop_len_ - 1 bytes of context
  size_t emitted_ = 0;  // buffer_[0, emitted_) has been returned already
  int64_t num_tokens_ = 0;
  bool finished_ = false;
};

}  // namespace dsv41::sampling
