// Session: one sequence on the model's forward backend, prefill in chunks, decode, fork.
#include "dsv41/session.hpp"

#include <algorithm>

#include "core/check.hpp"
#include "runtime/model_impl.hpp"

namespace dsv41 {

Status SessionParams::validate() const {
  if (max_context < 1)
    return Status(ErrorCode::kInvalidArgument,
                  "SessionParams.max_context = " + std::to_string(max_context) + " must be >= 1");
  if (chunk_tokens < 0)
    return Status(ErrorCode::kInvalidArgument,
                  "SessionParams.chunk_tokens = " + std::to_string(chunk_tokens) + " must be >= 0");
  return Status::ok();
}

std::vector<float> session_append(Session::Impl& s, std::span<const int32_t> ids, bool all_logits) {
  const ModelInfo& info = s.model->info;
  DSV41_CHECK(!ids.empty(), kInvalidArgument, "no tokens to append");
  for (size_t i = 0; i < ids.size(); ++i)
    DSV41_CHECK(ids[i] >= 0 && ids[i] < info.vocab_size, kInvalidArgument,
                "token ids[{}] = {} is outside the vocabulary [0, {})", i, ids[i], info.vocab_size);
  const int64_t limit = std::min(s.params.max_context, info.max_position_embeddings);
  BackendSequence& seq = *s.state;
  DSV41_CHECK(seq.pos() + static_cast<int64_t>(ids.size()) <= limit, kContextOverflow,
              "{} tokens at position {} exceed the maximum context of {} tokens", ids.size(),
              seq.pos(), limit);
  const ForwardBackend& backend = *s.model->backend;
  const int64_t V = info.vocab_size;
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t chunk = s.params.chunk_tokens > 0 ? s.params.chunk_tokens : n;
  std::vector<float> out;
  if (all_logits) out.reserve(static_cast<size_t>(n * V));
  try {
    for (int64_t b = 0; b < n; b += chunk) {
      const int64_t e = std::min(n, b + chunk);
      // Only the last chunk's last row is wanted without all_logits: the CUDA head then runs
      // on one row instead of 129,280 x chunk logits.
      std::vector<float> logits = backend.forward(seq, ids.subspan(b, e - b), all_logits);
      if (all_logits) {
        out.insert(out.end(), logits.begin(), logits.end());
      } else if (e == n) {
        out = std::move(logits);
      }
    }
  } catch (...) {
    seq.reset();  // a failure inside forward (e.g. out of memory) may leave half a chunk
    throw;
  }
  return out;
}

Result<Session> Session::create(const Model& model, const SessionParams& params) {
  Status st = params.validate();
  if (!st.is_ok()) return st;
  auto impl = std::make_unique<Impl>();
  impl->model = model.impl();
  impl->params = params;
  st = detail::capture_status([&] {
    StateOptions o;
    o.max_context = std::min(params.max_context, impl->model->info.max_position_embeddings);
    impl->state = SequenceHandle(impl->model->backend->new_sequence(o));
  });
  if (!st.is_ok()) return st;
  return Session(std::move(impl));
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;

Result<std::vector<float>> Session::append(std::span<const int32_t> ids, bool all_logits) {
  std::vector<float> out;
  Status st = detail::capture_status([&] { out = session_append(*impl_, ids, all_logits); });
  if (!st.is_ok()) return st;
  return out;
}

int64_t Session::position() const { return impl_->state->pos(); }
const std::vector<int32_t>& Session::tokens() const { return impl_->state->tokens(); }
void Session::reset() { impl_->state->reset(); }

Status Session::rollback(int64_t n) {
  return detail::capture_status([&] { impl_->state->rollback(n); });
}

Result<Session> Session::fork() const {
  std::unique_ptr<Impl> impl;
  Status st = detail::capture_status([&] { impl = std::make_unique<Impl>(*impl_); });
  if (!st.is_ok()) return st;  // e.g. kOutOfMemory copying device state
  return Session(std::move(impl));
}

}  // namespace dsv41
