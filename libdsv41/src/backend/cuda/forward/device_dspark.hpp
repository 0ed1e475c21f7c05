// The DSpark draft module on the GPU (spec model-architecture.md §6), the device twin of
// model/dspark/dspark_drafter.cpp and Transformer::write_dspark_context: the same steps in the same
// order, each a kernel judged op by op against the CPU code (tests/kernel/test_dspark_kernels.cpp,
// test_dspark_forward.cpp). The stages reuse the backbone's device pieces (DeviceAttention for
// the projections and the output projection, DeviceMoe, the mHC sites); the block attention, the
// feature mean and the Markov step are kernels/dspark. One round queues everything on the step's
// stream and synchronises once, for the K draft ids and confidences (plus, on request, the base
// logits and hidden rows; under tensor parallelism also at each host-staged collective). Under
// tensor parallelism each rank runs its shard of every stage (its
// heads and output groups, its routed experts, its shared-expert slice: the CPU Transformer's
// shard), all-reduces the stages' attention and FFN outputs and gathers the base logits, as the
// CPU drafter does (docs/tp.md "DSpark"); every rank must draft in lockstep.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/cuda/device_buffer.hpp"
#include "backend/cuda/forward/device_attention.hpp"
#include "backend/cuda/forward/device_linear.hpp"
#include "backend/cuda/forward/device_moe.hpp"
#include "backend/cuda/forward/device_sequence.hpp"
#include "backend/cuda/forward/forward_workspace.hpp"
#include "backend/cuda/forward/mhc_sites.hpp"
#include "backend/cuda/forward/step_profile.hpp"
#include "backend/cuda/pinned_buffer.hpp"

namespace dsv41 {
class Transformer;
struct DsparkProposal;
}  // namespace dsv41

namespace dsv41::cuda {

// What a draft round borrows from the CudaTransformer: the shared embedding, the head (all
// vocabulary rows into ws->logits: the rank's head and the gather under tensor parallelism), the
// ranks' all-reduce (null at world 1), the mHC sites and the step workspace (free between forward
// calls), the stream.
struct DsparkDraftContext {
  const uint16_t* embed = nullptr;  // BF16 [vocab, hidden]
  std::function<void(const float* x, int64_t rows)> head_logits;
  std::function<void(float* y, int64_t n, const char* what)> all_reduce;
  MhcSites* sites = nullptr;
  ForwardWorkspace* ws = nullptr;
  cudaStream_t stream = nullptr;
  StepProfile* profile = nullptr;  // optional: marks "dspark stage attn", "... moe", "... head",
                                   // "... markov" (benchmarks)
};

class DeviceDspark {
 public:
  // From the CPU model's bound module (Transformer::load(..., dspark = true)); scratch is the
  // tensor-core GEMV x split shared with the backbone (null: CUDA-core GEMVs). kUnsupported
  // naming the field for a module the workspace cannot hold (more routed experts or a larger
  // top-k than the backbone's, a block larger than max_chunk) or a Markov embedding that is not
  // BF16; kInvalidArgument from the uploads.
  static std::unique_ptr<DeviceDspark> upload(const Transformer& cpu, int max_chunk, void* scratch,
                                              size_t scratch_bytes);
  ~DeviceDspark();

  int stages() const { return static_cast<int>(stages_.size()); }
  int block() const { return block_; }
  // The backbone layers whose entering residual is a target feature (dspark_target_layer_ids).
  const std::vector<int>& taps() const { return taps_; }
  uint64_t device_bytes() const;

  // Target-feature rows [rows, taps · hidden] for a chunk's last `rows` positions (tap k of row r
  // at column k · hidden); grows (a cudaMalloc, outside any capture) when a chunk needs more.
  float* features(int64_t rows);
  // §6.2: the context rows of positions pos .. pos + n - 1 from features(n) into every stage's
  // ring of seq (n <= the rings' capacity, <= ws.max_chunk).
  void write_context(int64_t n, int64_t pos, DeviceSequence& seq, ForwardWorkspace& ws,
                     cudaStream_t stream) const;
  // §6.3 one round after the pending token `next` at seq.pos(): tokens id_1..id_K and
  // confidences c_0..c_{K-1}; with_logits also fills base_logits [K, vocab] and hidden [K,
  // hidden]. Synchronises the stream once.
  DsparkProposal draft(const DeviceSequence& seq, int32_t next, const DsparkDraftContext& c,
                       bool with_logits) const;

 private:
  struct Stage;
  DeviceDspark() = default;

  std::vector<std::unique_ptr<Stage>> stages_;
  std::vector<int> taps_;
  int block_ = 0, hc_ = 0;
  int64_t hidden_ = 0, vocab_ = 0, rank_ = 0;
  int32_t noise_ = 0;
  float eps_ = 0;
  DeviceLinear main_proj_, markov_embed_, markov_head_;
  DeviceBuffer main_norm_, norm_, confidence_;
  DeviceBuffer feat_, main_x_;  // [feat_rows_, taps · D], [feat_rows_, D]
  int64_t feat_rows_ = 0;
  DeviceBuffer h_, e_, markov_, ids_, conf_;               // [K, D], [R], [V], [K + 1], [K]
  std::unique_ptr<PinnedBuffer> stage_slots_, stage_out_;  // [K] ids; [K] ids + [K] conf
};

}  // namespace dsv41::cuda
