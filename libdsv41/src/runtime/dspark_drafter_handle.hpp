// The Drafter make_dspark_drafter() returns: a marker carrying the DSpark parameters. Its drafts
// come from a sequence's state through ForwardBackend::dspark_draft, which SpeculativeDecoder and
// the Engine call in its place (speculative::RoundTarget::propose).
#pragma once

#include "dsv41/speculative.hpp"
#include "runtime/forward_backend.hpp"

namespace dsv41 {

class DsparkDrafterHandle final : public Drafter {
 public:
  explicit DsparkDrafterHandle(const DsparkDrafterParams& p) : params_(p) {}
  Result<Draft> propose(std::span<const int32_t>, int) override {
    return Status(ErrorCode::kUnsupported,
                  "the DSpark drafter drafts from a sequence's state: use it through "
                  "SpeculativeDecoder::step");
  }
  // The drafts after the pending token `next` of seq.
  Draft propose_for(const ForwardBackend& backend, BackendSequence& seq, int32_t next,
                    int max_tokens) const {
    Draft d;
    d.tokens = backend.dspark_draft(seq, next, max_tokens, params_.confidence_threshold);
    return d;
  }

 private:
  DsparkDrafterParams params_;
};

}  // namespace dsv41
