// The CPU reference backend: SequenceState + Transformer::forward behind ForwardBackend.
#include "core/check.hpp"
#include "model/dspark/dspark_drafter.hpp"
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

std::vector<float> ForwardBackend::forward_image(BackendSequence&, std::span<const int32_t>,
                                                 std::span<const uint8_t>, std::span<const float>,
                                                 bool) const {
  DSV41_FAIL(kUnsupported,
             "the {} backend does not take image embeddings yet (images run on the CPU "
             "backend: --backend cpu / DSV41_BACKEND=cpu)",
             name());
}

std::vector<int32_t> ForwardBackend::dspark_draft(BackendSequence&, int32_t, int, float) const {
  DSV41_FAIL(kUnsupported,
             "the {} backend has no DSpark drafter (load the model with "
             "ModelParams.dspark on the CPU backend)",
             name());
}

std::vector<int32_t> cut_by_confidence(const DsparkProposal& p, int max_tokens, float threshold) {
  std::vector<int32_t> out;
  float survival = 1.0f;
  for (size_t k = 0; k < p.tokens.size() && static_cast<int>(out.size()) < max_tokens; ++k) {
    survival *= p.confidence[k];
    if (survival < threshold) break;
    out.push_back(p.tokens[k]);
  }
  return out;
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
  explicit CpuBackend(const Transformer& t) : t_(t) {
    if (t.weights().dspark) dspark_ = std::make_unique<DsparkDrafter>(t);
  }
  const char* name() const override { return "cpu"; }
  int64_t max_context() const override { return t_.config().text.max_position_embeddings; }
  std::unique_ptr<BackendSequence> new_sequence(const StateOptions& opts) const override {
    return std::make_unique<CpuSequence>(t_.new_sequence(opts));
  }
  std::vector<float> forward(BackendSequence& seq, std::span<const int32_t> ids,
                             bool all_rows) const override {
    return forward_image(seq, ids, {}, {}, all_rows);
  }
  bool takes_image_embeddings() const override { return true; }
  std::vector<float> forward_image(BackendSequence& seq, std::span<const int32_t> ids,
                                   std::span<const uint8_t> flags, std::span<const float> embeds,
                                   bool all_rows) const override {
    std::vector<float> logits =
        t_.forward(static_cast<CpuSequence&>(seq).state(), ids, flags, embeds);
    if (all_rows) return logits;
    const int64_t V = t_.config().text.vocab_size;
    return std::vector<float>(logits.end() - V, logits.end());
  }
  bool has_dspark() const override { return dspark_ != nullptr; }
  std::vector<int32_t> dspark_draft(BackendSequence& seq, int32_t next, int max_tokens,
                                    float confidence_threshold) const override {
    if (!dspark_) return ForwardBackend::dspark_draft(seq, next, max_tokens, confidence_threshold);
    const DsparkProposal p = dspark_->draft(static_cast<CpuSequence&>(seq).state(), next);
    return cut_by_confidence(p, max_tokens, confidence_threshold);
  }

 private:
  const Transformer& t_;
  std::unique_ptr<DsparkDrafter> dspark_;
};

}  // namespace

std::unique_ptr<ForwardBackend> make_cpu_backend(const Transformer& t) {
  return std::make_unique<CpuBackend>(t);
}

}  // namespace dsv41
