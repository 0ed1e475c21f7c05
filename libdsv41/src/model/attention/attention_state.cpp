#include "model/attention/attention_state.hpp"

#include "config/model_config.hpp"
#include "core/check.hpp"

namespace dsv41 {

void WindowRing::reset(int capacity_, int head_dim_) {
  capacity = capacity_;
  head_dim = head_dim_;
  next_pos = 0;
  kv.assign(static_cast<size_t>(capacity) * head_dim, 0.0f);
}

const float* WindowRing::at(int64_t p) const {
  DSV41_CHECK(p >= 0 && p < next_pos && p >= next_pos - capacity, kInternal,
              "window ring: position {} is outside the kept range [{}, {})", p,
              std::max<int64_t>(0, next_pos - capacity), next_pos);
  return kv.data() + (p % capacity) * head_dim;
}

void CsaSourceState::reset(int layer_, int ratio_, int head_dim_, int index_head_dim_) {
  layer = layer_;
  ratio = ratio_;
  head_dim = head_dim_;
  index_head_dim = index_head_dim_;
  n_entries = 0;
  compressed_kv.clear();
  index_keys.clear();
  pending = 0;
  pending_kv.clear();
  pending_gate.clear();
}

void AttentionSequenceState::init(const ModelConfig& cfg) {
  const TextConfig& t = cfg.text;
  DSV41_CHECK(static_cast<int>(cfg.roles.size()) == t.num_hidden_layers, kInvalidArgument,
              "attention state: config has {} layer roles for {} layers (validate() not run?)",
              cfg.roles.size(), t.num_hidden_layers);
  DSV41_CHECK(t.sliding_window > 0 && t.head_dim > 0, kInvalidArgument,
              "attention state: sliding_window = {} and head_dim = {} must be positive",
              t.sliding_window, t.head_dim);
  window.assign(t.num_hidden_layers, WindowRing{});
  source.assign(t.num_hidden_layers, CsaSourceState{});
  for (int l = 0; l < t.num_hidden_layers; ++l) {
    window[l].reset(t.sliding_window, t.head_dim);
    const LayerRole& r = cfg.roles[l];
    if (r.kv_source) source[l].reset(l, r.ratio, t.head_dim, t.index_head_dim);
  }
}

void AttentionSequenceState::reset() {
  for (WindowRing& w : window) w.reset(w.capacity, w.head_dim);
  for (CsaSourceState& s : source)
    if (s.layer >= 0) s.reset(s.layer, s.ratio, s.head_dim, s.index_head_dim);
}

}  // namespace dsv41
