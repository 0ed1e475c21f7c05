// One attention sublayer on the GPU (spec model-architecture.md §2.2-2.6), the device twin of
// model/attention/attention_layer.cpp: the same steps in the same order, each a kernel of
// kernels/include/dsv41k/{launchers,attention,csa}.hpp judged op by op against that CPU code
// (tests/kernel/). Weights are uploaded from the CPU layer's checkpoint views.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/device_buffer.hpp"
#include "backend/cuda/forward/device_linear.hpp"
#include "backend/cuda/forward/device_sequence.hpp"
#include "backend/cuda/forward/forward_workspace.hpp"
#include "backend/cuda/forward/step_profile.hpp"
#include "backend/cuda/side_stream.hpp"
#include "config/model_config.hpp"
#include "dsv41k/attention.hpp"

namespace dsv41 {
class AttentionLayer;
}

namespace dsv41::cuda {

class DeviceAttention {
 public:
  // A tensor-parallel layer (AttentionLayer::sharded) keeps its local heads and output groups;
  // forward() then writes this rank's partial sum. kInvalidArgument for shapes the kernels
  // reject (o_lora_rank not a multiple of 32).
  static DeviceAttention upload(const AttentionLayer& a);

  // xn [T, hidden] (attn_norm output, device) -> out [T, hidden]; 1 <= T <= ws.max_chunk.
  // Appends this call's rows to seq (window ring, compressed entries, index keys, open group)
  // and publishes ws.selection / ws.candidates for the layers after it. pos0 must be the
  // position of the layer's state (checked).
  // profile (optional): marks the segments of the sublayer (step_profile.hpp).
  void forward(const float* xn, int64_t T, int64_t pos0, DeviceSequence& seq, ForwardWorkspace& ws,
               float* out, cudaStream_t stream, StepProfile* profile = nullptr) const;

  // A DSpark stage's attention (spec §6, a window-only layer; CPU: DsparkDrafter and
  // Transformer::write_dspark_context):
  // context_rows: the stage's context K=V rows FP8(RoPE_p(kv_norm(main_x · Wkvᵀ))) of positions
  // pos0 .. pos0 + n - 1 (main_x [n, hidden], n <= min(ws.max_chunk, ring.capacity)) into `ring`.
  void context_rows(const float* main_x, int64_t n, int64_t pos0, DeviceWindow& ring,
                    ForwardWorkspace& ws, cudaStream_t stream) const;
  // forward_block: the draft block's sublayer, xn [K, hidden] at positions pos0 .. pos0 + K - 1
  // -> out [K, hidden]: queries and the block's own K=V rows as in forward(), attention over the
  // context rows of positions [max(0, pos0 - window), pos0) in `ring` and all K block rows (no
  // causal mask inside the block), the grouped output projection. K <= ws.max_chunk.
  void forward_block(const float* xn, int64_t K, int64_t pos0, const DeviceWindow& ring,
                     ForwardWorkspace& ws, float* out, cudaStream_t stream) const;

  uint64_t device_bytes() const;

  // The GEMM input mode of the large projections (wq_a, wq_b, wkv, wo_a, wo_b) at prefill;
  // the compressor and indexer projections stay fp32-faithful (their scores pick top-k entries).
  void set_prefill_x(kernels::GemmX x);
  // DeviceLinear::set_gemv_scratch on every projection.
  void set_gemv_scratch(void* p, size_t bytes);
  // DeviceLinear::set_gemm_min_rows and set_gemm_workspace on every projection.
  void set_gemm(int min_rows, void* workspace, size_t bytes);
  // The window K=V rows and the compressor (steps 2-3a: they need only the projections of xn) on
  // `lane`, beside the query chain (q_norm, wq_b, RoPE), joined before the selection and the
  // attention core; the compressor's index-key GEMV then takes `scratch` (the query chain's
  // tensor-core GEMVs use theirs meanwhile). Null lane: all on the step's stream.
  void set_side_lane(SideStream* lane, void* scratch, size_t bytes);

 private:
  // Both run after forward() put their projections of xn (compressor kv / gate at the open
  // group's offset, the indexer's head weights and query) in ws.
  void compress(int64_t T, int64_t pos0, DeviceSource& src, ForwardWorkspace& ws,
                cudaStream_t stream) const;
  void select(int64_t T, int64_t pos0, const DeviceSource& keys, ForwardWorkspace& ws,
              cudaStream_t stream) const;
  // Step 2's row ops on K=V rows at positions pos0 + row: kv_norm, the main RoPE, and (ring
  // non-null) the packed rows also written to their ring slots.
  kernels::KvRowOps window_row_ops(int64_t pos0, const DeviceWindow* ring) const;
  // Step 7: z_g = u_g · Wo_a[g]ᵀ per group, out = z · Wo_bᵀ, from the attention output o [T,
  // heads, head_dim].
  void output_projection(const float* o, int64_t T, ForwardWorkspace& ws, float* out,
                         cudaStream_t stream) const;

  LayerRole role_;
  int heads_ = 0, head_dim_ = 0, rope_dim_ = 0, q_lora_ = 0, o_lora_ = 0;
  int o_groups_ = 0;  // the output groups this rank holds (all of them at world 1)
  int window_ = 0, index_topk_ = 0, cand_blocks_ = 0, cand_block_size_ = 0, candidate_layer_ = -1;
  bool has_compressor_ = false, has_indexer_ = false, owns_keys_ = false, uses_candidates_ = false;
  SideStream* lane_ = nullptr;
  float eps_ = 0, c_eps_ = 0, i_eps_ = 0;
  int i_heads_ = 0, i_head_dim_ = 0, i_ratio_ = 1;
  DeviceLinear wq_a_, wq_b_, wkv_, wo_a_, wo_b_;
  DeviceBuffer q_norm_, kv_norm_, sink_, inv_freq_, inv_freq_compress_;
  DeviceLinear c_wkv_, c_wgate_;  // compressor (KV sources); wgate only for ratio > 1
  DeviceBuffer c_norm_;
  DeviceLinear i_wq_b_, i_wproj_, i_wk_;  // indexer (index sources); wk on KV sources
  DeviceBuffer i_k_norm_;
};

}  // namespace dsv41::cuda
