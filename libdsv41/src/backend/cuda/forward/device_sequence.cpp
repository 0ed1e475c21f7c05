#include "backend/cuda/forward/device_sequence.hpp"

#include <algorithm>

#include "backend/cuda/cuda_check.hpp"
#include "config/model_config.hpp"
#include "core/check.hpp"
#include "dsv41k/attention.hpp"

namespace dsv41::cuda {

DeviceSequence::DeviceSequence(const ModelConfig& cfg, int64_t max_context, int max_rollback,
                               int dspark_stages)
    : cfg_(&cfg), max_context_(max_context), max_rollback_(max_rollback) {
  const TextConfig& t = cfg.text;
  DSV41_CHECK(max_context >= 1, kInvalidArgument, "CUDA sequence: max_context = {} must be >= 1",
              max_context);
  DSV41_CHECK(max_rollback >= 0 && max_rollback <= 4096, kInvalidArgument,
              "CUDA sequence: max_rollback = {} is outside [0, 4096]", max_rollback);
  const int L = t.num_hidden_layers;
  window.resize(L);
  source.resize(L);
  const int64_t wbytes = kernels::kv_packed_bytes(kernels::KvFormat::kWindowFp8, t.head_dim);
  const int64_t cbytes = kernels::kv_packed_bytes(kernels::KvFormat::kCompressedFp4, t.head_dim);
  const int64_t kbytes = kernels::kv_packed_bytes(kernels::KvFormat::kIndexFp4, t.index_head_dim);
  DSV41_CHECK(wbytes > 0 && cbytes > 0, kInvalidArgument,
              "config.json: head_dim = {} is not a multiple of 32 (the KV entry formats)",
              t.head_dim);
  dspark.resize(static_cast<size_t>(std::max(0, dspark_stages)));
  for (DeviceWindow& w : dspark) {
    w.capacity = t.sliding_window + max_rollback;
    w.entry_bytes = wbytes;
    w.ring = DeviceBuffer(static_cast<size_t>(w.capacity * wbytes));
  }
  for (int l = 0; l < L; ++l) {
    DeviceWindow& w = window[l];
    w.capacity = t.sliding_window + max_rollback;
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
      if (max_rollback > 0) {
        s.recent_capacity = max_rollback + role.ratio - 1;
        const size_t recent = static_cast<size_t>(s.recent_capacity) * t.head_dim * sizeof(float);
        s.recent_kv = DeviceBuffer(recent);
        s.recent_gate = DeviceBuffer(recent);
      }
    }
  }
}

uint64_t DeviceSequence::device_bytes() const {
  uint64_t b = 0;
  for (const DeviceWindow& w : window) b += w.ring.bytes();
  for (const DeviceWindow& w : dspark) b += w.ring.bytes();
  for (const DeviceSource& s : source)
    b += s.compressed.bytes() + s.index_keys.bytes() + s.pending_kv.bytes() +
         s.pending_gate.bytes() + s.recent_kv.bytes() + s.recent_gate.bytes();
  return b;
}

void DeviceSequence::advance(int64_t T) {
  pos_ += T;
  rollback_depth_ = std::min<int64_t>(max_rollback_, rollback_depth_ + T);
}

void DeviceSequence::reset() {
  tokens.clear();
  image_flags.clear();
  for (DeviceSource& s : source) {
    s.n_entries = 0;
    s.pending = 0;
  }
  pos_ = 0;
  rollback_depth_ = 0;
  poisoned_ = false;
}

namespace {

// Rows [first, first + n) of a ring of `cap` fp32 rows of D values into dst [n, D], in at most two
// contiguous runs.
void copy_ring_rows(const DeviceBuffer& ring, int cap, int64_t first, int64_t n, int64_t D,
                    float* dst, cudaStream_t stream) {
  for (int64_t i = 0; i < n;) {
    const int64_t slot = (first + i) % cap, run = std::min<int64_t>(n - i, cap - slot);
    DSV41_CUDA_CHECK(cudaMemcpyAsync(dst + i * D, ring.as<float>() + slot * D, run * D * 4,
                                     cudaMemcpyDeviceToDevice, stream));
    i += run;
  }
}

void copy_prefix(const DeviceBuffer& from, DeviceBuffer& to, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  DSV41_CUDA_CHECK(
      cudaMemcpyAsync(to.data(), from.data(), bytes, cudaMemcpyDeviceToDevice, stream));
}

}  // namespace

void DeviceSequence::rollback(int64_t n, cudaStream_t stream) {
  DSV41_CHECK(!poisoned_, kInternal,
              "CUDA rollback: this sequence was left inconsistent by an earlier CUDA error");
  DSV41_CHECK(n >= 0 && n <= max_rollback_, kInvalidArgument,
              "rollback of {} positions: the limit is max_rollback = {}", n, max_rollback_);
  DSV41_CHECK(n <= rollback_depth_, kInvalidArgument,
              "rollback of {} positions: only {} can be undone now (positions fed since the last "
              "rollback, at most max_rollback = {})",
              n, rollback_depth_, max_rollback_);
  if (n == 0) return;
  const int64_t D = cfg_->text.head_dim;
  try {
    for (DeviceSource& s : source) {
      if (s.layer < 0) continue;
      const int64_t pos = s.next_pos() - n;
      s.n_entries = pos / s.ratio;
      s.pending = static_cast<int>(pos % s.ratio);
      if (s.pending > 0) {  // rows of positions [n_entries·ratio, pos)
        copy_ring_rows(s.recent_kv, s.recent_capacity, s.n_entries * s.ratio, s.pending, D,
                       s.pending_kv.as<float>(), stream);
        copy_ring_rows(s.recent_gate, s.recent_capacity, s.n_entries * s.ratio, s.pending, D,
                       s.pending_gate.as<float>(), stream);
      }
    }
  } catch (...) {
    poisoned_ = true;  // some layers were rolled back, others not
    throw;
  }
  pos_ -= n;
  rollback_depth_ -= n;
  tokens.resize(static_cast<size_t>(pos_));
  image_flags.resize(static_cast<size_t>(pos_));
}

DeviceSequence DeviceSequence::clone(int64_t max_context, cudaStream_t stream) const {
  DSV41_CHECK(max_context >= pos_, kInvalidArgument,
              "CUDA sequence clone: max_context = {} is below the {} positions it must hold",
              max_context, pos_);
  DSV41_CHECK(!poisoned_, kInternal,
              "CUDA sequence clone: the source was left inconsistent by an earlier CUDA error");
  DeviceSequence c(*cfg_, max_context, max_rollback_, static_cast<int>(dspark.size()));
  c.tokens = tokens;
  c.image_flags = image_flags;
  c.pos_ = pos_;
  c.rollback_depth_ = rollback_depth_;
  const int64_t cb =
      kernels::kv_packed_bytes(kernels::KvFormat::kCompressedFp4, cfg_->text.head_dim);
  const int64_t kb =
      kernels::kv_packed_bytes(kernels::KvFormat::kIndexFp4, cfg_->text.index_head_dim);
  for (size_t s = 0; s < dspark.size(); ++s)
    copy_prefix(dspark[s].ring, c.dspark[s].ring, dspark[s].ring.bytes(), stream);
  for (size_t l = 0; l < window.size(); ++l) {
    copy_prefix(window[l].ring, c.window[l].ring, window[l].ring.bytes(), stream);
    const DeviceSource& s = source[l];
    DeviceSource& d = c.source[l];
    if (s.layer < 0) continue;
    DSV41_CHECK(s.n_entries <= d.capacity, kInternal,
                "CUDA sequence clone: layer {} holds {} entries, the copy {}", l, s.n_entries,
                d.capacity);
    d.n_entries = s.n_entries;
    d.pending = s.pending;
    copy_prefix(s.compressed, d.compressed, static_cast<size_t>(s.n_entries * cb), stream);
    if (s.index_keys.bytes() > 0)
      copy_prefix(s.index_keys, d.index_keys, static_cast<size_t>(s.n_entries * kb), stream);
    copy_prefix(s.pending_kv, d.pending_kv, s.pending_kv.bytes(), stream);
    copy_prefix(s.pending_gate, d.pending_gate, s.pending_gate.bytes(), stream);
    copy_prefix(s.recent_kv, d.recent_kv, s.recent_kv.bytes(), stream);
    copy_prefix(s.recent_gate, d.recent_gate, s.recent_gate.bytes(), stream);
  }
  DSV41_CUDA_CHECK(cudaStreamSynchronize(stream));
  return c;
}

}  // namespace dsv41::cuda
