// Per-sequence DSpark context (spec model-architecture.md §6.2): for every draft stage s and each
// of the last `capacity` committed positions p, the stage's context K=V row
//   kv_s(p) = FP8(RoPE_p(kv_norm_s(main_x(p) · Wkv_sᵀ)))            [head_dim]
// with main_x(p) = main_norm(main_proj · f(p)), f(p) = the target's residual entering each
// dspark_target_layer_ids layer at p, averaged over the hc streams and concatenated. Written by
// Transformer::forward for the positions it appends; read by DsparkDrafter for the last
// sliding_window positions. capacity = sliding_window + max_rollback, so a rollback never
// leaves a window position overwritten (slots are position % capacity).
#pragma once

#include <cstdint>
#include <vector>

namespace dsv41 {

struct DsparkContext {
  int stages = 0;
  int64_t capacity = 0;
  int64_t head_dim = 0;
  std::vector<float> kv;          // [stages, capacity, head_dim]
  std::vector<int64_t> slot_pos;  // [capacity]: the position a slot holds, -1 = none

  bool enabled() const { return stages > 0; }
  void init(int n_stages, int64_t cap, int64_t dim) {
    stages = n_stages;
    capacity = cap;
    head_dim = dim;
    kv.assign(static_cast<size_t>(n_stages * cap * dim), 0.0f);
    slot_pos.assign(static_cast<size_t>(cap), -1);
  }
  void reset() { slot_pos.assign(slot_pos.size(), -1); }
  float* row(int s, int64_t pos) { return kv.data() + (s * capacity + pos % capacity) * head_dim; }
  const float* row(int s, int64_t pos) const {
    return kv.data() + (s * capacity + pos % capacity) * head_dim;
  }
  bool holds(int64_t pos) const { return slot_pos[pos % capacity] == pos; }
};

}  // namespace dsv41
