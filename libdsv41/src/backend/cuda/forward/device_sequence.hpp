// Per-sequence state of the CUDA forward (the device twin of model/attention/attention_state.hpp,
// spec model-architecture.md §2.2-2.8): every layer's FP8 window ring and every KV source's
// packed compressed entries, packed index keys and the fp32 rows of the compressor's open group,
// in contiguous device buffers sized for `max_context` positions (the CPU state pages its caches;
// here the capacity is fixed when the sequence is made). Positions and counts are host integers:
// every size of a step is known on the host before it is queued, so a step needs no device sync.
// Rollback (speculative verification) follows AttentionSequenceState::rollback: the ring keeps
// max_rollback extra slots and every ratio > 1 source the fp32 rows of its last
// max_rollback + ratio - 1 positions, so the open group can be rebuilt.
// A DSpark model's sequence also holds each draft stage's context ring (spec §6.2,
// model/dspark/dspark_context.hpp): the same packed FP8 rows and slots as a window ring.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/device_buffer.hpp"

namespace dsv41 {
struct ModelConfig;
}

namespace dsv41::cuda {

// §2.2 step 2: K=V rows of one layer, post-RoPE, packed FP8 (528 B/slot released); position p
// in slot p % capacity, capacity = sliding_window + max_rollback.
struct DeviceWindow {
  DeviceBuffer ring;  // [capacity, entry_bytes]
  int capacity = 0;
  int64_t entry_bytes = 0;
};

// §2.3/§2.4: what one KV-source layer keeps. Entry j stands for source tokens [j·ratio,
// (j+1)·ratio).
struct DeviceSource {
  int layer = -1;
  int ratio = 0;
  int64_t capacity = 0;       // entries = max_context / ratio
  int64_t n_entries = 0;      // entries appended so far
  int pending = 0;            // rows of the open group (< ratio), in pending_kv / pending_gate
  DeviceBuffer compressed;    // [capacity, kv_packed_bytes(kCompressedFp4, head_dim)]
  DeviceBuffer index_keys;    // [capacity, kv_packed_bytes(kIndexFp4, index_head_dim)]
  DeviceBuffer pending_kv;    // [ratio - 1, head_dim] fp32 (ratio > 1)
  DeviceBuffer pending_gate;  // [ratio - 1, head_dim] fp32 (ratio > 1)
  // ratio > 1 and max_rollback > 0: the compressor rows of the last recent_capacity =
  // max_rollback + ratio - 1 positions, position p in slot p % recent_capacity.
  int recent_capacity = 0;
  DeviceBuffer recent_kv, recent_gate;  // [recent_capacity, head_dim] fp32
  int64_t next_pos() const { return n_entries * ratio + pending; }
};

class DeviceSequence {
 public:
  // Sized from cfg.text / cfg.roles (validated config); throws kOutOfMemory naming the bytes.
  // cfg must outlive the sequence (clone() sizes the copy from it). dspark_stages: context rings
  // for that many DSpark stages (0: none).
  DeviceSequence(const ModelConfig& cfg, int64_t max_context, int max_rollback = 0,
                 int dspark_stages = 0);
  DeviceSequence(DeviceSequence&&) noexcept = default;
  DeviceSequence& operator=(DeviceSequence&&) noexcept = default;

  int64_t pos() const { return pos_; }
  int64_t max_context() const { return max_context_; }
  int max_rollback() const { return max_rollback_; }
  // Positions rollback() can undo now: those fed since the last rollback, at most max_rollback.
  int64_t rollback_depth() const { return rollback_depth_; }
  uint64_t device_bytes() const;  // every buffer above

  // Back to position 0 (the buffers are kept; a poisoned sequence becomes usable again).
  void reset();
  // Undoes the last n positions: counts on the host, the open groups' rows rebuilt from the
  // recent rows by copies queued on `stream`. kInvalidArgument when n > rollback_depth().
  void rollback(int64_t n, cudaStream_t stream);
  // A copy holding the same positions, able to grow to max_context (>= pos()); the copies are
  // queued on `stream` and waited for. kOutOfMemory naming the bytes.
  DeviceSequence clone(int64_t max_context, cudaStream_t stream) const;

  std::vector<int32_t> tokens;       // the history, for the Engram hash (host side)
  std::vector<uint8_t> image_flags;  // [tokens.size()]
  std::vector<DeviceWindow> window;  // [layers]
  std::vector<DeviceSource> source;  // [layers], layer = -1 unless a KV source
  // [DSpark stages] context K=V rows, position p in slot p % capacity (capacity = sliding_window +
  // max_rollback, so a rollback never leaves a window position overwritten). Every forward writes
  // the rows of its last min(T, capacity) positions, so the ring always holds [pos - capacity,
  // pos) less what rollbacks undid.
  std::vector<DeviceWindow> dspark;

 private:
  friend class CudaTransformer;
  // Called by the forward after it appended T positions.
  void advance(int64_t T);

  const ModelConfig* cfg_ = nullptr;
  int64_t pos_ = 0;
  int64_t max_context_ = 0;
  int max_rollback_ = 0;
  int64_t rollback_depth_ = 0;
  bool poisoned_ = false;  // a CUDA error left the device state half-updated
};

}  // namespace dsv41::cuda
