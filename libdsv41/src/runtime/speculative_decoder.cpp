// SpeculativeDecoder (dsv41/speculative.hpp): speculative::run_round on a Session.
#include "core/check.hpp"
#include "dsv41/speculative.hpp"
#include "runtime/dspark_drafter_handle.hpp"
#include "runtime/model_impl.hpp"
#include "sampling/rng.hpp"
#include "speculative/round.hpp"

namespace dsv41 {

struct DSV41_INTERNAL SpeculativeDecoder::Impl {
  SpeculativeParams params;
  std::unique_ptr<Drafter> drafter;
  speculative::RoundLimits limits;
  sampling::Xoshiro256StarStar rng;
  SpeculativeStats stats;
  std::vector<int32_t> context;  // the drafter's input, reused across rounds
  // The model it was made for, only compared with a session's (never dereferenced): rows of
  // another model's logits have another width, which run_round would read past.
  const Model::Impl* model = nullptr;

  Impl(const SpeculativeParams& p, std::unique_ptr<Drafter> d, const Model& m)
      : params(p),
        drafter(std::move(d)),
        limits{p.max_draft_tokens, m.info().vocab_size, m.info().eos_token_id},
        rng(speculative::acceptance_seed(p.seed)),
        model(m.impl().get()) {}
};

Status DsparkDrafterParams::validate() const {
  if (!(confidence_threshold >= 0.0f && confidence_threshold <= 1.0f))
    return Status(ErrorCode::kInvalidArgument, "DsparkDrafterParams.confidence_threshold = " +
                                                   std::to_string(confidence_threshold) +
                                                   " must be in [0, 1]");
  return Status::ok();
}

Result<std::unique_ptr<Drafter>> make_dspark_drafter(const Model& model,
                                                     const DsparkDrafterParams& params) {
  Status st = params.validate();
  if (!st.is_ok()) return st;
  if (!model.impl()->backend->has_dspark())
    return Status(ErrorCode::kUnsupported,
                  model.info().model_dir +
                      ": the DSpark drafter needs the model loaded with ModelParams.dspark = true "
                      "(CPU backend)");
  return std::unique_ptr<Drafter>(std::make_unique<DsparkDrafterHandle>(params));
}

Result<SpeculativeDecoder> SpeculativeDecoder::create(const Model& model,
                                                      std::unique_ptr<Drafter> drafter,
                                                      const SpeculativeParams& params) {
  Status st = params.validate();
  if (!st.is_ok()) return st;
  if (!drafter)
    return Status(ErrorCode::kInvalidArgument, "SpeculativeDecoder::create: drafter is null");
  std::unique_ptr<Impl> impl;
  st = detail::capture_status(
      [&] { impl = std::make_unique<Impl>(params, std::move(drafter), model); });
  if (!st.is_ok()) return st;
  return SpeculativeDecoder(std::move(impl));
}

SpeculativeDecoder::SpeculativeDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SpeculativeDecoder::SpeculativeDecoder(SpeculativeDecoder&&) noexcept = default;
SpeculativeDecoder& SpeculativeDecoder::operator=(SpeculativeDecoder&&) noexcept = default;
SpeculativeDecoder::~SpeculativeDecoder() = default;

Result<SpeculativeRound> SpeculativeDecoder::step(Session& session, Sampler& sampler, int32_t next,
                                                  int64_t max_tokens) {
  Impl& m = *impl_;
  if (session.impl_->model.get() != m.model)
    return Status(ErrorCode::kInvalidArgument,
                  "SpeculativeDecoder::step: the session belongs to another model ('" +
                      session.impl_->model->info.model_dir +
                      "'); use a session of the model this decoder was created for");
  SpeculativeRound out;
  Status st = detail::capture_status([&] {
    speculative::RoundTarget target;
    target.tokens = session.tokens();
    target.room = session.max_context() - session.position();
    target.append_all = [&](std::span<const int32_t> ids) {
      return DSV41_TAKE(session.append(ids, /*all_logits=*/true));
    };
    target.rollback = [&](int64_t n) { DSV41_TRY(session.rollback(n)); };
    if (const auto* h = dynamic_cast<const DsparkDrafterHandle*>(m.drafter.get())) {
      Session::Impl& s = *session.impl_;
      target.propose = [&s, h](int32_t next, int max_tokens) {
        return Result<Draft>(h->propose_for(*s.model->backend, *s.state, next, max_tokens));
      };
    }
    out = speculative::run_round(target, sampler, *m.drafter, m.rng, m.limits, next, max_tokens,
                                 m.context);
  });
  if (!st.is_ok()) return st;
  ++m.stats.rounds;
  m.stats.drafted += out.drafted;
  m.stats.accepted += out.accepted;
  m.stats.emitted += static_cast<int64_t>(out.tokens.size());
  return out;
}

const SpeculativeStats& SpeculativeDecoder::stats() const { return impl_->stats; }
const SpeculativeParams& SpeculativeDecoder::params() const { return impl_->params; }

}  // namespace dsv41
