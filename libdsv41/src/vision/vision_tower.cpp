#include "vision/vision_tower.hpp"

#include <algorithm>
#include <cmath>

#include "core/check.hpp"
#include "model/rms_norm.hpp"
#include "vision/patch_merge.hpp"
#include "vision/vision_attention.hpp"
#include "vision/vision_rope.hpp"

namespace dsv41::vision {

namespace {

void add_bias(float* y, const std::vector<float>& b, int64_t rows) {
  const int64_t n = static_cast<int64_t>(b.size());
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t i = 0; i < n; ++i) y[t * n + i] += b[i];
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

// Exact (erf) GELU, PyTorch's default.
float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x / std::sqrt(2.0f))); }

}  // namespace

VisionTower::VisionTower(const Checkpoint& ck, const ModelConfig& cfg, ThreadPool& pool)
    : cfg_(cfg), pool_(&pool) {
  DSV41_CHECK(cfg.has_vision, kUnsupported,
              "config.json has no vision_config: this checkpoint has no vision tower");
  w_ = VisionWeights::bind(ck, cfg);
}

void VisionTower::block(const VisionBlockWeights& w, int64_t n, const std::vector<float>& angles,
                        std::vector<float>& x) const {
  const VisionConfig& v = cfg_.vision;
  const int64_t hidden = v.hidden_size, inter = v.intermediate_size;
  std::vector<float> xn(x.size());
  rms_norm(x.data(), w.norm1.data(), n, hidden, kVisionNormEps, xn.data());
  std::vector<float> qkv(static_cast<size_t>(n * 3 * hidden));
  w.wqkv.forward(xn.data(), n, qkv.data(), pool_);
  add_bias(qkv.data(), w.wqkv_bias, n);
  std::vector<float> att(x.size());
  rotate_qk(qkv.data(), n, v.num_attention_heads, v.head_dim(), angles.data());
  full_attention(qkv.data(), n, v.num_attention_heads, v.head_dim(), att.data(), *pool_);
  std::vector<float> y(x.size());
  w.wo.forward(att.data(), n, y.data(), pool_);
  add_bias(y.data(), w.wo_bias, n);
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];

  rms_norm(x.data(), w.norm2.data(), n, hidden, kVisionNormEps, xn.data());
  std::vector<float> gate_up(static_cast<size_t>(n * 2 * inter));
  w.w1.forward(xn.data(), n, gate_up.data(), pool_);
  std::vector<float> act(static_cast<size_t>(n * inter));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < inter; ++i)
      act[t * inter + i] = silu(gate_up[t * 2 * inter + i]) * gate_up[t * 2 * inter + inter + i];
  w.w2.forward(act.data(), n, y.data(), pool_);
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

std::vector<float> VisionTower::encode(const ImagePatches& patches) const {
  const VisionConfig& v = cfg_.vision;
  const ImageLayout& l = patches.layout;
  const int64_t n = l.patches(), hidden = v.hidden_size;
  const int64_t per_patch = int64_t{3} * v.patch_size * v.patch_size;
  DSV41_CHECK(n > 0 && static_cast<int64_t>(patches.values.size()) == n * per_patch,
              kInvalidArgument, "vision: {} patch values for a {}x{} grid of {} each",
              patches.values.size(), l.vit_h, l.vit_w, per_patch);
  std::vector<float> x(static_cast<size_t>(n * hidden));
  w_.patch_embed.forward(patches.values.data(), n, x.data(), pool_);
  add_bias(x.data(), w_.patch_embed_bias, n);
  const std::vector<float> angles =
      vision_rope_angles(l.vit_h, l.vit_w, v.head_dim(), v.rope_theta);
  for (const VisionBlockWeights& b : w_.blocks) block(b, n, angles, x);
  rms_norm(x.data(), w_.norm.data(), n, hidden, kVisionNormEps, x.data());
  return x;
}

std::vector<float> VisionTower::align(const std::vector<float>& vit, const ImageLayout& l) const {
  const VisionConfig& v = cfg_.vision;
  const int64_t D = embedding_dim(), rows = l.image_tokens();
  DSV41_CHECK(static_cast<int64_t>(vit.size()) == l.patches() * v.hidden_size, kInvalidArgument,
              "vision: {} ViT values for {} patches of {}", vit.size(), l.patches(), v.hidden_size);
  const std::vector<float> merged =
      merge_patches(vit.data(), l.vit_h, l.vit_w, v.hidden_size, v.downsample_ratio);
  DSV41_CHECK(static_cast<int64_t>(merged.size()) ==
                  rows * v.hidden_size * v.downsample_ratio * v.downsample_ratio,
              kInternal, "vision: merge gave {} values for {} aligner rows", merged.size(), rows);
  std::vector<float> hid(static_cast<size_t>(rows * D));
  w_.aligner_w1.forward(merged.data(), rows, hid.data(), pool_);
  add_bias(hid.data(), w_.aligner_b1, rows);
  for (float& h : hid) h = gelu(h);
  std::vector<float> out(hid.size());
  w_.aligner_w2.forward(hid.data(), rows, out.data(), pool_);
  add_bias(out.data(), w_.aligner_b2, rows);
  return out;
}

std::vector<float> VisionTower::span(const ImagePatches& patches) const {
  return assemble_span(align(encode(patches), patches.layout), patches.layout);
}

std::vector<float> VisionTower::assemble_span(const std::vector<float>& rows,
                                              const ImageLayout& l) const {
  const int64_t D = embedding_dim();
  DSV41_CHECK(static_cast<int64_t>(rows.size()) == l.image_tokens() * D, kInternal,
              "vision: {} aligner values for {} rows of {}", rows.size(), l.image_tokens(), D);
  std::vector<float> s;
  s.reserve(static_cast<size_t>(l.span_length() * D));
  s.insert(s.end(), w_.image_start.begin(), w_.image_start.end());
  for (int r = 0; r < l.llm_h; ++r) {
    const auto first = rows.begin() + int64_t{r} * l.llm_w * D;
    s.insert(s.end(), first, first + int64_t{l.llm_w} * D);
    s.insert(s.end(), w_.image_newline.begin(), w_.image_newline.end());
  }
  s.insert(s.end(), w_.image_end.begin(), w_.image_end.end());
  return s;
}

}  // namespace dsv41::vision
