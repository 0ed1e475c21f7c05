// Engine: the request scheduler. Requests are submitted (token prompt + sampling + stop rules),
// run up to max_sequences at a time with chunked prefill and continuous batching (new requests
// join between steps), and stream events to a callback. Owns one scheduler thread.
// Thread-safety: submit/cancel/stats/shutdown may be called from any thread. Callbacks run on
// the scheduler thread, one at a time; they must not block. shutdown() (or destroying the
// Engine) from a callback returns at once: the scheduler ends the other requests with kAborted
// events after that callback returns, then frees itself (the Model stays alive until then).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dsv41/export.hpp"
#include "dsv41/model.hpp"
#include "dsv41/sampler.hpp"
#include "dsv41/status.hpp"
#include "dsv41/stop.hpp"

namespace dsv41 {

struct EngineParams {
  int max_sequences = 2;              // sequences advanced per step (reference: 2)
  int64_t max_batched_tokens = 2048;  // prompt tokens per step over all sequences (chunked prefill)
  int64_t max_context = 262144;       // prompt + generated tokens per sequence
  int64_t kv_bytes = 2700000000;      // state budget in the model's quantised formats (KV_BYTES)
  int prefix_cache_entries = 4;       // finished prefixes kept for reuse (0 = off)
  int max_queue = 256;                // waiting requests before submit() answers kOutOfMemory
  // Speculative decoding (docs/speculative.md): drafts verified per decode step,
  // 0 = off, else 1..15 drafts (SpeculativeParams.max_draft_tokens). The tokens are those of
  // plain decoding (greedy: identical on the CPU backend, see docs/speculative.md for CUDA;
  // sampling: the same distribution). A step with no draft is a plain step. Requests with a
  // TokenConstraint decode one token per step.
  int speculative_tokens = 0;
  // Where the drafts come from: "ngram" (prompt lookup) or "dspark" (the model's draft module;
  // needs ModelParams.dspark; its block of dspark_block_size tokens caps speculative_tokens).
  std::string speculative_method = "ngram";
  // dspark: verify only the drafts whose survival Π c_i is >= this (DsparkDrafterParams).
  float speculative_confidence = 0.0f;
  Status validate() const;
};

// A per-request restriction of the sampled tokens (constrained tool_choice, docs/sampling.md).
// Called on the engine thread only: mask() before each sample, accept() with the sampled token.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logit of every token that may not come next to -inf (leaves at least one).
  virtual void mask(std::span<float> logits) = 0;
  virtual void accept(int32_t token) = 0;
};

// An image in a prompt (Model::encode_image): its span fills prompt[offset, offset +
// image->positions()), every one of which must be the config's image_token_id (a chat prompt's
// <｜deepseek_image｜> placeholder repeated positions() times). docs/vision.md.
struct PromptImage {
  int64_t offset = 0;
  std::shared_ptr<const ImageEmbedding> image;
};

// Most alternatives a token event can carry (vLLM's default max_logprobs and OpenAI's chat
// top_logprobs limit).
inline constexpr int kMaxTopLogprobs = 20;

struct GenerationRequest {
  std::vector<int32_t> prompt;
  // In prompt order, not overlapping. Needs a backend that takes image embeddings (CPU).
  std::vector<PromptImage> images;
  SamplerParams sampling;
  StopParams stop;
  std::shared_ptr<TokenConstraint> constraint;  // null = unconstrained
  // -1: no log-probabilities. 0..kMaxTopLogprobs: every kToken event carries the token's
  // log-probability and this many most likely alternatives (TokenLogprob: the model's raw
  // distribution, docs/sampling.md "Log-probabilities"). Such a request reads its logits on the
  // host (no device sampling on CUDA).
  int top_logprobs = -1;
  // -1: none. 0..kMaxTopLogprobs: the first kToken event carries prompt_logprobs, the
  // log-probability of every prompt token after the first given the tokens before it, with this
  // many alternatives (vLLM's prompt_logprobs; the completions API's echo + logprobs). Such a
  // request computes every prompt row's logits (no prefix-cache reuse, no device sampling).
  int prompt_logprobs = -1;
};

using RequestId = uint64_t;

struct GenerationEvent {
  enum class Kind { kToken, kFinished };
  RequestId id = 0;
  Kind kind = Kind::kToken;
  int32_t token = -1;  // kToken: the sampled token
  std::string text;    // newly releasable text (UTF-8 complete, stop strings held back / cut)
  // kFinished: reason kStop / kLength with status ok, or status kCancelled / an error.
  FinishReason finish = FinishReason::kNone;
  Status status;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
  int64_t completion_tokens = 0;
  // kToken of a request with top_logprobs >= 0: the sampled token's log-probability and the
  // top_logprobs most likely tokens at its position, descending (ties: lower id first).
  std::optional<TokenLogprob> logprob;
  std::vector<TokenLogprob> top_logprobs;
  // The first kToken event of a request with prompt_logprobs >= 0: for prompt positions
  // 1..n-1 (entry i-1 for position i), the prompt token's log-probability and the most likely
  // tokens at that position. Empty on every other event.
  struct PromptPosition {
    TokenLogprob token;
    std::vector<TokenLogprob> top;
  };
  std::vector<PromptPosition> prompt_logprobs;
};

using EventCallback = std::function<void(const GenerationEvent&)>;

struct EngineStats {
  int64_t waiting = 0;
  int64_t running = 0;
  int64_t kv_bytes_used = 0;  // reserved by running sequences + prefix cache
  int64_t kv_bytes_total = 0;
  int64_t prefix_cache_hits = 0;     // prompt tokens served from the prefix cache
  int64_t prefix_cache_queries = 0;  // prompt tokens looked up in it (every admitted prompt)
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int64_t spec_draft_tokens_total = 0;     // drafts verified (speculative_tokens > 0)
  int64_t spec_accepted_tokens_total = 0;  // of them, accepted
};

class DSV41_API Engine {
 public:
  [[nodiscard]] static Result<Engine> create(const Model& model, const EngineParams& params = {});
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine();  // shutdown()

  // Queues a request. Errors (nothing queued): kInvalidArgument naming the field (empty prompt,
  // id outside the vocabulary, sampling/stop params, an image out of place), kUnsupported
  // (images on a backend that cannot take them), kContextOverflow (prompt does not fit
  // max_context, or its minimal state exceeds kv_bytes), kOutOfMemory (the queue is full),
  // kAborted (after shutdown, also one made from a callback, and on a moved-from Engine). Every
  // accepted request ends with exactly one kFinished event.
  [[nodiscard]] Result<RequestId> submit(GenerationRequest request, EventCallback on_event);
  // Ends a waiting or running request with status kCancelled and frees its state.
  // kNotFound when the id is unknown or already finished (or the engine is shut down).
  Status cancel(RequestId id);
  EngineStats stats() const;  // all zero after shutdown
  // Cancels everything, joins the scheduler thread. Idempotent. Move-assigning onto a running
  // Engine shuts it down first.
  void shutdown();

  struct Impl;

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dsv41
