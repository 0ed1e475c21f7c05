// Engine: scheduler thread, admission against the state budget, chunked prefill, continuous
// batching, prefix reuse, streaming through StreamDetokenizer + StopMatcher.
#include <algorithm>
#include <cmath>

#include "runtime/engine_impl.hpp"
#include "sampling/logprobs.hpp"

namespace dsv41 {

void Engine::Impl::finish(EngineRequest& r, FinishReason reason, Status status, std::string tail) {
  GenerationEvent ev;
  ev.id = r.id;
  ev.kind = GenerationEvent::Kind::kFinished;
  ev.finish = reason;
  ev.status = std::move(status);
  ev.text = std::move(tail);
  ev.prompt_tokens = static_cast<int64_t>(r.req.prompt.size());
  ev.cached_tokens = r.cached;
  ev.completion_tokens = r.generated;
  {
    std::lock_guard<std::mutex> lock(mu);
    r.finished = true;
    // The finished sequence moves into the cache: on the CPU its own pages (no allocation); a
    // CUDA sequence is re-made at its length first (its capacity was the request's reserve).
    if (r.session && r.session->state && ev.status.is_ok() && params.prefix_cache_entries > 0) {
      SequenceHandle& st = r.session->state;
      const int64_t pos = st->pos();
      const int64_t bytes = pool_bytes(pos);
      Status moved = detail::capture_status([&] {
        const bool shrink = st->preallocated() && st->max_context() > pos;
        cache.insert(shrink ? st.clone(pos) : std::move(st), bytes, r.image_keys);
      });
      if (!moved.is_ok())  // only the cache entry is lost; the request itself succeeded
        logger.log(LogLevel::kWarn, "prefix cache: entry of {} tokens dropped: {}", pos,
                   moved.to_string());
    }
    r.session.reset();
  }
  r.cb(ev);
}

// Runs one scheduling unit of `r`: a prefill chunk (within *budget) or one decode token.
void Engine::Impl::step(EngineRequest& r, int64_t* budget) {
  const int64_t n_prompt = static_cast<int64_t>(r.req.prompt.size());
  // The step that samples runs the chain where the logits are (the CUDA backend: one 16-byte
  // result instead of the vocab's logits), with the same tokens (docs/sampling.md "Device
  // path"). A constraint masks host logits, so such requests keep the host path.
  const bool on_device = model->backend->samples_on_device() && !r.req.constraint &&
                         r.req.top_logprobs < 0 && r.req.prompt_logprobs < 0;
  const bool prompt_rows = r.req.prompt_logprobs >= 0;  // every prefill row's logits
  std::span<const int32_t> ids;
  const int32_t pending = r.pending_token;
  if (r.prefilled < n_prompt) {
    if (*budget <= 0) return;
    const int64_t n = std::min(n_prompt - r.prefilled, *budget);
    ids = std::span<const int32_t>(r.req.prompt.data() + r.prefilled, static_cast<size_t>(n));
  } else {
    ids = std::span<const int32_t>(&pending, 1);
  }
  const bool prefill = r.prefilled < n_prompt;
  if (!prefill && params.speculative_tokens > 0 && !r.req.constraint && speculative_step(r)) return;
  const bool samples = !prefill || r.prefilled + static_cast<int64_t>(ids.size()) == n_prompt;
  std::vector<float> logits;
  std::optional<sampling::SamplePlan> plan;
  sampling::DeviceSampleOutcome outcome;
  if (samples && on_device && (!prefill || r.image_flags.empty())) {
    plan = sampling::DeviceSampling::plan(*r.sampler);
    outcome = session_append_sample(*r.session, ids, *plan);
  } else if (prefill && !r.image_flags.empty()) {
    // This chunk's flags and the rows of its flagged positions.
    const int64_t b = r.prefilled, e = b + static_cast<int64_t>(ids.size());
    const int64_t D = model->info.hidden_size;
    logits = session_append(
        *r.session, ids, prompt_rows,
        std::span<const uint8_t>(r.image_flags).subspan(static_cast<size_t>(b), ids.size()),
        std::span<const float>(r.image_rows)
            .subspan(static_cast<size_t>(r.flagged_before[b] * D),
                     static_cast<size_t>((r.flagged_before[e] - r.flagged_before[b]) * D)));
  } else {
    logits = session_append(*r.session, ids, prefill && prompt_rows);
  }
  if (prefill && prompt_rows) {
    // Row j holds the distribution of position b + j + 1: the prompt token there, if any.
    const int64_t V = model->info.vocab_size, b = r.prefilled;
    const int64_t rows = static_cast<int64_t>(logits.size()) / V;
    for (int64_t j = 0; j < rows && b + j + 1 < n_prompt; ++j) {
      sampling::PositionLogprobs lp = sampling::position_logprobs(
          std::span<const float>(logits.data() + j * V, static_cast<size_t>(V)),
          r.req.prompt[static_cast<size_t>(b + j + 1)], r.req.prompt_logprobs);
      r.prompt_lp.push_back({lp.chosen, std::move(lp.top)});
    }
    // The last row is the one the first token is drawn from.
    logits.erase(logits.begin(), logits.end() - V);
  }
  if (prefill) {
    r.prefilled += static_cast<int64_t>(ids.size());
    *budget -= static_cast<int64_t>(ids.size());
    if (!samples) return;
    if (params.prefix_cache_entries > 0) {
      std::lock_guard<std::mutex> lock(mu);
      cache_copy_locked(r.session->state, r.image_keys);
    }
  }
  Result<int32_t> tok = 0;
  std::vector<float> raw;  // the logits before the constraint's mask, for log-probabilities
  if (plan) {
    tok = sampling::DeviceSampling::finish(*r.sampler, *plan, outcome);
  } else {
    if (r.req.top_logprobs >= 0 && r.req.constraint) raw = logits;
    if (r.req.constraint) {
      r.req.constraint->mask(logits);
      // A constraint that leaves only stop tokens (a closed JSON object, a finished forced call)
      // ends the output before min_tokens: the min_tokens ban would leave nothing to sample (the
      // request failed with "no token left"), and the constraint must stay completable.
      if (r.generated < r.req.stop.min_tokens && !r.min_tokens_stops.empty()) {
        bool other = false;
        for (size_t v = 0; v < logits.size() && !other; ++v)
          other = logits[v] != -INFINITY &&
                  std::find(r.min_tokens_stops.begin(), r.min_tokens_stops.end(),
                            static_cast<int32_t>(v)) == r.min_tokens_stops.end();
        if (!other) {
          (void)r.sampler->ban_until({}, 0);
          r.stop->end_min_tokens();  // and the stop token ends it now, not min_tokens later
        }
      }
    }
    tok = r.sampler->sample(logits);
  }
  if (!tok.is_ok()) return finish(r, FinishReason::kNone, tok.status());
  const int32_t id = *tok;
  Status st = r.sampler->accept(id);
  if (!st.is_ok()) return finish(r, FinishReason::kNone, st);
  if (r.req.constraint) r.req.constraint->accept(id);
  const float* raw_logits = r.req.top_logprobs < 0 ? nullptr
                            : raw.empty()          ? logits.data()
                                                   : raw.data();
  if (!deliver(r, id, 0, raw_logits)) r.pending_token = id;
}

bool Engine::Impl::deliver(EngineRequest& r, int32_t id, int64_t surplus_rows,
                           const float* raw_logits) {
  const int64_t n_prompt = static_cast<int64_t>(r.req.prompt.size());
  r.generated++;
  {
    std::lock_guard<std::mutex> lock(mu);
    stats.generation_tokens_total++;
  }
  sampling::StopStep s = r.stop->feed(id, r.detok->push(id));
  GenerationEvent ev;
  ev.id = r.id;
  ev.token = id;
  ev.text = std::move(s.text);
  ev.prompt_tokens = n_prompt;
  ev.cached_tokens = r.cached;
  ev.completion_tokens = r.generated;
  if (r.generated == 1) ev.prompt_logprobs = std::move(r.prompt_lp);
  if (raw_logits != nullptr) {
    sampling::PositionLogprobs lp = sampling::position_logprobs(
        std::span<const float>(raw_logits, static_cast<size_t>(model->info.vocab_size)), id,
        r.req.top_logprobs);
    ev.logprob = lp.chosen;
    ev.top_logprobs = std::move(lp.top);
  }
  r.cb(ev);
  if ((s.finish != FinishReason::kNone || n_prompt + r.generated >= max_context) &&
      surplus_rows > 0)
    r.session->state->rollback(surplus_rows);
  if (s.finish != FinishReason::kNone) {
    std::string tail = s.finish == FinishReason::kLength ? r.detok->flush() : std::string();
    finish(r, s.finish, Status::ok(), std::move(tail));
    return true;
  }
  if (n_prompt + r.generated >= max_context) {  // prompt + output fill the context
    std::string tail = r.stop->flush() + r.detok->flush();
    finish(r, FinishReason::kLength, Status::ok(), std::move(tail));
    return true;
  }
  return false;
}

// Moves waiting requests into `running` while sequences and state budget allow.
bool Engine::Impl::admit_locked(std::vector<std::unique_ptr<EngineRequest>>* failed) {
  bool admitted = false;
  while (!waiting.empty() && static_cast<int>(running.size()) < params.max_sequences) {
    EngineRequest& r = *waiting.front();
    while (used_bytes() + r.reserved_bytes > params.kv_bytes && cache.evict_one()) {
    }
    if (used_bytes() + r.reserved_bytes > params.kv_bytes) break;  // wait for a running one
    auto req = std::move(waiting.front());
    waiting.pop_front();
    req->session.emplace();
    req->session->model = model;
    req->session->params.max_context = max_context;
    req->session->params.chunk_tokens = params.max_batched_tokens;
    // Tokens, as vLLM counts them (hit rate = hits / queries over prompt tokens).
    stats.prefix_cache_queries += static_cast<int64_t>(req->req.prompt.size());
    // Prompt log-probabilities need every prompt row computed: no reuse.
    const SequenceHandle* hit = req->req.prompt_logprobs >= 0
                                    ? nullptr
                                    : cache.longest_prefix(req->req.prompt, req->image_keys);
    const int64_t reserve = reserve_tokens(req->req);
    auto make = [&] {
      return detail::capture_status([&] {
        if (hit != nullptr) {
          req->session->state = hit->clone(reserve);
          req->prefilled = req->cached = (*hit)->pos();
        } else {
          req->session->state = SequenceHandle(model->backend->new_sequence(
              StateOptions{.pool = pool, .max_rollback = kMaxRollback, .max_context = reserve}));
        }
      });
    };
    Status made = make();
    // A CUDA cache entry holds device memory the budget estimate may not show: free entries
    // (never the one being cloned) until the state fits or nothing is left to free.
    while (made.code() == ErrorCode::kOutOfMemory && cache.size() > (hit != nullptr ? 1 : 0) &&
           cache.evict_one()) {
      made = make();
    }
    if (!made.is_ok()) {  // e.g. device memory exhausted: the request ends with that status
      req->prefilled = req->cached = 0;
      req->session.reset();
      req->admit_error = std::move(made);
      failed->push_back(std::move(req));
      continue;
    }
    stats.prefix_cache_hits += req->cached;
    stats.prompt_tokens_total += static_cast<int64_t>(req->req.prompt.size()) - req->cached;
    running.push_back(std::move(req));
    admitted = true;
  }
  return admitted;
}

void Engine::Impl::run() {
  for (;;) {
    std::vector<std::unique_ptr<EngineRequest>> dropped;  // cancelled while waiting
    std::vector<std::unique_ptr<EngineRequest>> failed;   // no state could be made for them
    std::vector<EngineRequest*> batch;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return stopping || !running.empty() || !waiting.empty(); });
      if (stopping) break;
      for (auto it = waiting.begin(); it != waiting.end();) {
        if ((*it)->cancelled) {
          dropped.push_back(std::move(*it));
          it = waiting.erase(it);
        } else {
          ++it;
        }
      }
      admit_locked(&failed);
      for (auto& r : running) batch.push_back(r.get());
    }
    for (auto& r : dropped)
      finish(*r, FinishReason::kNone, Status(ErrorCode::kCancelled, "request cancelled"));
    for (auto& r : failed) finish(*r, FinishReason::kNone, r->admit_error);
    int64_t budget = params.max_batched_tokens;
    for (EngineRequest* r : batch) {
      bool cancelled;
      {
        std::lock_guard<std::mutex> lock(mu);
        cancelled = r->cancelled;
      }
      if (cancelled) {
        finish(*r, FinishReason::kNone, Status(ErrorCode::kCancelled, "request cancelled"));
        continue;
      }
      Status st = detail::capture_status([&] { step(*r, &budget); });
      if (!st.is_ok() && !r->finished) finish(*r, FinishReason::kNone, st);
    }
    std::lock_guard<std::mutex> lock(mu);
    running.remove_if([](const std::unique_ptr<EngineRequest>& r) { return r->finished; });
    stats.running = static_cast<int64_t>(running.size());
    stats.waiting = static_cast<int64_t>(waiting.size());
  }
  // Shutdown: every request still known ends with kAborted.
  std::unique_lock<std::mutex> lock(mu);
  std::vector<std::unique_ptr<EngineRequest>> left;
  for (auto& r : running) left.push_back(std::move(r));
  for (auto& r : waiting) left.push_back(std::move(r));
  running.clear();
  waiting.clear();
  lock.unlock();
  for (auto& r : left)
    finish(*r, FinishReason::kNone, Status(ErrorCode::kAborted, "engine shut down"));
}

Result<Engine> Engine::create(const Model& model, const EngineParams& params) {
  Status st = params.validate();
  if (!st.is_ok()) return st;
  std::unique_ptr<Impl> impl;
  // Under the guard: the tunables read (a bad DSV41_LOG_LEVEL), the pool and the allocations
  // throw, and no exception may cross the API.
  st = detail::capture_status([&] {
    impl = std::make_unique<Impl>();
    impl->model = model.impl();
    impl->params = params;
    impl->max_context = std::min(params.max_context, model.info().max_position_embeddings);
    impl->cache.set_capacity(params.prefix_cache_entries);
    impl->logger =
        Logger(parse_log_level(Tunables::from_environment().get_string("DSV41_LOG_LEVEL")));
    impl->pool =
        make_kv_pool(impl->model->transformer->config(), static_cast<uint64_t>(params.kv_bytes));
    impl->stats.kv_bytes_total = params.kv_bytes;
  });
  if (!st.is_ok()) return st;
  if (params.speculative_tokens > 0 && params.speculative_method == "dspark" &&
      !impl->model->backend->has_dspark())
    return Status(ErrorCode::kUnsupported,
                  "EngineParams.speculative_method = \"dspark\" needs the model loaded with "
                  "ModelParams.dspark = true (CPU backend)");
  if (!impl->model->tokenizer)
    return Status(ErrorCode::kUnsupported,
                  model.info().model_dir + ": the engine needs tokenizer.json to stream text");
  Impl* raw = impl.get();
  st = detail::capture_status([&] {  // std::system_error when no thread can be made
    impl->thread = std::thread([raw] {
      raw->run();
      if (raw->owns_itself) delete raw;  // only this thread sets it (shutdown from a callback)
    });
  });
  if (!st.is_ok()) return st;
  return Engine(std::move(impl));
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::Engine(Engine&&) noexcept = default;
// The engine assigned over is shut down first: destroying its Impl with the scheduler thread still
// joinable called std::terminate.
Engine& Engine::operator=(Engine&& other) noexcept {
  if (this != &other) {
    shutdown();
    impl_ = std::move(other.impl_);
  }
  return *this;
}
Engine::~Engine() { shutdown(); }

// After shutdown() (also one made from a callback, which lets go of the Impl) and on a moved-from
// Engine there is no Impl: calls answer as after a shutdown instead of dereferencing null.
Result<RequestId> Engine::submit(GenerationRequest request, EventCallback on_event) {
  if (!impl_) return Status(ErrorCode::kAborted, "engine is shut down");
  Impl& e = *impl_;
  const ModelInfo& info = e.model->info;
  if (!on_event) return Status(ErrorCode::kInvalidArgument, "submit: on_event callback is empty");
  if (request.prompt.empty())
    return Status(ErrorCode::kInvalidArgument, "GenerationRequest.prompt is empty");
  for (size_t i = 0; i < request.prompt.size(); ++i)
    if (request.prompt[i] < 0 || request.prompt[i] >= info.vocab_size)
      return Status(ErrorCode::kInvalidArgument, "GenerationRequest.prompt[" + std::to_string(i) +
                                                     "] = " + std::to_string(request.prompt[i]) +
                                                     " is outside the vocabulary [0, " +
                                                     std::to_string(info.vocab_size) + ")");
  for (const auto& [name, n] : {std::pair<const char*, int>{"top_logprobs", request.top_logprobs},
                                {"prompt_logprobs", request.prompt_logprobs}})
    if (n < -1 || n > kMaxTopLogprobs)
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("GenerationRequest.{} = {} must be -1 (off) or in [0, {}]", name, n,
                                kMaxTopLogprobs));
  if (static_cast<int64_t>(request.prompt.size()) >= e.max_context)
    return Status(ErrorCode::kContextOverflow,
                  "prompt of " + std::to_string(request.prompt.size()) +
                      " tokens leaves no room to generate within the maximum context of " +
                      std::to_string(e.max_context) + " tokens");
  std::unique_ptr<EngineRequest> r;
  Status images = Status::ok();
  // The image rows are copied here (as large as the images): a bad_alloc is kOutOfMemory.
  Status st = detail::capture_status([&] {
    r = std::make_unique<EngineRequest>();
    images = e.lay_out_images(request, *r);
  });
  if (!st.is_ok()) return st;
  if (!images.is_ok()) return images;
  st = detail::capture_status([&] {
    auto sampler = Sampler::create(request.sampling, info.vocab_size);
    if (!sampler.is_ok())
      detail::fail(sampler.status().code(), sampler.status().message(), __FILE__, __LINE__);
    r->sampler.emplace(std::move(sampler).value());
    Status p = r->sampler->set_prompt(request.prompt);
    if (!p.is_ok()) detail::fail(p.code(), p.message(), __FILE__, __LINE__);
    const int32_t eos = info.eos_token_id;
    if (request.stop.min_tokens > 0) {  // the stop tokens cannot be drawn before then
      std::vector<int32_t> stops = request.stop.stop_token_ids;
      if (!request.stop.ignore_eos) stops.push_back(eos);
      r->min_tokens_stops = stops;
      p = r->sampler->ban_until(stops, request.stop.min_tokens);
      if (!p.is_ok()) detail::fail(p.code(), p.message(), __FILE__, __LINE__);
    }
    r->stop.emplace(request.stop, std::span<const int32_t>(&eos, 1), info.vocab_size);
    r->detok.emplace(*e.model->tokenizer);
  });
  if (!st.is_ok()) return st;
  r->reserved_bytes = e.reserve_for(request);
  if (r->reserved_bytes > e.params.kv_bytes) {
    const int64_t min_bytes = e.pool_bytes(static_cast<int64_t>(request.prompt.size()) + 1);
    // Never fits, whatever else runs: kContextOverflow (HTTP 400, not retried), where
    // kOutOfMemory (503 + Retry-After) had clients retry a request that cannot succeed.
    if (min_bytes > e.params.kv_bytes)
      return Status(ErrorCode::kContextOverflow,
                    "GenerationRequest.prompt: the state of " + std::to_string(min_bytes) +
                        " bytes for this " + std::to_string(request.prompt.size()) +
                        "-token prompt exceeds the KV budget of " +
                        std::to_string(e.params.kv_bytes) + " bytes (EngineParams.kv_bytes)");
    r->reserved_bytes = e.params.kv_bytes;  // runs alone, capped by the budget
  }
  r->req = std::move(request);
  r->cb = std::move(on_event);
  std::lock_guard<std::mutex> lock(e.mu);
  if (e.stopping) return Status(ErrorCode::kAborted, "engine is shut down");
  if (static_cast<int>(e.waiting.size()) >= e.params.max_queue)
    return Status(ErrorCode::kOutOfMemory, "request queue is full (EngineParams.max_queue = " +
                                               std::to_string(e.params.max_queue) + ")");
  r->id = e.next_id++;
  const RequestId id = r->id;
  e.waiting.push_back(std::move(r));
  e.stats.waiting = static_cast<int64_t>(e.waiting.size());
  e.cv.notify_one();
  return id;
}

Status Engine::cancel(RequestId id) {
  if (!impl_)
    return Status(ErrorCode::kNotFound,
                  "request " + std::to_string(id) + " is not running (the engine is shut down)");
  Impl& e = *impl_;
  std::lock_guard<std::mutex> lock(e.mu);
  auto mark = [&](EngineRequest& r) {
    if (r.id != id || r.cancelled) return false;
    r.cancelled = true;  // the scheduler thread ends it (callbacks run there only)
    e.cv.notify_one();
    return true;
  };
  for (auto& r : e.waiting)
    if (mark(*r)) return Status::ok();
  for (auto& r : e.running)
    if (!r->finished && mark(*r)) return Status::ok();
  return Status(ErrorCode::kNotFound, "request " + std::to_string(id) + " is not running");
}

EngineStats Engine::stats() const {
  if (!impl_) return {};
  std::lock_guard<std::mutex> lock(impl_->mu);
  EngineStats s = impl_->stats;
  s.kv_bytes_used = impl_->used_bytes();
  return s;
}

void Engine::shutdown() {
  if (!impl_) return;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.get_id() == std::this_thread::get_id()) {
    // From a callback: the scheduler finishes the remaining requests (kAborted events) after the
    // callback returns, then deletes its Impl; this Engine lets go of it now.
    impl_->owns_itself = true;
    impl_->thread.detach();
    (void)impl_.release();
    return;
  }
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace dsv41
