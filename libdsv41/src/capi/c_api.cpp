// The C ABI (dsv41.h): one shim per C++ call; handles own the C++ objects; exceptions and
// statuses become dsv41_status + a thread-local message. Sampler and speculative shims:
// c_api_sampling.cpp.
#include "capi/c_api_support.hpp"

using namespace dsv41::capi;

extern "C" {

const char* dsv41_status_name(dsv41_status status) {
  if (status == DSV41_ERR_BUFFER_TOO_SMALL) return "buffer_too_small";
  if (status < DSV41_OK || status > DSV41_ERR_INTERNAL) return "unknown";
  return dsv41::error_code_name(static_cast<dsv41::ErrorCode>(status));
}

const char* dsv41_last_error_message(void) {
  return g_static_error != nullptr ? g_static_error : g_last_error.c_str();
}
const char* dsv41_version(void) { return "0.1.0"; }

dsv41_model_params dsv41_model_default_params(void) {
  return dsv41_model_params{nullptr, 0, nullptr, 0};
}

dsv41_status dsv41_model_load(const dsv41_model_params* params, dsv41_model** out) {
  if (out == nullptr) return invalid("dsv41_model_load: out is NULL");
  *out = nullptr;
  if (params == nullptr) return invalid("dsv41_model_load: params is NULL");
  return guarded([&] {
    dsv41::ModelParams p;
    p.model_dir = params->model_dir ? params->model_dir : "";
    p.threads = params->threads;
    p.backend = params->backend ? params->backend : "";
    p.dspark = params->dspark != 0;
    auto m = dsv41::Model::load(p);
    if (!m.is_ok()) return fail(m.status());
    *out = new dsv41_model{std::move(m).value()};
    return DSV41_OK;
  });
}

void dsv41_model_free(dsv41_model* model) { delete model; }
int64_t dsv41_model_vocab_size(const dsv41_model* m) { return m ? m->model.info().vocab_size : 0; }
int32_t dsv41_model_bos_token(const dsv41_model* m) {
  return m ? m->model.info().bos_token_id : -1;
}
int32_t dsv41_model_eos_token(const dsv41_model* m) {
  return m ? m->model.info().eos_token_id : -1;
}
int64_t dsv41_model_hidden_size(const dsv41_model* m) {
  return m ? m->model.info().hidden_size : 0;
}
int64_t dsv41_model_max_context(const dsv41_model* m) {
  return m ? m->model.info().max_position_embeddings : 0;
}
int32_t dsv41_model_image_token(const dsv41_model* m) {
  return m ? m->model.info().image_token_id : -1;
}
const char* dsv41_model_backend(const dsv41_model* m) {
  return m ? m->model.info().backend.c_str() : "";
}
const char* dsv41_model_image_encoder(const dsv41_model* m) {
  return m ? m->model.info().image_encoder.c_str() : "";
}

dsv41_status dsv41_tokenize(const dsv41_model* model, const char* text, size_t text_len,
                            int parse_special, int32_t* ids, size_t capacity, size_t* n_out) {
  if (model == nullptr) return invalid("dsv41_tokenize: model is NULL");
  if (n_out == nullptr) return invalid("dsv41_tokenize: n_out is NULL");
  if (text == nullptr && text_len > 0)
    return invalid("dsv41_tokenize: text is NULL with text_len > 0");
  if (ids == nullptr && capacity > 0)
    return invalid("dsv41_tokenize: ids is NULL with capacity > 0");
  return guarded([&] {
    auto r =
        model->model.tokenize(std::string_view(text ? text : "", text_len), parse_special != 0);
    if (!r.is_ok()) return fail(r.status());
    *n_out = r->size();
    if (r->size() > capacity) {
      set_error("dsv41_tokenize: " + std::to_string(r->size()) + " ids do not fit capacity " +
                std::to_string(capacity));
      return DSV41_ERR_BUFFER_TOO_SMALL;
    }
    if (!r->empty()) std::memcpy(ids, r->data(), r->size() * sizeof(int32_t));
    return DSV41_OK;
  });
}

dsv41_status dsv41_detokenize(const dsv41_model* model, const int32_t* ids, size_t n, char* buf,
                              size_t capacity, size_t* len_out) {
  if (model == nullptr) return invalid("dsv41_detokenize: model is NULL");
  if (len_out == nullptr) return invalid("dsv41_detokenize: len_out is NULL");
  if (ids == nullptr && n > 0) return invalid("dsv41_detokenize: ids is NULL with n > 0");
  if (n > kMaxCount) return invalid("dsv41_detokenize: n is too large");
  if (buf == nullptr && capacity > 0)
    return invalid("dsv41_detokenize: buf is NULL with capacity > 0");
  return guarded([&] {
    auto r = model->model.detokenize(std::span<const int32_t>(ids, n));
    if (!r.is_ok()) return fail(r.status());
    *len_out = r->size();
    if (r->size() > capacity) {
      set_error("dsv41_detokenize: " + std::to_string(r->size()) + " bytes do not fit capacity " +
                std::to_string(capacity));
      return DSV41_ERR_BUFFER_TOO_SMALL;
    }
    if (!r->empty()) std::memcpy(buf, r->data(), r->size());
    return DSV41_OK;
  });
}

dsv41_session_params dsv41_session_default_params(void) {
  dsv41::SessionParams d;
  return dsv41_session_params{d.max_context, d.chunk_tokens};
}

dsv41_status dsv41_session_create(const dsv41_model* model, const dsv41_session_params* params,
                                  dsv41_session** out) {
  if (out == nullptr) return invalid("dsv41_session_create: out is NULL");
  *out = nullptr;
  if (model == nullptr) return invalid("dsv41_session_create: model is NULL");
  return guarded([&] {
    dsv41::SessionParams p;
    if (params != nullptr) {
      p.max_context = params->max_context;
      p.chunk_tokens = params->chunk_tokens;
    }
    auto s = dsv41::Session::create(model->model, p);
    if (!s.is_ok()) return fail(s.status());
    *out = new dsv41_session{std::move(s).value()};
    return DSV41_OK;
  });
}

void dsv41_session_free(dsv41_session* session) { delete session; }

dsv41_status dsv41_session_append(dsv41_session* session, const int32_t* ids, size_t n,
                                  int all_logits, float* logits, size_t capacity, size_t* n_out) {
  if (session == nullptr) return invalid("dsv41_session_append: session is NULL");
  if (n_out == nullptr) return invalid("dsv41_session_append: n_out is NULL");
  if (ids == nullptr && n > 0) return invalid("dsv41_session_append: ids is NULL with n > 0");
  if (n > kMaxCount) return invalid("dsv41_session_append: n is too large");
  // Checked before the append: a NULL buffer must not cost the caller the appended tokens.
  if (logits == nullptr && capacity > 0)
    return invalid("dsv41_session_append: logits is NULL with capacity > 0");
  return guarded([&] {
    auto r = session->session.append(std::span<const int32_t>(ids, n), all_logits != 0);
    if (!r.is_ok()) return fail(r.status());
    return write_floats("dsv41_session_append", *r, logits, capacity, n_out);
  });
}

int64_t dsv41_session_position(const dsv41_session* s) { return s ? s->session.position() : -1; }

dsv41_status dsv41_session_rollback(dsv41_session* session, int64_t n) {
  if (session == nullptr) return invalid("dsv41_session_rollback: session is NULL");
  return guarded([&] {
    dsv41::Status st = session->session.rollback(n);
    return st.is_ok() ? DSV41_OK : fail(st);
  });
}

dsv41_status dsv41_session_reset(dsv41_session* session) {
  if (session == nullptr) return invalid("dsv41_session_reset: session is NULL");
  return guarded([&] {
    session->session.reset();
    return DSV41_OK;
  });
}

dsv41_status dsv41_session_fork(const dsv41_session* session, dsv41_session** out) {
  if (out == nullptr) return invalid("dsv41_session_fork: out is NULL");
  *out = nullptr;
  if (session == nullptr) return invalid("dsv41_session_fork: session is NULL");
  return guarded([&] {
    auto f = session->session.fork();
    if (!f.is_ok()) return fail(f.status());
    *out = new dsv41_session{std::move(f).value()};
    return DSV41_OK;
  });
}

dsv41_status dsv41_session_tokens(const dsv41_session* session, int32_t* ids, size_t capacity,
                                  size_t* n_out) {
  if (session == nullptr) return invalid("dsv41_session_tokens: session is NULL");
  if (n_out == nullptr) return invalid("dsv41_session_tokens: n_out is NULL");
  if (ids == nullptr && capacity > 0)
    return invalid("dsv41_session_tokens: ids is NULL with capacity > 0");
  return guarded([&] {
    const std::vector<int32_t>& t = session->session.tokens();
    *n_out = t.size();
    if (t.size() > capacity) {
      set_error("dsv41_session_tokens: " + std::to_string(t.size()) + " ids do not fit capacity " +
                std::to_string(capacity));
      return DSV41_ERR_BUFFER_TOO_SMALL;
    }
    if (!t.empty()) std::memcpy(ids, t.data(), t.size() * sizeof(int32_t));
    return DSV41_OK;
  });
}

dsv41_engine_params dsv41_engine_default_params(void) {
  dsv41::EngineParams d;
  dsv41_engine_params p{};
  p.max_sequences = d.max_sequences;
  p.max_batched_tokens = d.max_batched_tokens;
  p.max_context = d.max_context;
  p.kv_bytes = d.kv_bytes;
  p.prefix_cache_entries = d.prefix_cache_entries;
  p.max_queue = d.max_queue;
  p.speculative_tokens = d.speculative_tokens;
  p.speculative_dspark = d.speculative_method == "dspark" ? 1 : 0;
  p.speculative_confidence = d.speculative_confidence;
  return p;
}

dsv41_sampler_params dsv41_sampler_default_params(void) {
  dsv41::SamplerParams d;
  dsv41_sampler_params p{};
  p.temperature = d.temperature;
  p.top_k = d.top_k;
  p.top_p = d.top_p;
  p.min_p = d.min_p;
  p.repetition_penalty = d.repetition_penalty;
  p.presence_penalty = d.presence_penalty;
  p.frequency_penalty = d.frequency_penalty;
  return p;
}

dsv41_stop_params dsv41_stop_default_params(void) {
  dsv41_stop_params p{};
  p.max_tokens = dsv41::kNoTokenLimit;
  return p;
}

dsv41_status dsv41_engine_create(const dsv41_model* model, const dsv41_engine_params* params,
                                 dsv41_engine** out) {
  if (out == nullptr) return invalid("dsv41_engine_create: out is NULL");
  *out = nullptr;
  if (model == nullptr) return invalid("dsv41_engine_create: model is NULL");
  return guarded([&] {
    dsv41::EngineParams p;
    if (params != nullptr) {
      p.max_sequences = params->max_sequences;
      p.max_batched_tokens = params->max_batched_tokens;
      p.max_context = params->max_context;
      p.kv_bytes = params->kv_bytes;
      p.prefix_cache_entries = params->prefix_cache_entries;
      p.max_queue = params->max_queue;
      p.speculative_tokens = params->speculative_tokens;
      p.speculative_method = params->speculative_dspark ? "dspark" : "ngram";
      p.speculative_confidence = params->speculative_confidence;
    }
    auto e = dsv41::Engine::create(model->model, p);
    if (!e.is_ok()) return fail(e.status());
    *out = new dsv41_engine{std::move(e).value()};
    return DSV41_OK;
  });
}

void dsv41_engine_free(dsv41_engine* engine) { delete engine; }

dsv41_request_options dsv41_request_default_options(void) {
  dsv41_request_options o{};
  o.top_logprobs = dsv41::GenerationRequest{}.top_logprobs;
  return o;
}

dsv41_status dsv41_engine_submit(dsv41_engine* engine, const int32_t* prompt, size_t n,
                                 const dsv41_sampler_params* sampler, const dsv41_stop_params* stop,
                                 dsv41_event_callback callback, void* user_data,
                                 uint64_t* request_id_out) {
  return dsv41_engine_submit_with(engine, prompt, n, sampler, stop, nullptr, callback, user_data,
                                  request_id_out);
}

dsv41_status dsv41_engine_submit_with(dsv41_engine* engine, const int32_t* prompt, size_t n,
                                      const dsv41_sampler_params* sampler,
                                      const dsv41_stop_params* stop,
                                      const dsv41_request_options* options,
                                      dsv41_event_callback callback, void* user_data,
                                      uint64_t* request_id_out) {
  if (engine == nullptr) return invalid("dsv41_engine_submit: engine is NULL");
  if (callback == nullptr) return invalid("dsv41_engine_submit: callback is NULL");
  if (prompt == nullptr && n > 0) return invalid("dsv41_engine_submit: prompt is NULL with n > 0");
  if (n > kMaxCount) return invalid("dsv41_engine_submit: n (prompt length) is too large");
  if (stop != nullptr) {
    if (stop->n_stop > kMaxCount) return invalid("dsv41_engine_submit: stop->n_stop is too large");
    if (stop->n_stop > 0 && stop->stop == nullptr)
      return invalid("dsv41_engine_submit: stop->stop is NULL with n_stop > 0");
    for (size_t i = 0; i < stop->n_stop; ++i)
      if (stop->stop[i] == nullptr)
        return guarded([&] {
          return invalid("dsv41_engine_submit: stop->stop[" + std::to_string(i) + "] is NULL");
        });
    if (stop->n_stop_token_ids > kMaxCount)
      return invalid("dsv41_engine_submit: stop->n_stop_token_ids is too large");
    if (stop->n_stop_token_ids > 0 && stop->stop_token_ids == nullptr)
      return invalid("dsv41_engine_submit: stop->stop_token_ids is NULL with n_stop_token_ids > 0");
  }
  if (sampler != nullptr) {
    if (sampler->n_logit_bias > kMaxCount)
      return invalid("dsv41_engine_submit: sampler->n_logit_bias is too large");
    if (sampler->n_logit_bias > 0 && sampler->logit_bias_ids == nullptr)
      return invalid("dsv41_engine_submit: sampler->logit_bias_ids is NULL with n_logit_bias > 0");
    if (sampler->n_logit_bias > 0 && sampler->logit_bias_values == nullptr)
      return invalid(
          "dsv41_engine_submit: sampler->logit_bias_values is NULL with n_logit_bias > 0");
  }
  if (options != nullptr) {
    if (options->n_images > kMaxCount)
      return invalid("dsv41_engine_submit: options->n_images is too large");
    if (options->n_images > 0 && (options->images == nullptr || options->image_offsets == nullptr))
      return invalid(
          "dsv41_engine_submit: options->images or options->image_offsets is NULL with "
          "n_images > 0");
    for (size_t i = 0; i < options->n_images; ++i)
      if (options->images[i] == nullptr)
        return guarded([&] {
          return invalid("dsv41_engine_submit: options->images[" + std::to_string(i) + "] is NULL");
        });
  }
  return guarded([&] {
    dsv41::GenerationRequest req;
    req.prompt.assign(prompt, prompt + n);
    req.sampling = sampler_from_c(sampler);
    req.stop = stop_from_c(stop);
    if (options != nullptr) {
      req.top_logprobs = options->top_logprobs;
      req.stop.min_tokens = options->min_tokens;
      for (size_t i = 0; i < options->n_images; ++i)
        req.images.push_back({options->image_offsets[i], options->images[i]->image});
    }
    auto cb = [callback, user_data](const dsv41::GenerationEvent& ev) {
      dsv41_event c{};
      c.request_id = ev.id;
      c.kind = ev.kind == dsv41::GenerationEvent::Kind::kToken ? DSV41_EVENT_TOKEN
                                                               : DSV41_EVENT_FINISHED;
      c.token = ev.token;
      c.text = ev.text.data();
      c.text_len = ev.text.size();
      c.finish_reason = ev.finish == dsv41::FinishReason::kStop     ? DSV41_FINISH_STOP
                        : ev.finish == dsv41::FinishReason::kLength ? DSV41_FINISH_LENGTH
                                                                    : DSV41_FINISH_NONE;
      c.status = to_c(ev.status.code());
      c.error_message = ev.status.message().c_str();
      c.prompt_tokens = ev.prompt_tokens;
      c.cached_tokens = ev.cached_tokens;
      c.completion_tokens = ev.completion_tokens;
      std::vector<int32_t> top_tokens;
      std::vector<float> top_values;
      if (ev.logprob) {
        c.has_logprob = 1;
        c.logprob = ev.logprob->logprob;
        for (const dsv41::TokenLogprob& t : ev.top_logprobs) {
          top_tokens.push_back(t.token);
          top_values.push_back(t.logprob);
        }
        c.top_logprob_tokens = top_tokens.data();
        c.top_logprobs = top_values.data();
        c.n_top_logprobs = top_tokens.size();
      }
      callback(&c, user_data);
    };
    auto id = engine->engine.submit(std::move(req), cb);
    if (!id.is_ok()) return fail(id.status());
    if (request_id_out != nullptr) *request_id_out = *id;
    return DSV41_OK;
  });
}

dsv41_status dsv41_engine_cancel(dsv41_engine* engine, uint64_t request_id) {
  if (engine == nullptr) return invalid("dsv41_engine_cancel: engine is NULL");
  return guarded([&] {
    dsv41::Status st = engine->engine.cancel(request_id);
    return st.is_ok() ? DSV41_OK : fail(st);
  });
}

}  // extern "C"
