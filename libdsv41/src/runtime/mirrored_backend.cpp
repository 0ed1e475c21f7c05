#include "runtime/mirrored_backend.hpp"

#include <algorithm>

#include "core/check.hpp"
#include "model/sequence_mirror.hpp"

namespace dsv41 {
namespace {

// The follower's twin is made (open / fork) only once this wrapper exists, so no failure leaves
// an orphan there; id 0 = none yet (ids start at 1).
class MirroredSequence final : public BackendSequence {
 public:
  MirroredSequence(std::unique_ptr<BackendSequence> inner, SequenceMirror& mirror)
      : inner_(std::move(inner)), mirror_(&mirror) {}
  ~MirroredSequence() override {
    if (id_ != 0) mirror_->release(id_);
  }
  MirroredSequence(const MirroredSequence&) = delete;
  MirroredSequence& operator=(const MirroredSequence&) = delete;

  int64_t pos() const override { return inner_->pos(); }
  const std::vector<int32_t>& tokens() const override { return inner_->tokens(); }
  int64_t max_context() const override { return inner_->max_context(); }
  bool preallocated() const override { return inner_->preallocated(); }
  void reset() override {
    inner_->reset();
    mirror_->reset(id_);
  }
  // Local first: a rollback past the depth throws and leaves both ranks unchanged. (A send that
  // fails after it leaves rank 0 rolled back with an error: the link is then dead anyway.)
  void rollback(int64_t n) override {
    inner_->rollback(n);
    mirror_->rollback(id_, n);
  }
  // The copy first (it may fail for memory), then the follower's.
  std::unique_ptr<BackendSequence> clone(int64_t max_context) const override {
    auto c = std::make_unique<MirroredSequence>(inner_->clone(max_context), *mirror_);
    c->id_ = mirror_->fork(id_, max_context);
    return c;
  }
  void reserve(int64_t end_pos) override { inner_->reserve(end_pos); }

  BackendSequence& inner() { return *inner_; }
  uint64_t id() const { return id_; }
  void set_id(uint64_t id) { id_ = id; }

 private:
  std::unique_ptr<BackendSequence> inner_;
  SequenceMirror* mirror_;
  uint64_t id_ = 0;
};

class MirroredBackend final : public ForwardBackend {
 public:
  MirroredBackend(std::unique_ptr<ForwardBackend> inner, parallel::TpComm& comm, int64_t vocab,
                  int64_t hidden)
      : inner_(std::move(inner)), mirror_(comm), vocab_(vocab), hidden_(hidden) {}

  const char* name() const override { return inner_->name(); }
  int64_t max_context() const override { return inner_->max_context(); }
  std::unique_ptr<BackendSequence> new_sequence(const StateOptions& opts) const override {
    auto m = std::make_unique<MirroredSequence>(inner_->new_sequence(opts), mirror_);
    m->set_id(mirror_.open(opts.max_rollback, m->max_context()));
    return m;
  }
  std::vector<float> forward(BackendSequence& seq, std::span<const int32_t> ids,
                             bool all_rows) const override {
    auto& m = static_cast<MirroredSequence&>(seq);
    auto step = begin(m, ids, !all_rows);
    try {
      return inner_->forward(m.inner(), ids, all_rows);
    } catch (const std::exception& e) {
      fail_after_send(e);
    }
  }
  bool takes_image_embeddings() const override { return inner_->takes_image_embeddings(); }
  // The follower gets the flags and the embedding rows with the op (it has no tower input):
  // rank 0 encodes once, both ranks run the same span.
  std::vector<float> forward_image(BackendSequence& seq, std::span<const int32_t> ids,
                                   std::span<const uint8_t> flags, std::span<const float> embeds,
                                   bool all_rows) const override {
    DSV41_CHECK(inner_->takes_image_embeddings(), kUnsupported,
                "the {} backend does not take image embeddings", inner_->name());
    auto& m = static_cast<MirroredSequence&>(seq);
    auto step = begin(m, ids, !all_rows, flags, embeds);
    try {
      return inner_->forward_image(m.inner(), ids, flags, embeds, all_rows);
    } catch (const std::exception& e) {
      fail_after_send(e);
    }
  }
  bool has_dspark() const override { return inner_->has_dspark(); }
  // The follower runs the same round (its all-reduces and all-gathers pair with these) and
  // drops the drafts; the cut by confidence happens after the round, so it needs no mirroring.
  std::vector<int32_t> dspark_draft(BackendSequence& seq, int32_t next, int max_tokens,
                                    float confidence_threshold) const override {
    DSV41_CHECK(inner_->has_dspark(), kUnsupported,
                "the model was loaded without the DSpark module (ModelParams.dspark)");
    DSV41_CHECK(next >= 0 && next < vocab_, kInvalidArgument,
                "DSpark: next = {} is outside the vocabulary [0, {})", next, vocab_);
    auto& m = static_cast<MirroredSequence&>(seq);
    std::unique_lock<std::recursive_mutex> step = mirror_.hold();
    mirror_.draft(m.id(), m.pos(), next);
    try {
      return inner_->dspark_draft(m.inner(), next, max_tokens, confidence_threshold);
    } catch (const std::exception& e) {
      fail_after_send(e);
    }
  }
  bool samples_on_device() const override { return inner_->samples_on_device(); }
  sampling::DeviceSampleOutcome forward_sample(BackendSequence& seq, std::span<const int32_t> ids,
                                               const sampling::SamplePlan& plan) const override {
    DSV41_CHECK(inner_->samples_on_device(), kUnsupported,
                "the {} backend does not sample on a device", inner_->name());
    auto& m = static_cast<MirroredSequence&>(seq);
    auto step = begin(m, ids, true);  // the follower runs a last-row forward
    try {
      return inner_->forward_sample(m.inner(), ids, plan);
    } catch (const std::exception& e) {
      fail_after_send(e);
    }
  }

 private:
  // Checks what would make the call fail before its collectives, takes the memory, then tells
  // the follower; the returned lock holds the mirror until the caller's pass is done.
  std::unique_lock<std::recursive_mutex> begin(MirroredSequence& m, std::span<const int32_t> ids,
                                               bool last_row, std::span<const uint8_t> flags = {},
                                               std::span<const float> embeds = {}) const {
    const int64_t T = static_cast<int64_t>(ids.size()), pos0 = m.pos();
    DSV41_CHECK(T > 0, kInvalidArgument, "forward: no tokens");
    DSV41_CHECK(flags.empty() || static_cast<int64_t>(flags.size()) == T, kInvalidArgument,
                "forward: {} image flags for {} tokens", flags.size(), T);
    int64_t flagged = 0;
    for (uint8_t f : flags) flagged += f != 0 ? 1 : 0;
    DSV41_CHECK(static_cast<int64_t>(embeds.size()) == flagged * hidden_, kInvalidArgument,
                "forward: {} image embedding values for {} image positions of width {}",
                embeds.size(), flagged, hidden_);
    for (int64_t i = 0; i < T; ++i)
      DSV41_CHECK(ids[i] >= 0 && ids[i] < vocab_, kInvalidArgument,
                  "forward: token id {} at position {} (ids[{}]) is outside the vocabulary of {}",
                  ids[i], pos0 + i, i, vocab_);
    const int64_t limit = std::min(m.max_context(), inner_->max_context());
    DSV41_CHECK(pos0 + T <= limit, kContextOverflow,
                "forward: positions up to {} exceed the maximum context of {} tokens", pos0 + T,
                limit);
    std::unique_lock<std::recursive_mutex> step = mirror_.hold();
    m.inner().reserve(pos0 + T);
    mirror_.forward(m.id(), pos0, ids, last_row, flags, embeds);
    return step;
  }

  // A failure of rank 0's pass after the follower was told (memory, a device error): the
  // follower is inside the same pass waiting for a collective, so the link is aborted with the
  // reason (both ranks fail at once, naming it) and the error is rethrown.
  [[noreturn]] void fail_after_send(const std::exception& e) const {
    mirror_.abort(std::string("TP rank 0 failed a forward after the follower started it: ") +
                  e.what());
    throw;
  }

  std::unique_ptr<ForwardBackend> inner_;
  mutable SequenceMirror mirror_;
  int64_t vocab_;
  int64_t hidden_;
};

}  // namespace

std::unique_ptr<ForwardBackend> make_mirrored_backend(std::unique_ptr<ForwardBackend> inner,
                                                      parallel::TpComm& comm, int64_t vocab_size,
                                                      int64_t hidden_size) {
  return std::make_unique<MirroredBackend>(std::move(inner), comm, vocab_size, hidden_size);
}

}  // namespace dsv41
