// CudaTransformer: the text model's forward pass on one GPU (spec model-architecture.md §3
// schedule), the device twin of model/transformer.hpp. Built from a loaded CPU Transformer: every
// weight is copied from the CPU model's mmapped checkpoint views into device memory in its stored
// format (no fp32 or staging copy on the host), then a forward call runs embed -> per layer
// [Engram] -> attention site -> FFN site -> collapse -> norm -> head on one stream, with one
// host sync (the logits copy) per call. Calls of any length are cut into chunks of at most
// max_chunk tokens (chunked prefill gives the same numbers as one-shot prefill, §2).
//
// A tensor-parallel rank (the CPU Transformer loaded with a TpComm of world 2) uploads only its
// shard and all-reduces the attention and FFN outputs and all-gathers the logits over that
// communicator (DeviceTp: host-staged, so such steps are not graph-capturable; docs/tp.md "CUDA
// backend"); every rank must make the same calls. Not thread-safe: one workspace and one stream
// serve every sequence (the runtime's CUDA backend serialises calls). Numbers:
// tests/kernel/test_model_forward.cpp (logits vs the CPU backend, greedy continuation),
// docs/cuda_forward.md.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "backend/cuda/forward/cuda_forward_options.hpp"
#include "backend/cuda/forward/device_sequence.hpp"
#include "backend/cuda/pinned_buffer.hpp"

namespace dsv41 {
class Transformer;
struct DsparkProposal;
}  // namespace dsv41

namespace dsv41::cuda {

// What upload() measured (the memory report of the load).
struct CudaLoadReport {
  uint64_t weight_bytes = 0;         // device bytes of every uploaded weight
  uint64_t expert_bytes = 0;         // one routed expert of one layer (w1 + w3 + w2), mean over all
  uint64_t routed_bytes = 0;         // of which all routed experts of all layers
  uint64_t engram_table_bytes = 0;   // of which the Engram tables (rows gathered, not streamed)
  int exl3_experts = 0;              // (layer, expert) pairs from the EXL3 banks
  uint64_t workspace_bytes = 0;      // device bytes of the step scratch
  uint64_t device_used_bytes = 0;    // cudaMemGetInfo total - free after the upload (all users)
  uint64_t host_peak_rss_bytes = 0;  // getrusage ru_maxrss after the upload
  double seconds = 0;
};

class CudaTransformer {
 public:
  // cpu must outlive the result (its checkpoint mapping, tokenizer hasher and config are used).
  // Throws detail::Failure: kUnsupported for parts the CUDA backend does not run yet (named),
  // kOutOfMemory naming the allocation, kInvalidArgument for options.
  static std::unique_ptr<CudaTransformer> upload(const Transformer& cpu,
                                                 CudaForwardOptions opts = {});
  ~CudaTransformer();

  const CudaLoadReport& load_report() const { return report_; }
  const CudaForwardOptions& options() const { return opts_; }

  // A fresh sequence with caches for max_context positions (0 = options().max_context, at most
  // that: the workspace's score rows are sized by it) and max_rollback undoable positions.
  DeviceSequence new_sequence(int64_t max_context = 0, int max_rollback = 0) const;

  enum class LogitRows { kAll, kLast };
  // logits of the T tokens `ids` appended at seq.pos() (fp32, host): [T, vocab] for kAll, the
  // last row [vocab] for kLast (the head then runs on that row only); image_flags [T] or empty.
  // image_embeds [n_flagged, hidden] (spec §7.4, as Transformer::forward): the input embedding
  // of each flagged position in order, instead of its token's row; empty keeps the token rows.
  // Advances seq.pos() by T. kContextOverflow past the sequence's max_context, kInvalidArgument
  // for a wrong number of image values (state unchanged); a CUDA error mid-call poisons the
  // sequence (later calls fail naming it).
  std::vector<float> forward(DeviceSequence& seq, std::span<const int32_t> ids,
                             std::span<const uint8_t> image_flags = {},
                             LogitRows rows = LogitRows::kAll,
                             std::span<const float> image_embeds = {}) const;
  // Like forward(.., kLast) without the download: the logits of the last token [vocab] are left
  // at device_logits() (row 0) on stream(), not synchronised, for a device-side consumer (the
  // sampler). Earlier chunks synchronise as in forward(). Same checks and poisoning.
  void forward_last(DeviceSequence& seq, std::span<const int32_t> ids) const;
  // DSpark (spec §6, a model loaded with Transformer::load(..., dspark = true)): every forward
  // also writes the sequence's context rows of its last positions (DeviceDspark); one draft
  // round after the pending token `next` at seq.pos() returns the K draft tokens and confidences
  // (with_logits: also the base logits [K, vocab] and hidden rows [K, hidden]), the sequence
  // unchanged. A tensor-parallel rank drafts with its shard and the ranks' collectives: every
  // rank must make the same calls. kUnsupported without the module, kInvalidArgument for next
  // outside the vocabulary, kInternal for a poisoned sequence.
  bool has_dspark() const { return dspark_ != nullptr; }
  DsparkProposal dspark_draft(DeviceSequence& seq, int32_t next, bool with_logits = false) const;
  // One round like dspark_draft with the device time of its parts (stages' attention and MoE
  // summed over the stages, collapse + norm + head, the Markov chain), in ms (benchmarks).
  std::vector<std::pair<std::string, double>> dspark_profile(DeviceSequence& seq,
                                                             int32_t next) const;
  // DeviceSequence::rollback / clone on stream().
  void rollback(DeviceSequence& seq, int64_t n) const { seq.rollback(n, stream()); }
  DeviceSequence clone(const DeviceSequence& seq, int64_t max_context) const;

  // One chunk of 1..max_chunk tokens queued on stream() without waiting; its logits [T, vocab]
  // stay in device memory at device_logits() until the next call. Same checks as forward().
  // The host inputs are staged in pinned memory before the copies are queued, so the call can be
  // recorded into a CUDA graph (stream capture on stream()); the staging is reused by the next
  // call, so synchronise stream() before the next enqueue() / forward().
  void enqueue(DeviceSequence& seq, std::span<const int32_t> ids,
               std::span<const uint8_t> image_flags = {}) const;
  const float* device_logits() const;
  // One chunk like enqueue(), synchronised, with the device time of every segment of the step
  // (mHC, attention parts, MoE parts, head) summed over the layers, in ms (benchmarks).
  std::vector<std::pair<std::string, double>> profile(DeviceSequence& seq,
                                                      std::span<const int32_t> ids) const;
  cudaStream_t stream() const { return stream_->get(); }

 private:
  struct Layer;
  CudaTransformer() = default;
  void check_call(const DeviceSequence& seq, std::span<const int32_t> ids,
                  std::span<const uint8_t> image_flags) const;
  // head_rows: the last head_rows rows of the chunk get logits (0..T), at ws.logits row 0.
  // Under tensor parallelism head_rows must be the same on every rank (it sizes the gather).
  // image_embeds: this chunk's flagged rows [n_flagged, hidden] (or empty).
  void run_chunk(DeviceSequence& seq, std::span<const int32_t> ids, std::span<const uint8_t> flags,
                 int64_t head_rows, std::span<const float> image_embeds = {}) const;
  // Copies a chunk's image rows to image_rows_ at their positions' rows; allocates image_rows_
  // [max_chunk, hidden] on first use. Returns the device rows.
  const float* upload_image_rows(std::span<const uint8_t> flags,
                                 std::span<const float> image_embeds) const;
  // Tensor parallelism: logits of x [rows, hidden] (normed) over every rank's vocabulary shard
  // into ws.logits [rows, vocab].
  void gather_logits(const float* x, int64_t rows) const;
  // What a DSpark round borrows (device_dspark.hpp), with an optional profile.
  struct DsparkDraftContext dspark_context(class StepProfile* profile) const;

  const Transformer* cpu_ = nullptr;
  CudaForwardOptions opts_;
  CudaLoadReport report_;
  std::unique_ptr<CudaStream> stream_;
  std::unique_ptr<struct ForwardWorkspace> ws_;
  std::unique_ptr<class MhcSites> mhc_sites_;  // over ws_->hc_site_ws
  // x split of the tensor-core FP8 GEMV (16 rows × up to kGemvScratchCols columns: wo_a's
  // grouped input is 64 heads × 512 = 32,768 at the released dims).
  static constexpr int64_t kGemvScratchCols = 65536;
  DeviceBuffer gemv_scratch_;
  DeviceBuffer gemm_ws_;  // split-K partials (CudaForwardOptions::gemm_split_k)
  static constexpr size_t kGemmSplitBytes = size_t{32} << 20;
  // side_streams: the lanes of every layer's shared expert and of its attention K=V rows and
  // compressor, and their GEMV x splits.
  std::unique_ptr<class SideStream> shared_lane_, attn_lane_;
  DeviceBuffer shared_scratch_, attn_scratch_;
  // Pinned staging of one chunk: ids [C] int32, flags [C], Engram hash ids, logits [C, vocab].
  std::unique_ptr<PinnedBuffer> stage_ids_, stage_flags_, stage_hash_, stage_logits_;
  // Image-span input rows of one chunk [max_chunk, hidden] fp32, dense by position: allocated by
  // the first chunk that has any, so a text-only model never holds max_chunk · hidden · 4 bytes
  // (42 MB at chunk 2048 and hidden 5120).
  mutable DeviceBuffer image_rows_;
  std::vector<std::unique_ptr<Layer>> layers_;
  DeviceBuffer embed_, norm_;
  std::unique_ptr<class DeviceLinear> head_;
  // Tensor parallelism (null at world 1): the collectives and this rank's head logits of one
  // gather block [kGatherRows, vocab_per_rank] (padding unused).
  static constexpr int64_t kGatherRows = 32;
  std::unique_ptr<class DeviceTp> tp_;
  DeviceBuffer head_local_;
  std::vector<int> engram_slot_;
  std::unique_ptr<class DeviceDspark> dspark_;    // null without the DSpark module
  mutable class StepProfile* profile_ = nullptr;  // set only inside profile()
};

}  // namespace dsv41::cuda
