#include "backend/cuda/forward/device_engram.hpp"

#include <fmt/format.h>

#include "backend/cuda/forward/launch_check.hpp"
#include "core/check.hpp"
#include "dsv41k/engram.hpp"

namespace dsv41::cuda {

DeviceEngram DeviceEngram::upload(const engram::EngramWeights& w, int layer) {
  DeviceEngram d;
  d.layer_ = layer;
  d.dims_ = w.dims;
  const engram::EngramDims& e = w.dims;
  const size_t rows = static_cast<size_t>(e.table_rows);
  d.table_ = DeviceBuffer(rows * e.head_dim);
  d.table_.upload(w.embed, rows * e.head_dim);
  d.table_scale_ = DeviceBuffer(rows * (e.head_dim / 32));
  d.table_scale_.upload(w.embed_scale, rows * (e.head_dim / 32));
  d.qk_ = upload_f32(w.qk);
  d.wkv_ = DeviceLinear::from_fp8(w.wkv, w.wkv_scale, (e.hc + 1) * e.hidden, e.n_cols * e.head_dim,
                                  fmt::format("layers.{}.engram.wkv", layer));
  return d;
}

uint64_t DeviceEngram::device_bytes() const {
  return table_.bytes() + table_scale_.bytes() + qk_.bytes() + wkv_.bytes();
}

void DeviceEngram::forward(float* H, int64_t T, const int64_t* hash_ids, const uint8_t* flags,
                           float eps, ForwardWorkspace& ws, cudaStream_t s) const {
  const engram::EngramDims& e = dims_;
  float* E = ws.engram_e.as<float>();
  float* kv = ws.engram_kv.as<float>();
  check_launch(kernels::engram_gather(hash_ids, table_.as<uint8_t>(), table_scale_.as<uint8_t>(), E,
                                      T, static_cast<int>(e.n_cols), static_cast<int>(e.head_dim),
                                      e.table_rows, s),
               layer_, "engram_gather");
  wkv_.gemv(E, T, kv, s);
  check_launch(kernels::engram_gate(H, kv, qk_.as<float>(), flags, T, static_cast<int>(e.hc),
                                    e.hidden, eps, s),
               layer_, "engram_gate");
}

}  // namespace dsv41::cuda
