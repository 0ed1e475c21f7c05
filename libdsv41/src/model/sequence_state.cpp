#include "model/sequence_state.hpp"

#include "config/model_config.hpp"

namespace dsv41 {

void SequenceState::init(const ModelConfig& cfg, StateOptions opts) {
  attn.init(cfg, std::move(opts));
  tokens.clear();
  image_flags.clear();
  pos = 0;
}

void SequenceState::reset() {
  attn.reset();
  dspark.reset();
  tokens.clear();
  image_flags.clear();
  pos = 0;
}

void SequenceState::rollback(int64_t n) {
  attn.rollback(n);
  pos -= n;
  tokens.resize(static_cast<size_t>(pos));
  image_flags.resize(static_cast<size_t>(pos));
}

}  // namespace dsv41
