// One MoE sublayer on the GPU (spec model-architecture.md §4), the device twin of
// dsv41::moe_forward with the checkpoint's routed experts: dense gate GEMV, moe_route,
// moe_permute, moe_gather, grouped GEMVs (gate, up), SwiGLU with the route weight, grouped down
// GEMV, the FP8 shared expert (optionally on a side stream), moe_combine (data flow in
// kernels/include/dsv41k/moe.hpp). Routed
// experts are release FP4 (moe_grouped_fp4_gemv/gemm) or, on a Spark checkpoint, EXL3 from the
// banks (moe_grouped_exl3_gemv); one layer may mix both (keep_native experts), each format's
// descriptor table null where the other computes. No host sync: bucket sizes stay on the device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/device_buffer.hpp"
#include "backend/cuda/forward/device_exl3_experts.hpp"
#include "backend/cuda/forward/device_linear.hpp"
#include "backend/cuda/forward/forward_workspace.hpp"
#include "backend/cuda/forward/step_profile.hpp"
#include "backend/cuda/side_stream.hpp"
#include "dsv41k/moe.hpp"
#include "model/moe.hpp"

namespace dsv41::cuda {

class DeviceMoe {
 public:
  // The routed experts this rank holds (MoeWeights expert_begin/end: all of them at world 1;
  // forward() then writes the rank's partial sum). Experts the bank supplies for `layer` (bank
  // may be null: a release checkpoint) upload as EXL3 (DeviceExl3Experts::upload's rules), the
  // rest must be release FP4. Throws kUnsupported for an expert in another format, naming it.
  static DeviceMoe upload(const MoeWeights& w, const MoeShape& s, int layer,
                          const exl3::ExpertBank* bank = nullptr);

  // xn [T, D] (ffn_norm output) -> y [T, D]; flags [T] uint8 device or null; T <= ws.max_chunk.
  void forward(const float* xn, int64_t T, const uint8_t* flags, ForwardWorkspace& ws, float* y,
               cudaStream_t stream, StepProfile* profile = nullptr) const;

  uint64_t device_bytes() const;
  // Bytes of one routed expert (w1 + w3 + w2 with scales, or EXL3 trellis + sign·scales), the
  // mean over the layer's resident experts (EXL3 experts differ by K).
  uint64_t expert_bytes() const;
  // Routed experts with their own device bytes: n_experts() less the pooled aliases of a
  // synthetic checkpoint (TextConfig::synthetic_expert_pool), which share an earlier expert's.
  int resident_experts() const { return n_experts() - n_alias_; }
  int exl3_experts() const { return exl3_.count(); }
  // Routed experts held on this device (the rank's range).
  int n_experts() const { return expert_end_ - expert_begin_; }

  // The GEMM input mode of the routed and shared expert projections at prefill; the router
  // gate stays fp32-faithful (its logits pick the experts).
  void set_prefill_x(kernels::GemmX x);
  // DeviceLinear::set_gemv_scratch on the gate and the shared expert, and the routed FP4
  // experts' tensor-core GEMVs: steps of tc_decode_min_rows..tc_decode_max_rows rows on the
  // decode form (x staged per block), other steps of tc_min_rows..16 rows on the split one through
  // the same scratch.
  void set_gemv_scratch(void* p, size_t bytes, int tc_min_rows = 5, int tc_decode_min_rows = 2,
                        int tc_decode_max_rows = 8);
  // Steps of routed_min_rows+ rows (>= 17; exl3_min_rows+ in a layer with EXL3 experts) run the
  // routed experts on the grouped GEMMs, fewer on the grouped GEMVs in 16-row tiles (an FP4-only
  // layer: steps of 17+ rows in tiles of long_tile_rows, steps of 2..16 in tiles of
  // verify_tile_rows, each 1..16); the gate, shared and per-expert projections take the GEMM from
  // dense_min_rows rows, its split-K partials in `workspace` (DeviceLinear::set_gemm_*).
  void set_gemm(int dense_min_rows, int routed_min_rows, int exl3_min_rows, int long_tile_rows,
                int verify_tile_rows, void* workspace, size_t bytes);
  // The shared expert on `lane` (forked when forward() starts, joined before moe_combine), beside
  // the router chain and the routed experts, which share nothing with it but xn; its tensor-core
  // GEMVs then take `scratch` (not the routed experts' one). Null lane: all on the step's stream.
  void set_shared_lane(SideStream* lane, void* scratch, size_t bytes);

 private:
  int layer_ = -1;
  MoeShape shape_;
  int expert_begin_ = 0, expert_end_ = 0;  // this rank's routed experts
  int64_t inter_ = 0, shared_inter_ = 0;
  DeviceLinear gate_;
  DeviceBuffer bias_, bias_vl_;
  std::vector<DeviceLinear> w1_, w2_, w3_;  // routed FP4 experts [E] (empty for EXL3 ones and
                                            // pooled aliases)
  int n_alias_ = 0;                         // pooled aliases among them
  DeviceExl3Experts exl3_;
  kernels::GemmX prefill_x_ = kernels::GemmX::kFp32;  // routed FP4 GEMM (moe_grouped_fp4_gemm)
  void* scratch_ = nullptr;  // x split of moe_grouped_fp4_gemv_tc (null: the CUDA-core GEMV)
  size_t scratch_bytes_ = 0;
  int tc_min_rows_ = 5;         // fewest step rows on moe_grouped_fp4_gemv_tc
  int tc_decode_min_rows_ = 2;  // step rows on moe_grouped_fp4_gemv_tc_decode: min..max
  int tc_decode_max_rows_ = 0;  // (0: none)
  int routed_gemm_min_rows_ = kernels::kMoeGemvMaxRows + 1;  // steps of more on the GEMMs
  int exl3_gemm_min_rows_ = kernels::kMoeGemvMaxRows + 1;    // ... in a layer with EXL3 experts
  int long_tile_rows_ = kernels::kMoeGemvMaxRows;            // GEMV tile rows at steps of 17+ rows
  int verify_tile_rows_ = kernels::kMoeGemvMaxRows;          // ... at steps of 2..16 rows
  bool has_fp4_ = false;
  // Device arrays of the experts' weight / scale pointers, [E] each (moe_expert_descriptors).
  DeviceBuffer w1_table_, w1_scales_, w3_table_, w3_scales_, w2_table_, w2_scales_;
  // shared_w13_ = [w1; w3] when DeviceLinear::stackable (then shared_w1_/_w3_ stay empty).
  DeviceLinear shared_w1_, shared_w2_, shared_w3_, shared_w13_;
  bool shared_stacked_ = false;
  SideStream* shared_lane_ = nullptr;
};

}  // namespace dsv41::cuda
