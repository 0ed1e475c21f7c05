// One Engram block on the GPU (spec model-architecture.md §5.3), the device twin of
// engram::apply_engram: row gather + dequant (engram_gather), kv = W_kv·E (fp8_block_gemv),
// per-stream gate and residual update (engram_gate). The hash ids come from the host
// (engram::NgramHasher over the token history); the table is copied to device memory (a table
// kept in host or disk-backed memory would be read through a mapped pointer instead).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/device_buffer.hpp"
#include "backend/cuda/forward/device_linear.hpp"
#include "backend/cuda/forward/forward_workspace.hpp"
#include "engram/engram_layer.hpp"

namespace dsv41::cuda {

class DeviceEngram {
 public:
  static DeviceEngram upload(const engram::EngramWeights& w, int layer);

  // H [T, hc, D] in place; hash_ids [T, n_cols] int64 device (checked on the host against the
  // table size before the upload); flags [T] uint8 device or null.
  void forward(float* H, int64_t T, const int64_t* hash_ids, const uint8_t* flags, float eps,
               ForwardWorkspace& ws, cudaStream_t stream) const;

  const engram::EngramDims& dims() const { return dims_; }
  uint64_t device_bytes() const;
  // Of which the table and its scales (a step reads T · n_cols of its rows, not all of it).
  uint64_t table_bytes() const { return table_.bytes() + table_scale_.bytes(); }

  // The GEMM input mode of wkv (6144 -> 25,600) at prefill.
  void set_prefill_x(kernels::GemmX x) { wkv_.set_prefill_x(x); }
  void set_gemv_scratch(void* p, size_t bytes) { wkv_.set_gemv_scratch(p, bytes); }
  void set_gemm(int min_rows, void* workspace, size_t bytes) {
    wkv_.set_gemm_min_rows(min_rows);
    wkv_.set_gemm_workspace(workspace, bytes);
  }

 private:
  int layer_ = -1;
  engram::EngramDims dims_;
  DeviceBuffer table_, table_scale_, qk_;
  DeviceLinear wkv_;
};

}  // namespace dsv41::cuda
