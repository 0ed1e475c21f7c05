#include "backend/cuda/forward/device_sequence.hpp"

#include "config/model_config.hpp"
#include "core/check.hpp"
#include "dsv41k/attention.hpp"

namespace dsv41::cuda {

DeviceSequence::DeviceSequence(const ModelConfig& cfg, int64_t max_context)
    : max_context_(max_context) {
  const TextConfig& t = cfg.text;
  DSV41_CHECK(max_context >= 1, kInvalidArgument, "CUDA sequence: max_context = {} must be >= 1",
              max_context);
  const int L = t.num_hidden_layers;
  window.resize(L);
  source.resize(L);
  const int64_t wbytes = kernels::kv_packed_bytes(kernels::KvFormat::kWindowFp8, t.head_dim);
  const int64_t cbytes = kernels::kv_packed_bytes(kernels::KvFormat::kCompressedFp4, t.head_dim);
  const int64_t kbytes = kernels::kv_packed_bytes(kernels::KvFormat::kIndexFp4, t.index_head_dim);
  DSV41_CHECK(wbytes > 0 && cbytes > 0, kInvalidArgument,
              "config.json: head_dim = {} is not a multiple of 32 (the KV entry formats)",
              t.head_dim);
  for (int l = 0; l < L; ++l) {
    DeviceWindow& w = window[l];
    w.capacity = t.sliding_window;
    w.entry_bytes = wbytes;
    w.ring = DeviceBuffer(static_cast<size_t>(w.capacity * wbytes));
    const LayerRole& role = cfg.roles[l];
    if (!role.kv_source) continue;
    DeviceSource& s = source[l];
    s.layer = l;
    s.ratio = role.ratio;
    s.capacity = max_context / role.ratio;
    s.compressed = DeviceBuffer(static_cast<size_t>(s.capacity * cbytes));
    if (role.index_source) {
      DSV41_CHECK(kbytes > 0, kInvalidArgument,
                  "config.json: index_head_dim = {} is not a multiple of 32 (FP4 index keys)",
                  t.index_head_dim);
      s.index_keys = DeviceBuffer(static_cast<size_t>(s.capacity * kbytes));
    }
    if (role.ratio > 1) {
      const size_t rows = static_cast<size_t>(role.ratio - 1) * t.head_dim * sizeof(float);
      s.pending_kv = DeviceBuffer(rows);
      s.pending_gate = DeviceBuffer(rows);
    }
  }
}

uint64_t DeviceSequence::device_bytes() const {
  uint64_t b = 0;
  for (const DeviceWindow& w : window) b += w.ring.bytes();
  for (const DeviceSource& s : source)
    b +=
        s.compressed.bytes() + s.index_keys.bytes() + s.pending_kv.bytes() + s.pending_gate.bytes();
  return b;
}

}  // namespace dsv41::cuda
