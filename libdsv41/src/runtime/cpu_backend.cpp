// The CPU reference backend: SequenceState + Transformer::forward behind ForwardBackend.
#include "core/check.hpp"
#include "model/sequence_state.hpp"
#include "model/transformer.hpp"
#include "runtime/forward_backend.hpp"

namespace dsv41 {

// ForwardBackend's default, for backends that keep the logits on the host.
sampling::DeviceSampleOutcome ForwardBackend::forward_sample(BackendSequence&,
                                                             std::span<const int32_t>,
                                                             const sampling::SamplePlan&) const {
  DSV41_FAIL(kUnsupported, "the {} backend does not sample on a device", name());
}

namespace {

class CpuSequence final : public BackendSequence {
 public:
  explicit CpuSequence(SequenceState s) : s_(std::move(s)) {}
  int64_t pos() const override { return s_.pos; }
  const std::vector<int32_t>& tokens() const override { return s_.tokens; }
  int64_t max_context() const override { return s_.attn.options.max_context; }
  bool preallocated() const override { return false; }
  void reset() override { s_.reset(); }
  void rollback(int64_t n) override { s_.rollback(n); }
  std::unique_ptr<BackendSequence> clone(int64_t max_context) const override {
    DSV41_CHECK(max_context >= s_.pos, kInvalidArgument,
                "sequence clone: max_context = {} is below the {} positions it must hold",
                max_context, s_.pos);
    auto c = std::make_unique<CpuSequence>(s_);  // pages are copied
    c->s_.attn.options.max_context = max_context;
    return c;
  }
  void reserve(int64_t end_pos) override { s_.attn.reserve_positions(end_pos); }
  SequenceState& state() { return s_; }

 private:
  SequenceState s_;
};

class CpuBackend final : public ForwardBackend {
 public:
  explicit CpuBackend(const Transformer& t) : t_(t) {}
  const char* name() const override { return "cpu"; }
  int64_t max_context() const override { return t_.config().text.max_position_embeddings; }
  std::unique_ptr<BackendSequence> new_sequence(const StateOptions& opts) const override {
    return std::make_unique<CpuSequence>(t_.new_sequence(opts));
  }
  std::vector<float> forward(BackendSequence& seq, std::span<const int32_t> ids,
                             bool all_rows) const override {
    std::vector<float> logits = t_.forward(static_cast<CpuSequence&>(seq).state(), ids);
    if (all_rows) return logits;
    const int64_t V = t_.config().text.vocab_size;
    return std::vector<float>(logits.end() - V, logits.end());
  }

 private:
  const Transformer& t_;
};

}  // namespace

std::unique_ptr<ForwardBackend> make_cpu_backend(const Transformer& t) {
  return std::make_unique<CpuBackend>(t);
}

}  // namespace dsv41
