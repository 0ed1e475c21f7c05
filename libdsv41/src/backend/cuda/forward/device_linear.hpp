// One Linear weight (model/linear.hpp) in device memory, in its stored format, and the GEMV that
// reads it (kernels/include/dsv41k/launchers.hpp): FP8 block -> fp8_block_gemv, FP4 rows ->
// fp4_expert_gemv, BF16/F32 -> dense_gemv. The bytes are copied straight from the mmapped
// checkpoint view (cudaMemcpy from the mapping: no fp32 or staging copy of the model on the host,
// spec model-architecture.md §1.4 layouts unchanged).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/device_buffer.hpp"
#include "dsv41k/gemm_x.hpp"
#include "dsv41k/launchers.hpp"
#include "model/linear.hpp"

namespace dsv41::cuda {

class DeviceLinear {
 public:
  DeviceLinear() = default;
  // Uploads the view `l`, also a tensor-parallel slice (Linear::slice): one starting on the
  // stored scale grid keeps its format (rows copied strided from the mapping); one off the grid
  // (tiny models split inside a 32-wide block) goes up as its exact fp32 dequantisation
  // (kUnsupported naming `what` above 256 MB). kInvalidArgument naming `what` for an unbound
  // Linear or an input width the kernels reject (FP8 in % 16, FP4 in % 32, BF16/F32 in % 8).
  static DeviceLinear upload(const Linear& l, const std::string& what);
  // [a; b] as one weight [a.out + b.out, in] (the shared expert's w1 and w3: one GEMV launch at
  // decode). stackable(): same format and input width, contiguous, and for FP8 a.out on a 32-row
  // scale block, so the scale rows stack too.
  static bool stackable(const Linear& a, const Linear& b);
  static DeviceLinear stack(const Linear& a, const Linear& b, const std::string& what);
  // An fp32 weight [out, in] held on the host (the router gate, widened from BF16 at bind time):
  // stored as BF16 when every value is exactly a bf16, else as fp32.
  static DeviceLinear from_f32(const std::vector<float>& w, int64_t out, int64_t in,
                               const std::string& what);

  // An FP8 block weight given as raw checkpoint views (Engram's wkv): w [out, in] e4m3, scale
  // [ceil(out/32), ceil(in/32)] e8m0.
  static DeviceLinear from_fp8(const uint8_t* w, const uint8_t* scale, int64_t out, int64_t in,
                               const std::string& what);

  // y[rows, out] = x[rows, in] · Wᵀ for any rows >= 0 (cut into GEMV calls of <= 16 rows; x and
  // y device pointers, 16-byte aligned, row strides in / out). Throws naming the weight on a
  // launch error.
  void gemv(const float* x, int64_t rows, float* y, cudaStream_t stream) const;
  // Output rows [r0, r1) only (the grouped wo_a): y[rows, r1 - r0]. FP8 needs r0 on a 32-row
  // scale block; FP4 / dense any range.
  void gemv_rows(const float* x, int64_t rows, int64_t r0, int64_t r1, float* y,
                 cudaStream_t stream) const;
  // The block-diagonal product of `groups` equal row groups in one launch (fp8_block_gemv_grouped:
  // x [rows, groups·in], y [rows, out]), when the weight is FP8 block, rows <= 16 and each group
  // starts on a scale block; false (nothing launched) otherwise, so the caller runs the groups.
  bool gemv_grouped(const float* x, int64_t rows, int64_t groups, float* y,
                    cudaStream_t stream) const;

  // y_j = x · W_jᵀ for the FP8 block weights of `lins` (all of one input width, else kInternal
  // naming the odd one; rows <= 16; each one
  // that would take the CUDA-core GEMV at this row count) in one fp8_block_gemv_multi launch; the
  // others (other formats, the tensor-core rows, more than 8) are run one by one. Null entries
  // of `lins` are skipped. The spec §2.2 projections of one activation (wq_a, wkv, compressor,
  // indexer) in one launch at decode. rope0 (optional): lins[0]'s output rotated as heads in the
  // launch's epilogue (Fp8GemvJob::rope) when lins[0] joins it; returns whether it did (else the
  // caller rotates).
  static bool gemv_shared_x(std::span<const DeviceLinear* const> lins, std::span<float* const> ys,
                            const float* x, int64_t rows, cudaStream_t stream,
                            const kernels::Fp8GemvRope* rope0 = nullptr);

  // How x enters the tensor-core GEMM of calls with more than 16 rows (kernels/include/dsv41k/
  // gemm_x.hpp); kFp32 unless the layer sets it (the large projections follow
  // CudaForwardOptions::prefill_x; routing, indexer and head inputs stay fp32-faithful).
  void set_prefill_x(kernels::GemmX x) { prefill_x_ = x; }
  // Fewest rows that take the tensor-core GEMM (default 17: calls of <= 16 rows take the GEMVs;
  // above that, fewer rows than this run the GEMVs 16 rows at a time).
  void set_gemm_min_rows(int rows) { gemm_min_rows_ = rows; }
  bool takes_gemm(int64_t rows) const;
  // Split-K partials of the GEMM (kernels::gemm_k_splits; null: no split). Shared like the GEMV
  // scratch: calls on one stream.
  void set_gemm_workspace(void* p, size_t bytes) {
    gemm_ws_ = p;
    gemm_ws_bytes_ = bytes;
  }
  kernels::GemmX prefill_x() const { return prefill_x_; }

  // Scratch for the tensor-core FP8 GEMV's x split (kernels fp8_block_gemv_tc), shared by every
  // linear of one CudaTransformer (their calls are ordered on its one stream); null: FP8 calls of
  // <= 16 rows take the CUDA-core fp8_block_gemv, and so does a call whose x split needs more
  // than `bytes`.
  void set_gemv_scratch(void* p, size_t bytes) {
    scratch_ = p;
    scratch_bytes_ = bytes;
  }

  WeightFormat format() const { return format_; }
  int64_t out_features() const { return out_; }
  int64_t in_features() const { return in_; }
  const uint8_t* weight() const { return w_.as<uint8_t>(); }
  const uint8_t* scale() const { return scale_.as<uint8_t>(); }
  uint64_t bytes() const { return w_.bytes() + scale_.bytes(); }
  const std::string& name() const { return name_; }

 private:
  WeightFormat format_ = WeightFormat::kF32;
  DeviceBuffer w_, scale_;
  int64_t out_ = 0, in_ = 0, block_rows_ = 32, scale_row_bytes_ = 0;
  kernels::GemmX prefill_x_ = kernels::GemmX::kFp32;
  int gemm_min_rows_ = kernels::kGemvMaxRows + 1;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  void* gemm_ws_ = nullptr;
  size_t gemm_ws_bytes_ = 0;
  // Whether an FP8 GEMV of `rows` x [rows, groups·in_] goes to the tensor cores.
  bool takes_tc(int rows, int groups) const;
  // The tensor-core FP8 GEMV of x [rows, groups·in_] when takes_tc(); false: the caller runs the
  // CUDA-core kernel.
  bool gemv_tc(const float* x, int rows, int groups, int64_t out, const uint8_t* w,
               const uint8_t* scale, float* y, cudaStream_t stream) const;
  std::string name_;
};

// A small fp32 vector (norm weights, sinks, biases) in device memory.
DeviceBuffer upload_f32(const std::vector<float>& v);

}  // namespace dsv41::cuda
