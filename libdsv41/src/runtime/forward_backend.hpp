// ForwardBackend: where a model's forward pass runs (docs/architecture.md "Backends"). The runtime
// (Session, Engine) drives every backend through this interface: the CPU reference transformer
// (model/transformer.hpp, the executable spec) or the CUDA forward (backend/cuda/forward/), chosen
// at load by ModelParams.backend / DSV41_BACKEND. A backend owns its sequences' state memory
// (host pages for the CPU, device buffers for CUDA); SequenceHandle gives it value semantics so
// Session::fork and the prefix cache copy states the same way on either.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/attention/attention_state.hpp"
#include "sampling/device_sample_plan.hpp"

namespace dsv41::parallel {
class TpComm;
}  // namespace dsv41::parallel

namespace dsv41 {

class Transformer;

// One sequence's state in a backend's memory. Methods throw detail::Failure.
class BackendSequence {
 public:
  virtual ~BackendSequence() = default;
  virtual int64_t pos() const = 0;
  virtual const std::vector<int32_t>& tokens() const = 0;
  virtual int64_t max_context() const = 0;  // positions it can grow to
  // True when memory for all max_context() positions is held from creation (CUDA), false when
  // it grows with pos() (CPU pages): only the former is worth re-making smaller for a cache.
  virtual bool preallocated() const = 0;
  virtual void reset() = 0;
  // Undoes the last n positions; kInvalidArgument (nothing changed) past the rollback depth.
  virtual void rollback(int64_t n) = 0;
  // A copy of the same positions able to grow to max_context (>= pos()).
  virtual std::unique_ptr<BackendSequence> clone(int64_t max_context) const = 0;
  // Takes the memory a forward up to end_pos needs (CPU: KV pool pages), so that forward cannot
  // fail for memory; an error (kOutOfMemory, kContextOverflow) leaves the state unchanged.
  // The TP mirror calls it before telling the follower. Preallocated states: nothing to take.
  virtual void reserve(int64_t end_pos) { (void)end_pos; }
};

class ForwardBackend {
 public:
  virtual ~ForwardBackend() = default;
  virtual const char* name() const = 0;  // "cpu" or "cuda"
  // Longest sequence this backend holds (CUDA: DSV41_CUDA_MAX_CONTEXT, its workspace's size).
  virtual int64_t max_context() const = 0;
  // opts.max_context <= max_context(); opts.pool is used by the CPU backend only.
  virtual std::unique_ptr<BackendSequence> new_sequence(const StateOptions& opts) const = 0;
  // Appends ids at seq.pos(); logits [T, vocab] (all_rows) or of the last token [vocab].
  virtual std::vector<float> forward(BackendSequence& seq, std::span<const int32_t> ids,
                                     bool all_rows) const = 0;
  // True when forward_image() runs.
  virtual bool takes_image_embeddings() const { return false; }
  // forward() with image-span positions (spec §7.4): flags [T] (non-zero = span position),
  // embeds [n_flagged, hidden] replacing the token embedding there, in order. Default:
  // kUnsupported naming the backend.
  virtual std::vector<float> forward_image(BackendSequence& seq, std::span<const int32_t> ids,
                                           std::span<const uint8_t> flags,
                                           std::span<const float> embeds, bool all_rows) const;
  // True when forward_sample() runs: the sampler's chain on the device that holds the logits.
  virtual bool samples_on_device() const { return false; }
  // Appends ids like forward(seq, ids, false) and samples the last row with plan where the
  // logits are (CUDA: one 16-byte result comes back instead of vocab floats). Statuses as
  // DeviceSampleOutcome; DeviceSampling::finish turns them into Sampler::sample's result.
  // Throws kUnsupported unless samples_on_device().
  virtual sampling::DeviceSampleOutcome forward_sample(BackendSequence& seq,
                                                       std::span<const int32_t> ids,
                                                       const sampling::SamplePlan& plan) const;
  // True when dspark_draft() runs (a model loaded with ModelParams.dspark on this backend).
  virtual bool has_dspark() const { return false; }
  // DSpark draft tokens after the pending token `next` of seq (spec §6.3): at most max_tokens of
  // the block's drafts, cut before the first whose survival Π c_i falls below
  // confidence_threshold (0 keeps the whole block). Throws kUnsupported unless has_dspark().
  virtual std::vector<int32_t> dspark_draft(BackendSequence& seq, int32_t next, int max_tokens,
                                            float confidence_threshold) const;
};

struct DsparkProposal;
// The proposal's tokens, at most max_tokens, cut before the first token k whose survival
// Π_{i<=k} confidence[i] is below threshold (the DeepSpec rule, spec §6.4).
std::vector<int32_t> cut_by_confidence(const DsparkProposal& p, int max_tokens, float threshold);

// The CPU reference backend over t (t must outlive it).
std::unique_ptr<ForwardBackend> make_cpu_backend(const Transformer& t);

struct CudaBackendOptions {
  int max_chunk = 2048;         // tokens per device step (DSV41_CUDA_MAX_CHUNK)
  int64_t max_context = 65536;  // longest sequence (DSV41_CUDA_MAX_CONTEXT)
  int prefill_x_parts = 3;      // bf16 parts of GEMM inputs at prefill, 1..3 (DSV41_CUDA_PREFILL_X)
  bool programmatic_launch = true;  // dependent launch of the kernels (DSV41_CUDA_PDL)
  bool side_streams = true;         // independent work on second streams (DSV41_CUDA_SIDE_STREAMS)
  int moe_gemm_min_rows = 1409;     // routed experts on the GEMM from this many rows, 17..4097
                                    // (DSV41_CUDA_MOE_GEMM_MIN_ROWS)
  int moe_exl3_gemm_min_rows = 97;  // the same for layers with EXL3 experts
                                    // (DSV41_CUDA_EXL3_GEMM_MIN_ROWS)
  // TP ranks: the collective of the forward's all-reduces and logits gather when it is not the
  // Transformer's own link (DSV41_TP_NCCL: TpNccl on device buffers); must outlive the backend.
  parallel::TpComm* data_comm = nullptr;
};
// The CUDA backend: uploads t's weights to the current device (t must outlive it). Defined by
// cuda_backend.cpp in a DSV41_CUDA build, else by cuda_backend_absent.cpp (kUnsupported).
// Throws kUnsupported for model parts the CUDA forward does not run (named), CUDA errors as
// kInternal / kOutOfMemory naming the call.
std::unique_ptr<ForwardBackend> make_cuda_backend(const Transformer& t,
                                                  const CudaBackendOptions& opts);

// Value semantics over a BackendSequence: a copy is a clone at the same capacity.
class SequenceHandle {
 public:
  SequenceHandle() = default;
  explicit SequenceHandle(std::unique_ptr<BackendSequence> s) : s_(std::move(s)) {}
  SequenceHandle(const SequenceHandle& o) : s_(o.s_ ? o.s_->clone(o.s_->max_context()) : nullptr) {}
  SequenceHandle& operator=(const SequenceHandle& o) {
    if (this != &o) s_ = o.s_ ? o.s_->clone(o.s_->max_context()) : nullptr;
    return *this;
  }
  SequenceHandle(SequenceHandle&&) noexcept = default;
  SequenceHandle& operator=(SequenceHandle&&) noexcept = default;

  explicit operator bool() const { return s_ != nullptr; }
  BackendSequence& operator*() const { return *s_; }  // non-empty handles only
  BackendSequence* operator->() const { return s_.get(); }
  // An empty handle clones to an empty handle.
  SequenceHandle clone(int64_t max_context) const {
    return s_ ? SequenceHandle(s_->clone(max_context)) : SequenceHandle();
  }

 private:
  std::unique_ptr<BackendSequence> s_;
};

}  // namespace dsv41
