// The C ABI of Sampler and SpeculativeDecoder on tiny8: arguments named, the capacity rule checked
// before anything runs, and speculative greedy decoding through C equal to a plain C loop.
#include <vector>

#include "capi_case.hpp"

using dsv41::test::CapiModel;
using dsv41::test::last_error;
using dsv41::test::require_status;

namespace {

// Greedy with output that cycles (bias on three tokens, a frequency penalty), so prompt lookup's
// drafts are accepted as well as rejected.
const int32_t kBiasIds[] = {10, 20, 30};
const float kBias[] = {50.0f, 50.0f, 50.0f};

dsv41_sampler* greedy_sampler(int64_t vocab) {
  dsv41_sampler_params p = dsv41_sampler_default_params();
  p.temperature = 0;
  p.logit_bias_ids = kBiasIds;
  p.logit_bias_values = kBias;
  p.n_logit_bias = 3;
  p.frequency_penalty = 2.0f;
  dsv41_sampler* s = nullptr;
  REQUIRE(dsv41_sampler_create(&p, vocab, &s) == DSV41_OK);
  return s;
}

dsv41_session* new_session(dsv41_model* m) {
  dsv41_session* s = nullptr;
  REQUIRE(dsv41_session_create(m, nullptr, &s) == DSV41_OK);
  return s;
}

// Appends ids and returns the last position's logits.
std::vector<float> append(dsv41_session* s, const std::vector<int32_t>& ids, int64_t vocab) {
  std::vector<float> logits(vocab);
  size_t n = 0;
  REQUIRE(dsv41_session_append(s, ids.data(), ids.size(), 0, logits.data(), logits.size(), &n) ==
          DSV41_OK);
  return logits;
}

const std::vector<int32_t> kPrompt = {5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6};

}  // namespace

TEST_CASE("capi: sampler arguments are named", "[golden]") {
  dsv41_sampler* s = nullptr;
  require_status(dsv41_sampler_create(nullptr, 600, nullptr), DSV41_ERR_INVALID_ARGUMENT,
                 "out is NULL");
  dsv41_sampler_params p = dsv41_sampler_default_params();
  p.top_p = 1.5f;
  require_status(dsv41_sampler_create(&p, 600, &s), DSV41_ERR_INVALID_ARGUMENT,
                 "SamplerParams.top_p = 1.5");
  REQUIRE(s == nullptr);
  p = dsv41_sampler_default_params();
  p.n_logit_bias = 1;
  require_status(dsv41_sampler_create(&p, 600, &s), DSV41_ERR_INVALID_ARGUMENT,
                 "logit_bias arrays are NULL");
  s = greedy_sampler(600);
  int32_t t = -1;
  std::vector<float> logits(600, 0.0f);
  logits[42] = 100.0f;
  REQUIRE(dsv41_sampler_sample(s, logits.data(), logits.size(), &t) == DSV41_OK);
  REQUIRE(t == 42);
  require_status(dsv41_sampler_sample(s, logits.data(), 599, &t), DSV41_ERR_INVALID_ARGUMENT,
                 "expected vocab_size 600");
  require_status(dsv41_sampler_sample(s, nullptr, 600, &t), DSV41_ERR_INVALID_ARGUMENT,
                 "logits is NULL");
  require_status(dsv41_sampler_sample(s, logits.data(), 600, nullptr), DSV41_ERR_INVALID_ARGUMENT,
                 "token_out is NULL");
  require_status(dsv41_sampler_accept(s, 600), DSV41_ERR_INVALID_ARGUMENT, "600");
  require_status(dsv41_sampler_accept(nullptr, 1), DSV41_ERR_INVALID_ARGUMENT, "sampler is NULL");
  dsv41_sampler_free(s);
  dsv41_sampler_free(nullptr);
}

TEST_CASE("capi: speculative greedy decoding equals a plain loop, arguments are named",
          "[golden]") {
  CapiModel m;
  const int64_t V = dsv41_model_vocab_size(m.model);
  constexpr int kN = 20;
  // Plain: sample, accept, append, one token at a time.
  std::vector<int32_t> want;
  {
    dsv41_session* s = new_session(m.model);
    dsv41_sampler* smp = greedy_sampler(V);
    std::vector<float> logits = append(s, kPrompt, V);
    for (int i = 0; i < kN; ++i) {
      int32_t t = -1;
      REQUIRE(dsv41_sampler_sample(smp, logits.data(), logits.size(), &t) == DSV41_OK);
      REQUIRE(dsv41_sampler_accept(smp, t) == DSV41_OK);
      want.push_back(t);
      logits = append(s, {t}, V);
    }
    dsv41_sampler_free(smp);
    dsv41_session_free(s);
  }
  dsv41_speculative_params sp = dsv41_speculative_default_params();
  REQUIRE(sp.max_draft_tokens == 5);
  REQUIRE(sp.min_ngram == 2);
  REQUIRE(sp.max_ngram == 4);
  REQUIRE(sp.lookback == 0);
  REQUIRE(sp.dspark == 0);
  REQUIRE(sp.confidence_threshold == 0.0f);
  sp.min_ngram = 1;
  dsv41_speculative* spec = nullptr;
  REQUIRE(dsv41_speculative_create(m.model, &sp, &spec) == DSV41_OK);
  dsv41_session* s = new_session(m.model);
  dsv41_sampler* smp = greedy_sampler(V);
  std::vector<float> logits = append(s, kPrompt, V);
  int32_t next = -1;
  REQUIRE(dsv41_sampler_sample(smp, logits.data(), logits.size(), &next) == DSV41_OK);
  REQUIRE(dsv41_sampler_accept(smp, next) == DSV41_OK);
  std::vector<int32_t> got = {next};
  std::vector<int32_t> buf(6);
  size_t n = 0;
  // Capacity below max_draft_tokens + 1: refused before the round, nothing appended.
  require_status(dsv41_speculative_step(spec, s, smp, next, kN, buf.data(), 5, &n, nullptr),
                 DSV41_ERR_BUFFER_TOO_SMALL, "capacity 5 is below max_draft_tokens + 1 = 6");
  REQUIRE(n == 6);
  REQUIRE(dsv41_session_position(s) == static_cast<int64_t>(kPrompt.size()));
  require_status(dsv41_speculative_step(spec, s, smp, 600, kN, buf.data(), 6, &n, nullptr),
                 DSV41_ERR_INVALID_ARGUMENT, "next = 600 is outside the vocabulary");
  require_status(dsv41_speculative_step(nullptr, s, smp, next, kN, buf.data(), 6, &n, nullptr),
                 DSV41_ERR_INVALID_ARGUMENT, "spec is NULL");
  require_status(dsv41_speculative_step(spec, nullptr, smp, next, kN, buf.data(), 6, &n, nullptr),
                 DSV41_ERR_INVALID_ARGUMENT, "session is NULL");
  require_status(dsv41_speculative_step(spec, s, nullptr, next, kN, buf.data(), 6, &n, nullptr),
                 DSV41_ERR_INVALID_ARGUMENT, "sampler is NULL");
  require_status(dsv41_speculative_step(spec, s, smp, next, kN, buf.data(), 6, nullptr, nullptr),
                 DSV41_ERR_INVALID_ARGUMENT, "n_out is NULL");
  while (got.size() < static_cast<size_t>(kN)) {
    int32_t accepted = -1;
    const dsv41_status st =
        dsv41_speculative_step(spec, s, smp, next, kN - static_cast<int64_t>(got.size()),
                               buf.data(), buf.size(), &n, &accepted);
    INFO(last_error());
    REQUIRE(st == DSV41_OK);
    REQUIRE(n >= 1);
    REQUIRE(accepted >= 0);
    REQUIRE(static_cast<size_t>(accepted) < n);
    got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
    next = got.back();
  }
  REQUIRE(got == want);
  dsv41_speculative_stats stats{};
  REQUIRE(dsv41_speculative_get_stats(spec, &stats) == DSV41_OK);
  REQUIRE(stats.emitted == kN - 1);
  REQUIRE(stats.accepted > 0);
  REQUIRE(stats.accepted < stats.drafted);
  REQUIRE(stats.rounds >= 1);
  require_status(dsv41_speculative_get_stats(spec, nullptr), DSV41_ERR_INVALID_ARGUMENT,
                 "out is NULL");
  dsv41_sampler_free(smp);
  dsv41_session_free(s);
  dsv41_speculative_free(spec);

  sp = dsv41_speculative_default_params();
  sp.max_ngram = 1;
  require_status(dsv41_speculative_create(m.model, &sp, &spec), DSV41_ERR_INVALID_ARGUMENT,
                 "NgramDrafterParams.max_ngram = 1 must be >= min_ngram = 2");
  REQUIRE(spec == nullptr);
  sp = dsv41_speculative_default_params();
  sp.max_draft_tokens = 0;
  require_status(dsv41_speculative_create(m.model, &sp, &spec), DSV41_ERR_INVALID_ARGUMENT,
                 "SpeculativeParams.max_draft_tokens = 0");
  require_status(dsv41_speculative_create(nullptr, &sp, &spec), DSV41_ERR_INVALID_ARGUMENT,
                 "model is NULL");
  sp = dsv41_speculative_default_params();
  sp.dspark = 1;  // tiny8 was loaded without a draft module
  require_status(dsv41_speculative_create(m.model, &sp, &spec), DSV41_ERR_UNSUPPORTED,
                 "ModelParams.dspark = true");
  dsv41_speculative_free(nullptr);

  dsv41_engine_params ep = dsv41_engine_default_params();
  dsv41_engine* engine = nullptr;
  REQUIRE(ep.speculative_tokens == 0);
  REQUIRE(ep.speculative_dspark == 0);
  ep.speculative_tokens = 5;
  ep.speculative_dspark = 1;
  require_status(dsv41_engine_create(m.model, &ep, &engine), DSV41_ERR_UNSUPPORTED,
                 "speculative_method = \"dspark\" needs the model");
  ep.speculative_dspark = 0;
  ep.speculative_tokens = 16;
  require_status(dsv41_engine_create(m.model, &ep, &engine), DSV41_ERR_INVALID_ARGUMENT,
                 "EngineParams.speculative_tokens = 16 must be in [0, 15]");
}
