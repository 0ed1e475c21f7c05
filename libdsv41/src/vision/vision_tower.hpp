// VisionTower: the CPU reference of the image encoder (spec model-architecture.md §7.3-7.4), the
// executable spec the CUDA path will be judged against. Plain fp32 loops over BF16 weights read
// from the checkpoint:
//   patches [N, 3·p²] -> patch embed (+bias) -> L × pre-norm block -> final RMSNorm   (ViT)
//   block: x += wo(attn(rope(q), rope(k), v)) with full bidirectional attention over the image,
//          x += w2(SiLU(gate) · up)
//   merge r×r cells -> aligner w1 (+bias) -> exact GELU -> w2 (+bias)                  (aligner)
//   span: [image_start] + per row (llm_w aligner rows + [image_newline]) + [image_end]
// The reference runs this tower in bf16; fp32 here is the more precise evaluation of the same
// formulas.
#pragma once

#include <cstdint>
#include <vector>

#include "config/model_config.hpp"
#include "core/thread_pool.hpp"
#include "loader/checkpoint.hpp"
#include "vision/image_patches.hpp"
#include "vision/vision_weights.hpp"

namespace dsv41::vision {

// The ViT's RMSNorm epsilon (not a config key: fixed in the reference module).
inline constexpr float kVisionNormEps = 1e-6f;

class VisionTower {
 public:
  // Binds the tower from ck (cfg.has_vision must be true); pool (must outlive the tower) splits
  // the matmuls and attention. Throws detail::Failure naming a missing or malformed tensor.
  VisionTower(const Checkpoint& ck, const ModelConfig& cfg, ThreadPool& pool);

  const VisionConfig& config() const { return cfg_.vision; }
  const VisionWeights& weights() const { return w_; }
  int64_t embedding_dim() const { return cfg_.text.hidden_size; }

  // ViT output [vit_h·vit_w, hidden].
  std::vector<float> encode(const ImagePatches& patches) const;
  // Aligner rows [llm_h·llm_w, D] of a ViT output.
  std::vector<float> align(const std::vector<float>& vit, const ImageLayout& layout) const;
  // The image span's input embeddings [span_length, D] (§7.4 step 3).
  std::vector<float> span(const ImagePatches& patches) const;
  // The span around aligner rows [llm_h·llm_w, D]: [image_start] + per row (llm_w rows +
  // [image_newline]) + [image_end] (also the CUDA tower's last step).
  std::vector<float> assemble_span(const std::vector<float>& rows, const ImageLayout& l) const;

 private:
  void block(const VisionBlockWeights& w, int64_t n, const std::vector<float>& angles,
             std::vector<float>& x) const;

  ModelConfig cfg_;
  VisionWeights w_;
  ThreadPool* pool_;
};

}  // namespace dsv41::vision
