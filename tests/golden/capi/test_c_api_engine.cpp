// [golden] dsv41.h engine calls on tiny8: submit's arguments named (NULL arrays with counts,
// NULL stop strings, huge counts), cancel of an unknown request, and dsv41_engine_free from a
// callback (returns at once; the other requests still get their FINISHED events, ABORTED).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "golden/capi/capi_case.hpp"

namespace dsv41::test {
namespace {

// Counts events per request; frees the engine from the callback on the first token of
// `free_on` when set.
struct Watch {
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  std::vector<dsv41_status> statuses;
  dsv41_engine* engine = nullptr;
  uint64_t free_on = 0;
  bool freed = false;
};

void on_event(const dsv41_event* ev, void* user) {
  auto* w = static_cast<Watch*>(user);
  bool free_now = false;
  {
    std::lock_guard<std::mutex> lock(w->mu);
    if (ev->kind == DSV41_EVENT_FINISHED) {
      ++w->finished;
      w->statuses.push_back(ev->status);
    } else if (!w->freed && w->free_on != 0 && ev->request_id == w->free_on) {
      w->freed = free_now = true;
    }
    // Under the lock: once the waiter sees the third FINISHED, this callback touches w no more.
    w->cv.notify_all();
  }
  if (free_now) dsv41_engine_free(w->engine);  // from the scheduler thread
}

}  // namespace

TEST_CASE("capi: engine submit arguments are named", "[golden]") {
  CapiModel m;
  dsv41_engine_params ep = dsv41_engine_default_params();
  ep.kv_bytes = 64 << 20;
  ep.max_context = 256;
  dsv41_engine* e = nullptr;
  REQUIRE(dsv41_engine_create(m.model, &ep, &e) == DSV41_OK);
  Watch w;
  const int32_t prompt[2] = {0, 17};
  uint64_t id = 0;
  require_status(dsv41_engine_submit(nullptr, prompt, 2, nullptr, nullptr, on_event, &w, &id),
                 DSV41_ERR_INVALID_ARGUMENT, "engine is NULL");
  require_status(dsv41_engine_submit(e, prompt, 2, nullptr, nullptr, nullptr, &w, &id),
                 DSV41_ERR_INVALID_ARGUMENT, "callback is NULL");
  require_status(dsv41_engine_submit(e, nullptr, 2, nullptr, nullptr, on_event, &w, &id),
                 DSV41_ERR_INVALID_ARGUMENT, "prompt is NULL with n > 0");
  require_status(dsv41_engine_submit(e, prompt, SIZE_MAX, nullptr, nullptr, on_event, &w, &id),
                 DSV41_ERR_INVALID_ARGUMENT, "n (prompt length) is too large");
  dsv41_stop_params stop = dsv41_stop_default_params();
  stop.n_stop_token_ids = 3;  // stop_token_ids left NULL
  require_status(dsv41_engine_submit(e, prompt, 2, nullptr, &stop, on_event, &w, &id),
                 DSV41_ERR_INVALID_ARGUMENT, "stop->stop_token_ids is NULL with n_stop_token_ids");
  stop.n_stop_token_ids = SIZE_MAX;
  const int32_t one_id[1] = {5};
  stop.stop_token_ids = one_id;
  require_status(dsv41_engine_submit(e, prompt, 2, nullptr, &stop, on_event, &w, &id),
                 DSV41_ERR_INVALID_ARGUMENT, "stop->n_stop_token_ids is too large");
  stop = dsv41_stop_default_params();
  const char* strings[2] = {"ok", nullptr};
  stop.stop = strings;
  stop.n_stop = 2;
  require_status(dsv41_engine_submit(e, prompt, 2, nullptr, &stop, on_event, &w, &id),
                 DSV41_ERR_INVALID_ARGUMENT, "stop->stop[1] is NULL");
  dsv41_sampler_params sp = dsv41_sampler_default_params();
  sp.n_logit_bias = 1;
  require_status(dsv41_engine_submit(e, prompt, 2, &sp, nullptr, on_event, &w, &id),
                 DSV41_ERR_INVALID_ARGUMENT, "sampler->logit_bias_ids is NULL");
  require_status(dsv41_engine_cancel(e, 987654), DSV41_ERR_NOT_FOUND, "987654");
  require_status(dsv41_engine_cancel(nullptr, 1), DSV41_ERR_INVALID_ARGUMENT, "engine is NULL");
  REQUIRE(w.finished == 0);  // nothing was accepted
  dsv41_engine_free(e);
}

TEST_CASE("capi: dsv41_engine_free from a callback returns, every request still finishes",
          "[golden]") {
  CapiModel m;
  dsv41_engine_params ep = dsv41_engine_default_params();
  ep.kv_bytes = 64 << 20;
  ep.max_context = 256;
  ep.max_sequences = 2;
  Watch w;
  REQUIRE(dsv41_engine_create(m.model, &ep, &w.engine) == DSV41_OK);
  const int32_t prompt[2] = {0, 17};
  dsv41_stop_params stop = dsv41_stop_default_params();
  stop.max_tokens = 200;
  stop.ignore_eos = 1;
  dsv41_sampler_params sp = dsv41_sampler_default_params();
  sp.temperature = 0;
  uint64_t ids[3] = {0, 0, 0};
  {
    std::lock_guard<std::mutex> lock(w.mu);  // the callback waits until free_on is set
    for (uint64_t& id : ids)
      REQUIRE(dsv41_engine_submit(w.engine, prompt, 2, &sp, &stop, on_event, &w, &id) == DSV41_OK);
    w.free_on = ids[0];
  }
  std::unique_lock<std::mutex> lock(w.mu);
  // The process would abort here (a thread joining itself) before the fix.
  REQUIRE(w.cv.wait_for(lock, std::chrono::seconds(60), [&] { return w.finished == 3; }));
  REQUIRE(w.freed);
  int aborted = 0;
  for (dsv41_status st : w.statuses) aborted += st == DSV41_ERR_ABORTED;
  INFO("statuses of the 3 requests");
  REQUIRE(aborted == 3);  // ended by the free (none could finish 200 tokens first)
}

}  // namespace dsv41::test
