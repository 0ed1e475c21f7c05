// Internal to the C ABI shims (c_api.cpp, c_api_sampling.cpp): the handle types, the thread's
// last error, status conversion and the guard that keeps exceptions from crossing dsv41.h.
#pragma once

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "dsv41/dsv41.h"
#include "dsv41/engine.hpp"
#include "dsv41/model.hpp"
#include "dsv41/sampler.hpp"
#include "dsv41/session.hpp"
#include "dsv41/speculative.hpp"

struct dsv41_model {
  dsv41::Model model;
};
struct dsv41_image {
  // Shared: a submitted request keeps the embedding after the caller frees the handle.
  std::shared_ptr<const dsv41::ImageEmbedding> image;
};
struct dsv41_session {
  dsv41::Session session;
};
struct dsv41_engine {
  dsv41::Engine engine;
};
struct dsv41_sampler {
  dsv41::Sampler sampler;
};
struct dsv41_speculative {
  dsv41::SpeculativeDecoder decoder;
};

namespace dsv41::capi {

inline thread_local std::string g_last_error;
// Set instead of g_last_error when storing the message itself failed (no host memory left):
// a static string, so reporting the failure allocates nothing.
inline thread_local const char* g_static_error = nullptr;

// Stores the thread's last error message; never throws.
inline void set_error(std::string_view message) noexcept {
  try {
    g_last_error.assign(message);
    g_static_error = nullptr;
  } catch (...) {
    g_static_error = "out of host memory (the error message could not be stored)";
  }
}

inline dsv41_status to_c(dsv41::ErrorCode c) {
  return static_cast<dsv41_status>(static_cast<int>(c));
}

inline dsv41_status fail(const dsv41::Status& st) noexcept {
  set_error(st.message());
  return to_c(st.code());
}

inline dsv41_status invalid(std::string_view message) noexcept {
  set_error(message);
  return DSV41_ERR_INVALID_ARGUMENT;
}

// Counts above this many elements cannot be an array in memory (any element is >= 4 bytes).
constexpr size_t kMaxCount = static_cast<size_t>(PTRDIFF_MAX) / 4;

// The buffer rule of the logits outputs: *n_out = values.size(); BUFFER_TOO_SMALL (nothing
// written, `fn` named) when they do not fit capacity, else copied.
inline dsv41_status write_floats(const char* fn, const std::vector<float>& values, float* out,
                                 size_t capacity, size_t* n_out) {
  *n_out = values.size();
  if (values.size() > capacity) {
    set_error(std::string(fn) + ": " + std::to_string(values.size()) +
              " logits do not fit capacity " + std::to_string(capacity));
    return DSV41_ERR_BUFFER_TOO_SMALL;
  }
  if (!values.empty()) std::memcpy(out, values.data(), values.size() * sizeof(float));
  return DSV41_OK;
}

// Runs fn() and converts anything escaping into a status: nothing crosses the C ABI.
template <typename Fn>
dsv41_status guarded(Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    g_static_error = "out of host memory";
    return DSV41_ERR_OUT_OF_MEMORY;
  } catch (const std::length_error& e) {
    set_error(std::string("a size is too large: ") + e.what());
    return DSV41_ERR_INVALID_ARGUMENT;
  } catch (const std::exception& e) {
    set_error(e.what());
    return DSV41_ERR_INTERNAL;
  } catch (...) {
    g_static_error = "unknown exception";
    return DSV41_ERR_INTERNAL;
  }
}

inline dsv41::SamplerParams sampler_from_c(const dsv41_sampler_params* p) {
  dsv41::SamplerParams s;
  if (p == nullptr) return s;
  s.temperature = p->temperature;
  s.top_k = p->top_k;
  s.top_p = p->top_p;
  s.min_p = p->min_p;
  s.repetition_penalty = p->repetition_penalty;
  s.presence_penalty = p->presence_penalty;
  s.frequency_penalty = p->frequency_penalty;
  if (p->has_seed) s.seed = p->seed;
  for (size_t i = 0; i < p->n_logit_bias; ++i)
    s.logit_bias[p->logit_bias_ids[i]] = p->logit_bias_values[i];
  return s;
}

// p's arrays are checked by dsv41_engine_submit first (non-null entries, counts).
inline dsv41::StopParams stop_from_c(const dsv41_stop_params* p) {
  dsv41::StopParams s;
  if (p == nullptr) return s;
  for (size_t i = 0; i < p->n_stop; ++i) s.stop.emplace_back(p->stop[i]);
  s.stop_token_ids.assign(p->stop_token_ids, p->stop_token_ids + p->n_stop_token_ids);
  s.max_tokens = p->max_tokens;
  s.ignore_eos = p->ignore_eos != 0;
  s.include_stop_str_in_output = p->include_stop_str_in_output != 0;
  return s;
}

}  // namespace dsv41::capi
