// VisionWeights: every tensor of the vision tower, aligner and image delimiters, bound by its
// released name (spec model-architecture.md §7.3-7.4, §1.5): BF16 matrices read in place from
// the mmapped checkpoint (Linear), biases and norm weights converted to fp32.
#pragma once

#include <string>
#include <vector>

#include "config/model_config.hpp"
#include "loader/checkpoint.hpp"
#include "model/linear.hpp"

namespace dsv41::vision {

struct VisionBlockWeights {
  std::vector<float> norm1, norm2;  // [hidden]
  Linear wqkv;                      // [3·hidden, hidden]: q | k | v
  std::vector<float> wqkv_bias;     // [3·hidden]
  Linear wo;                        // [hidden, hidden]
  std::vector<float> wo_bias;       // [hidden]
  Linear w1;                        // [2·inter, hidden]: gate | up, no bias
  Linear w2;                        // [hidden, inter], no bias
};

struct VisionWeights {
  Linear patch_embed;  // [hidden, 3·patch²]
  std::vector<float> patch_embed_bias;
  std::vector<VisionBlockWeights> blocks;
  std::vector<float> norm;                                   // [hidden]
  Linear aligner_w1;                                         // [D, hidden·r²]
  std::vector<float> aligner_b1;                             // [D]
  Linear aligner_w2;                                         // [D, D]
  std::vector<float> aligner_b2;                             // [D]
  std::vector<float> image_start, image_newline, image_end;  // [D]

  // The names of every tensor this binds (the checkpoint inventory check).
  static std::vector<std::string> tensor_names(const ModelConfig& cfg);
  // Throws detail::Failure naming the missing tensor or the wrong dtype / shape.
  static VisionWeights bind(const Checkpoint& ck, const ModelConfig& cfg);
};

}  // namespace dsv41::vision
