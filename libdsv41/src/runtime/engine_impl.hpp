// Engine::Impl and its EngineRequest: the scheduler's state, shared by engine.cpp (admission,
// scheduling, plain steps, the public calls) and engine_speculative.cpp (speculative steps).
// Internal.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <list>
#include <mutex>
#include <optional>
#include <thread>

#include "core/check.hpp"
#include "core/log.hpp"
#include "core/tunables.hpp"
#include "dsv41/engine.hpp"
#include "dsv41/export.hpp"
#include "kv/packed_formats.hpp"
#include "kv/page_pool.hpp"
#include "runtime/model_impl.hpp"
#include "runtime/prefix_cache.hpp"
#include "sampling/device_sample_plan.hpp"
#include "sampling/stop_matcher.hpp"
#include "speculative/ngram_drafter.hpp"
#include "speculative/round.hpp"

namespace dsv41 {

// Positions a sequence can roll back (speculative verification); sized into every window ring.
constexpr int kMaxRollback = 16;

// One submitted request and everything the scheduler keeps for it.
struct DSV41_INTERNAL EngineRequest {
  RequestId id = 0;
  GenerationRequest req;
  EventCallback cb;
  int64_t reserved_bytes = 0;
  std::optional<Session::Impl> session;
  std::optional<Sampler> sampler;
  std::optional<sampling::StopMatcher> stop;
  std::optional<StreamDetokenizer> detok;
  // Images (req.images), laid out for prefill: flags [prompt] (1 = span position), the span rows
  // in prompt order [n_flagged, hidden], flagged positions before each prompt position
  // [prompt + 1], and the prefix cache's keys. Empty without images.
  std::vector<uint8_t> image_flags;
  std::vector<float> image_rows;
  std::vector<int64_t> flagged_before;
  std::vector<ImageKey> image_keys;
  int64_t prefilled = 0;                                   // prompt tokens already in the state
  std::vector<GenerationEvent::PromptPosition> prompt_lp;  // prompt_logprobs, filled by prefill
  int64_t cached = 0;                                      // of which served from the prefix cache
  int32_t pending_token = -1;                              // sampled, not yet appended
  std::optional<sampling::Xoshiro256StarStar> spec_rng;    // acceptance draws (speculative_tokens)
  std::vector<int32_t> min_tokens_stops;  // the ids min_tokens bans (stop_token_ids, EOS)
  int64_t generated = 0;
  bool cancelled = false;
  bool finished = false;  // the kFinished event was sent
  Status admit_error;     // making its state failed at admission
};

struct DSV41_INTERNAL Engine::Impl {
  std::shared_ptr<const Model::Impl> model;
  EngineParams params;
  int64_t max_context = 0;
  // One page pool of kv_bytes shared by every sequence and prefix-cache entry (docs/state.md).
  std::shared_ptr<kv::PagePool> pool;
  Logger logger;  // DSV41_LOG_LEVEL
  // Prompt lookup (speculative_tokens > 0); stateless, used on the scheduler thread only.
  speculative::NgramDrafter drafter{NgramDrafterParams{}};
  std::vector<int32_t> draft_context;  // the drafter's input, reused

  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<EngineRequest>> waiting;
  std::list<std::unique_ptr<EngineRequest>> running;
  PrefixCache cache;
  EngineStats stats;
  RequestId next_id = 1;
  bool stopping = false;
  std::thread thread;
  // Set by shutdown() called from a callback on the scheduler thread: the thread cannot join
  // itself, so it is detached and frees this Impl when run() returns.
  bool owns_itself = false;

  // Pool bytes of a sequence holding `tokens` tokens: its window rings (with the rollback slots)
  // plus whole pages of every KV source's caches. An upper bound of what the pool hands out.
  int64_t pool_bytes(int64_t tokens) const {
    const ModelConfig& c = model->transformer->config();  // the CUDA state has the same layout
    const TextConfig& t = c.text;
    int64_t bytes = int64_t{t.num_hidden_layers} * (t.sliding_window + kMaxRollback) *
                    kv::packed_bytes(kv::EntryFormat::kWindowFp8, t.head_dim);
    // DSpark context ring (model/dspark/dspark_context.hpp): fp32 rows per stage, host memory.
    if (const DsparkWeights* d = model->transformer->weights().dspark.get())
      bytes += static_cast<int64_t>(d->stages.size()) * (t.sliding_window + kMaxRollback) *
               t.head_dim * static_cast<int64_t>(sizeof(float));
    for (const LayerRole& r : c.roles) {
      if (!r.kv_source) continue;
      const int64_t entries = tokens / r.ratio;
      const int64_t pages = (entries + kv::kEntriesPerPage - 1) / kv::kEntriesPerPage;
      bytes += pages * static_cast<int64_t>(pool->page_bytes());
    }
    return bytes;
  }
  // Positions a request can occupy: prompt + max_tokens, capped by the context (compared before
  // adding: max_tokens near INT64_MAX overflowed into a negative reservation).
  int64_t reserve_tokens(const GenerationRequest& r) const {
    const int64_t len = static_cast<int64_t>(r.prompt.size());
    return r.stop.max_tokens == kNoTokenLimit || r.stop.max_tokens >= max_context - len
               ? max_context
               : len + r.stop.max_tokens;
  }
  int64_t reserve_for(const GenerationRequest& r) const { return pool_bytes(reserve_tokens(r)); }
  // Keeps a copy of `state` in the prefix cache if it fits the budget next to what is reserved
  // (evicting older entries first), so the copy can never exhaust the pool. Holds mu.
  void cache_copy_locked(const SequenceHandle& state, const std::vector<ImageKey>& images) {
    const int64_t bytes = pool_bytes(state->pos());
    while (used_bytes() + bytes > params.kv_bytes && cache.evict_one()) {
    }
    if (used_bytes() + bytes > params.kv_bytes) return;
    // The copy allocates (device memory on CUDA): failing it only loses the cache entry.
    Status st =
        detail::capture_status([&] { cache.insert(state.clone(state->pos()), bytes, images); });
    if (!st.is_ok())
      logger.log(LogLevel::kWarn, "prefix cache: copy of {} tokens dropped: {}", state->pos(),
                 st.to_string());
  }
  int64_t used_bytes() const {
    int64_t u = cache.bytes();
    for (const auto& r : running)
      if (!r->finished) u += r->reserved_bytes;  // a finished one is released at its event
    return u;
  }

  // Checks request.images against the prompt and the backend and fills r's image fields
  // (engine_images.cpp). kInvalidArgument naming GenerationRequest.images[i], kUnsupported.
  Status lay_out_images(const GenerationRequest& request, EngineRequest& r) const;
  void run();
  // Requests whose state could not be made go to *failed (finished by the caller, unlocked).
  bool admit_locked(std::vector<std::unique_ptr<EngineRequest>>* failed);
  void step(EngineRequest& r, int64_t* budget);
  // A decode step of r as one speculative round: the pending token and the drafts in one
  // forward, then every kept token delivered in order. False (nothing done) when the drafter
  // proposes nothing or no draft fits: the caller runs the plain step.
  bool speculative_step(EngineRequest& r);
  // Streams the sampled (and sampler-accepted) token `id` of r; true when r finished with it.
  // surplus_rows: positions appended after id's row that plain decoding would not hold, rolled
  // back when r finishes here.
  // raw_logits: the position's logits [vocab] before any sampling stage, for the event's
  // log-probabilities (requests with top_logprobs >= 0; null otherwise).
  bool deliver(EngineRequest& r, int32_t id, int64_t surplus_rows = 0,
               const float* raw_logits = nullptr);
  void finish(EngineRequest& r, FinishReason reason, Status status, std::string tail = {});
};

}  // namespace dsv41
