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

namespace {

// The checks of every append: ids in the vocabulary, the context limit.
void check_append(const Session::Impl& s, std::span<const int32_t> ids) {
  const ModelInfo& info = s.model->info;
  DSV41_CHECK(!ids.empty(), kInvalidArgument, "no tokens to append");
  for (size_t i = 0; i < ids.size(); ++i)
    DSV41_CHECK(ids[i] >= 0 && ids[i] < info.vocab_size, kInvalidArgument,
                "token ids[{}] = {} is outside the vocabulary [0, {})", i, ids[i], info.vocab_size);
  const int64_t limit = std::min(s.params.max_context, info.max_position_embeddings);
  DSV41_CHECK(s.state->pos() + static_cast<int64_t>(ids.size()) <= limit, kContextOverflow,
              "{} tokens at position {} exceed the maximum context of {} tokens", ids.size(),
              s.state->pos(), limit);
}

// Runs ids through the backend in chunks of params.chunk_tokens: last(chunk) for the final
// chunk, rest(chunk) for the others. A failure resets the sequence (half a chunk may be in it).
template <class Rest, class Last>
void run_chunks(Session::Impl& s, std::span<const int32_t> ids, Rest rest, Last last) {
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t chunk = s.params.chunk_tokens > 0 ? s.params.chunk_tokens : n;
  try {
    for (int64_t b = 0; b < n; b += chunk) {
      const int64_t e = std::min(n, b + chunk);
      if (e == n) {
        last(ids.subspan(b, e - b));
      } else {
        rest(ids.subspan(b, e - b));
      }
    }
  } catch (...) {
    s.state->reset();
    throw;
  }
}

}  // namespace

std::vector<float> session_append(Session::Impl& s, std::span<const int32_t> ids, bool all_logits,
                                  std::span<const uint8_t> image_flags,
                                  std::span<const float> image_rows) {
  check_append(s, ids);
  const ForwardBackend& backend = *s.model->backend;
  BackendSequence& seq = *s.state;
  const int64_t D = s.model->info.hidden_size;
  DSV41_CHECK(image_flags.empty() || image_flags.size() == ids.size(), kInvalidArgument,
              "{} image flags for {} tokens", image_flags.size(), ids.size());
  std::vector<float> out;
  if (all_logits) out.reserve(ids.size() * static_cast<size_t>(s.model->info.vocab_size));
  // One chunk through the backend: the chunk's flags, and its flagged rows (they follow the
  // flagged positions before it).
  size_t rows_used = 0;
  auto forward = [&](std::span<const int32_t> c) {
    if (image_flags.empty()) return backend.forward(seq, c, all_logits);
    const size_t b = static_cast<size_t>(c.data() - ids.data());
    const std::span<const uint8_t> flags = image_flags.subspan(b, c.size());
    const size_t n = static_cast<size_t>(
        std::count_if(flags.begin(), flags.end(), [](uint8_t f) { return f != 0; }));
    DSV41_CHECK((rows_used + n) * static_cast<size_t>(D) <= image_rows.size(), kInvalidArgument,
                "{} image embedding values for more than {} image positions of width {}",
                image_rows.size(), rows_used + n, D);
    const std::span<const float> rows =
        image_rows.subspan(rows_used * static_cast<size_t>(D), n * static_cast<size_t>(D));
    rows_used += n;
    if (n == 0) return backend.forward(seq, c, all_logits);
    return backend.forward_image(seq, c, flags, rows, all_logits);
  };
  // Only the last chunk's last row is wanted without all_logits: the CUDA head then runs
  // on one row instead of 129,280 x chunk logits.
  auto rest = [&](std::span<const int32_t> c) {
    std::vector<float> logits = forward(c);
    if (all_logits) out.insert(out.end(), logits.begin(), logits.end());
  };
  auto last = [&](std::span<const int32_t> c) {
    std::vector<float> logits = forward(c);
    if (all_logits) {
      out.insert(out.end(), logits.begin(), logits.end());
    } else {
      out = std::move(logits);
    }
  };
  run_chunks(s, ids, rest, last);
  return out;
}

std::vector<float> session_append_image(Session::Impl& s, const ImageEmbedding& image,
                                        bool all_logits) {
  const Model::Impl& m = *s.model;
  const ImageEmbedding::Impl& e = image.impl();
  DSV41_CHECK(e.dim == m.info.hidden_size, kInvalidArgument,
              "image embedding width {} differs from this model's hidden size {} (encode the "
              "image with this session's model)",
              e.dim, m.info.hidden_size);
  const int64_t n = e.layout.span_length();
  DSV41_CHECK(static_cast<int64_t>(e.values.size()) == n * e.dim, kInternal,
              "image embedding holds {} values for {} positions of {}", e.values.size(), n, e.dim);
  const std::vector<int32_t> ids(static_cast<size_t>(n), m.transformer->config().image_token_id);
  check_append(s, ids);
  const std::vector<uint8_t> flags(static_cast<size_t>(n), 1);
  try {
    return m.backend->forward_image(*s.state, ids, flags, e.values, all_logits);
  } catch (const detail::Failure& f) {
    // Nothing was appended when the backend refuses; any other failure may leave half a span.
    if (f.code() != ErrorCode::kUnsupported) s.state->reset();
    throw;
  }
}

sampling::DeviceSampleOutcome session_append_sample(Session::Impl& s, std::span<const int32_t> ids,
                                                    const sampling::SamplePlan& plan) {
  check_append(s, ids);
  const ForwardBackend& backend = *s.model->backend;
  BackendSequence& seq = *s.state;
  sampling::DeviceSampleOutcome out;
  run_chunks(
      s, ids, [&](std::span<const int32_t> c) { (void)backend.forward(seq, c, false); },
      [&](std::span<const int32_t> c) { out = backend.forward_sample(seq, c, plan); });
  return out;
}

Result<Session> Session::create(const Model& model, const SessionParams& params) {
  Status st = params.validate();
  if (!st.is_ok()) return st;
  std::unique_ptr<Impl> impl;
  st = detail::capture_status([&] {
    impl = std::make_unique<Impl>();
    impl->model = model.impl();
    impl->params = params;
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

Result<std::vector<float>> Session::append_image(const ImageEmbedding& image, bool all_logits) {
  std::vector<float> out;
  Status st =
      detail::capture_status([&] { out = session_append_image(*impl_, image, all_logits); });
  if (!st.is_ok()) return st;
  return out;
}

int64_t Session::position() const { return impl_->state->pos(); }
int64_t Session::max_context() const {
  return std::min(impl_->params.max_context, impl_->model->info.max_position_embeddings);
}
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
