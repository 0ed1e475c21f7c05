// Session: one sequence driven synchronously by the caller (prefill, decode, logits). The Engine
// (engine.hpp) schedules many of them; use a Session directly for scoring and tests. Not
// thread-safe: one thread at a time per Session. Keeps its Model alive.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "dsv41/export.hpp"
#include "dsv41/model.hpp"
#include "dsv41/status.hpp"

namespace dsv41 {

struct SessionParams {
  int64_t max_context = 262144;  // tokens; at most the model's max_position_embeddings
  int64_t chunk_tokens = 2048;   // prefill chunk (max_batched_tokens); 0 = one chunk
  Status validate() const;
};

class DSV41_API Session {
 public:
  [[nodiscard]] static Result<Session> create(const Model& model, const SessionParams& params = {});

  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session();

  // Appends `ids` at position() in chunks of chunk_tokens and returns the logits of the last
  // appended token [vocab], or of every appended token [n, vocab] when all_logits.
  // Errors: kInvalidArgument (empty, id outside the vocabulary: nothing committed),
  // kContextOverflow (position() + n > max_context: nothing committed). A failure inside the
  // forward pass itself (kOutOfMemory, kInternal) resets the session to position 0.
  [[nodiscard]] Result<std::vector<float>> append(std::span<const int32_t> ids,
                                                  bool all_logits = false);
  // Appends an image span (Model::encode_image of this session's model): positions() positions
  // carrying the config's image_token_id, with the image embeddings as their input (the router
  // uses bias_vl there; Engram skips them). Returns the logits of the span's last position
  // [vocab], or of every position with all_logits. One forward, whatever chunk_tokens.
  // Errors: kInvalidArgument (an embedding of another width), kContextOverflow (nothing
  // committed), kUnsupported on a backend that cannot take input embeddings (names it).
  [[nodiscard]] Result<std::vector<float>> append_image(const ImageEmbedding& image,
                                                        bool all_logits = false);
  int64_t position() const;
  // The most positions this session can hold: min(SessionParams.max_context, the model's
  // max_position_embeddings).
  int64_t max_context() const;
  const std::vector<int32_t>& tokens() const;
  // Undoes the last n appended positions exactly (speculative decoding): appending the same
  // tokens again gives bit-identical logits. kInvalidArgument when n exceeds the rollback depth
  // (16 positions) or what was appended since the last rollback; nothing changes then.
  Status rollback(int64_t n);
  // Back to an empty sequence (position 0).
  void reset();
  // An independent copy of this sequence's state (prefix reuse, speculative branches).
  [[nodiscard]] Result<Session> fork() const;

  struct Impl;

 private:
  friend class SpeculativeDecoder;  // drafts from the sequence's state (DSpark)
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dsv41
