// ImageLayout: how many pixels, patches and LLM positions one image gets (spec
// model-architecture.md §7.2 steps 1-4; the serving reference's `load_image` sizing, which the
// reference ports from the release's image_processor.py). All arithmetic is the reference's
// double-precision arithmetic in the same order, so token counts match it exactly.
#pragma once

#include <cstdint>

#include "config/model_config.hpp"
#include "dsv41/status.hpp"

namespace dsv41::vision {

struct ImageLayout {
  int width = 0, height = 0;  // pixel size the image is letterboxed into (multiples of patch)
  int vit_h = 0, vit_w = 0;   // ViT patch grid: height / patch, width / patch
  int llm_h = 0, llm_w = 0;   // aligner grid: ceil(vit / downsample_ratio)
  bool stretch = false;       // max_wh_ratio case: resize without keeping the aspect ratio

  int64_t patches() const { return int64_t{vit_h} * vit_w; }
  int64_t image_tokens() const { return int64_t{llm_h} * llm_w; }  // aligner rows
  // [start] + llm_h × (llm_w embeddings + [newline]) + [end] (§7.4 step 3).
  int64_t span_length() const { return int64_t{llm_h} * (llm_w + 1) + 2; }
};

// Largest side accepted before sizing: the arithmetic stays exact in double well past it.
inline constexpr int64_t kMaxImageSide = 1 << 20;

// The layout of a width × height source image. kInvalidArgument naming the size when a side is
// not in [1, kMaxImageSide].
Result<ImageLayout> image_layout(int64_t width, int64_t height, const VisionConfig& v);

}  // namespace dsv41::vision
