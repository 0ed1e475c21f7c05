// The C ABI (dsv41.h) of Sampler and SpeculativeDecoder: one shim per C++ call.
#include "capi/c_api_support.hpp"

using namespace dsv41::capi;

extern "C" {

dsv41_status dsv41_sampler_create(const dsv41_sampler_params* params, int64_t vocab_size,
                                  dsv41_sampler** out) {
  if (out == nullptr) return invalid("dsv41_sampler_create: out is NULL");
  *out = nullptr;
  if (params != nullptr && params->n_logit_bias > 0 &&
      (params->logit_bias_ids == nullptr || params->logit_bias_values == nullptr))
    return invalid("dsv41_sampler_create: logit_bias arrays are NULL with n_logit_bias > 0");
  if (params != nullptr && params->n_logit_bias > kMaxCount)
    return invalid("dsv41_sampler_create: n_logit_bias is too large");
  return guarded([&] {
    auto s = dsv41::Sampler::create(sampler_from_c(params), vocab_size);
    if (!s.is_ok()) return fail(s.status());
    *out = new dsv41_sampler{std::move(s).value()};
    return DSV41_OK;
  });
}

void dsv41_sampler_free(dsv41_sampler* sampler) { delete sampler; }

dsv41_status dsv41_sampler_sample(dsv41_sampler* sampler, const float* logits, size_t n,
                                  int32_t* token_out) {
  if (sampler == nullptr) return invalid("dsv41_sampler_sample: sampler is NULL");
  if (token_out == nullptr) return invalid("dsv41_sampler_sample: token_out is NULL");
  if (logits == nullptr && n > 0) return invalid("dsv41_sampler_sample: logits is NULL with n > 0");
  if (n > kMaxCount) return invalid("dsv41_sampler_sample: n is too large");
  return guarded([&] {
    auto t = sampler->sampler.sample(std::span<const float>(logits, n));
    if (!t.is_ok()) return fail(t.status());
    *token_out = *t;
    return DSV41_OK;
  });
}

dsv41_status dsv41_sampler_accept(dsv41_sampler* sampler, int32_t token) {
  if (sampler == nullptr) return invalid("dsv41_sampler_accept: sampler is NULL");
  return guarded([&] {
    dsv41::Status st = sampler->sampler.accept(token);
    return st.is_ok() ? DSV41_OK : fail(st);
  });
}

dsv41_speculative_params dsv41_speculative_default_params(void) {
  dsv41::SpeculativeParams s;
  dsv41::NgramDrafterParams n;
  dsv41_speculative_params p{};
  p.max_draft_tokens = s.max_draft_tokens;
  p.min_ngram = n.min_ngram;
  p.max_ngram = n.max_ngram;
  p.lookback = n.lookback;
  return p;
}

dsv41_status dsv41_speculative_create(const dsv41_model* model,
                                      const dsv41_speculative_params* params,
                                      dsv41_speculative** out) {
  if (out == nullptr) return invalid("dsv41_speculative_create: out is NULL");
  *out = nullptr;
  if (model == nullptr) return invalid("dsv41_speculative_create: model is NULL");
  return guarded([&] {
    const dsv41_speculative_params p = params ? *params : dsv41_speculative_default_params();
    auto drafter = [&]() -> dsv41::Result<std::unique_ptr<dsv41::Drafter>> {
      if (p.dspark) {
        dsv41::DsparkDrafterParams dp;
        dp.confidence_threshold = p.confidence_threshold;
        return dsv41::make_dspark_drafter(model->model, dp);
      }
      dsv41::NgramDrafterParams np;
      np.min_ngram = p.min_ngram;
      np.max_ngram = p.max_ngram;
      np.lookback = p.lookback;
      return dsv41::make_ngram_drafter(np);
    }();
    if (!drafter.is_ok()) return fail(drafter.status());
    dsv41::SpeculativeParams sp;
    sp.max_draft_tokens = p.max_draft_tokens;
    if (p.has_seed) sp.seed = p.seed;
    auto d = dsv41::SpeculativeDecoder::create(model->model, std::move(drafter).value(), sp);
    if (!d.is_ok()) return fail(d.status());
    *out = new dsv41_speculative{std::move(d).value()};
    return DSV41_OK;
  });
}

void dsv41_speculative_free(dsv41_speculative* spec) { delete spec; }

dsv41_status dsv41_speculative_step(dsv41_speculative* spec, dsv41_session* session,
                                    dsv41_sampler* sampler, int32_t next, int64_t max_tokens,
                                    int32_t* tokens, size_t capacity, size_t* n_out,
                                    int32_t* accepted_out) {
  if (spec == nullptr) return invalid("dsv41_speculative_step: spec is NULL");
  if (session == nullptr) return invalid("dsv41_speculative_step: session is NULL");
  if (sampler == nullptr) return invalid("dsv41_speculative_step: sampler is NULL");
  if (n_out == nullptr) return invalid("dsv41_speculative_step: n_out is NULL");
  if (tokens == nullptr && capacity > 0)
    return invalid("dsv41_speculative_step: tokens is NULL with capacity > 0");
  // Checked before the round: its tokens are accepted by the sampler and cannot be handed back.
  const size_t need = static_cast<size_t>(spec->decoder.params().max_draft_tokens) + 1;
  if (capacity < need) {
    *n_out = need;
    set_error("dsv41_speculative_step: capacity " + std::to_string(capacity) +
              " is below max_draft_tokens + 1 = " + std::to_string(need));
    return DSV41_ERR_BUFFER_TOO_SMALL;
  }
  return guarded([&] {
    auto r = spec->decoder.step(session->session, sampler->sampler, next, max_tokens);
    if (!r.is_ok()) return fail(r.status());
    *n_out = r->tokens.size();
    std::memcpy(tokens, r->tokens.data(), r->tokens.size() * sizeof(int32_t));
    if (accepted_out != nullptr) *accepted_out = r->accepted;
    return DSV41_OK;
  });
}

dsv41_status dsv41_speculative_get_stats(const dsv41_speculative* spec,
                                         dsv41_speculative_stats* out) {
  if (spec == nullptr) return invalid("dsv41_speculative_get_stats: spec is NULL");
  if (out == nullptr) return invalid("dsv41_speculative_get_stats: out is NULL");
  const dsv41::SpeculativeStats& s = spec->decoder.stats();
  *out = dsv41_speculative_stats{s.rounds, s.drafted, s.accepted, s.emitted};
  return DSV41_OK;
}

}  // extern "C"
