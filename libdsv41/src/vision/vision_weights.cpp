#include "vision/vision_weights.hpp"

#include <fmt/format.h>

namespace dsv41::vision {

namespace {

std::string block_prefix(int b) { return fmt::format("vision.blocks.{}.", b); }

}  // namespace

std::vector<std::string> VisionWeights::tensor_names(const ModelConfig& cfg) {
  std::vector<std::string> n = {"vision.patch_embed.proj.weight",
                                "vision.patch_embed.proj.bias",
                                "vision.norm.weight",
                                "aligner.w1.weight",
                                "aligner.w1.bias",
                                "aligner.w2.weight",
                                "aligner.w2.bias",
                                "image_start",
                                "image_newline",
                                "image_end"};
  for (int b = 0; b < cfg.vision.num_hidden_layers; ++b)
    for (const char* t : {"norm1.weight", "attn.wqkv.weight", "attn.wqkv.bias", "attn.wo.weight",
                          "attn.wo.bias", "norm2.weight", "mlp.w1.weight", "mlp.w2.weight"})
      n.push_back(block_prefix(b) + t);
  return n;
}

VisionWeights VisionWeights::bind(const Checkpoint& ck, const ModelConfig& cfg) {
  const VisionConfig& v = cfg.vision;
  const int64_t h = v.hidden_size, inter = v.intermediate_size;
  const int64_t D = cfg.text.hidden_size;
  const int64_t patch_in = int64_t{3} * v.patch_size * v.patch_size;
  const int64_t merged = h * v.downsample_ratio * v.downsample_ratio;
  VisionWeights w;
  w.patch_embed = Linear::bind_plain(ck, "vision.patch_embed.proj.weight", h, patch_in);
  w.patch_embed_bias = load_vector(ck, "vision.patch_embed.proj.bias", h);
  w.blocks.resize(static_cast<size_t>(v.num_hidden_layers));
  for (int b = 0; b < v.num_hidden_layers; ++b) {
    const std::string p = block_prefix(b);
    VisionBlockWeights& bw = w.blocks[static_cast<size_t>(b)];
    bw.norm1 = load_vector(ck, p + "norm1.weight", h);
    bw.wqkv = Linear::bind_plain(ck, p + "attn.wqkv.weight", 3 * h, h);
    bw.wqkv_bias = load_vector(ck, p + "attn.wqkv.bias", 3 * h);
    bw.wo = Linear::bind_plain(ck, p + "attn.wo.weight", h, h);
    bw.wo_bias = load_vector(ck, p + "attn.wo.bias", h);
    bw.norm2 = load_vector(ck, p + "norm2.weight", h);
    bw.w1 = Linear::bind_plain(ck, p + "mlp.w1.weight", 2 * inter, h);
    bw.w2 = Linear::bind_plain(ck, p + "mlp.w2.weight", h, inter);
  }
  w.norm = load_vector(ck, "vision.norm.weight", h);
  w.aligner_w1 = Linear::bind_plain(ck, "aligner.w1.weight", D, merged);
  w.aligner_b1 = load_vector(ck, "aligner.w1.bias", D);
  w.aligner_w2 = Linear::bind_plain(ck, "aligner.w2.weight", D, D);
  w.aligner_b2 = load_vector(ck, "aligner.w2.bias", D);
  w.image_start = load_vector(ck, "image_start", D);
  w.image_newline = load_vector(ck, "image_newline", D);
  w.image_end = load_vector(ck, "image_end", D);
  return w;
}

}  // namespace dsv41::vision
