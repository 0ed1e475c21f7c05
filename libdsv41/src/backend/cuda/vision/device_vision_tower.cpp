#include "backend/cuda/vision/device_vision_tower.hpp"

#include <fmt/format.h>

#include <cmath>

#include "backend/cuda/forward/device_linear.hpp"
#include "backend/cuda/forward/launch_check.hpp"
#include "core/check.hpp"
#include "dsv41k/launchers.hpp"
#include "dsv41k/vision.hpp"
#include "vision/vision_rope.hpp"

namespace dsv41::cuda {

struct DeviceVisionTower::Block {
  DeviceLinear wqkv, wo, w1, w2;
  DeviceBuffer norm1, norm2, wqkv_bias, wo_bias;
};

namespace {

DeviceBuffer buffer(int64_t floats) { return DeviceBuffer(static_cast<size_t>(floats) * 4); }

}  // namespace

DeviceVisionTower::~DeviceVisionTower() = default;

std::unique_ptr<DeviceVisionTower> DeviceVisionTower::upload(const vision::VisionTower& cpu) {
  const VisionConfig& v = cpu.config();
  const vision::VisionWeights& w = cpu.weights();
  DSV41_CHECK(v.head_dim() == 16 || v.head_dim() == 32 || v.head_dim() == 64, kUnsupported,
              "vision_config: head_dim {} (hidden_size {} / num_attention_heads {}): the CUDA "
              "tower's attention takes 16, 32 or 64",
              v.head_dim(), v.hidden_size, v.num_attention_heads);
  std::unique_ptr<DeviceVisionTower> t(new DeviceVisionTower());
  t->cpu_ = &cpu;
  t->stream_ = std::make_unique<CudaStream>();
  // Patch embed [hidden, 3·p²]: 588 columns at p = 14, not on the GEMM's 32-column tiles, so the
  // weight goes up with zero columns to the next multiple of 32 and each patch row is padded
  // with zeros to match (the same sums: the extra products are 0).
  t->patch_in_ = w.patch_embed.in_features();
  t->patch_in_padded_ = (t->patch_in_ + 31) / 32 * 32;
  const int64_t hidden = v.hidden_size;
  std::vector<float> pe(static_cast<size_t>(hidden * t->patch_in_padded_), 0.0f);
  for (int64_t r = 0; r < hidden; ++r)
    w.patch_embed.dequantize_row(r, pe.data() + r * t->patch_in_padded_);
  t->patch_embed_ = std::make_unique<DeviceLinear>(
      DeviceLinear::from_f32(pe, hidden, t->patch_in_padded_, "vision.patch_embed"));
  t->patch_embed_bias_ = upload_f32(w.patch_embed_bias);
  t->weight_bytes_ += t->patch_embed_->bytes();
  for (size_t i = 0; i < w.blocks.size(); ++i) {
    const vision::VisionBlockWeights& b = w.blocks[i];
    const std::string p = fmt::format("vision.blocks.{}", i);
    auto d = std::make_unique<Block>();
    d->wqkv = DeviceLinear::upload(b.wqkv, p + ".attn.qkv");
    d->wo = DeviceLinear::upload(b.wo, p + ".attn.proj");
    d->w1 = DeviceLinear::upload(b.w1, p + ".mlp.w1");
    d->w2 = DeviceLinear::upload(b.w2, p + ".mlp.w2");
    d->norm1 = upload_f32(b.norm1);
    d->norm2 = upload_f32(b.norm2);
    d->wqkv_bias = upload_f32(b.wqkv_bias);
    d->wo_bias = upload_f32(b.wo_bias);
    t->weight_bytes_ += d->wqkv.bytes() + d->wo.bytes() + d->w1.bytes() + d->w2.bytes();
    t->blocks_.push_back(std::move(d));
  }
  t->norm_ = upload_f32(w.norm);
  t->aligner_w1_ = std::make_unique<DeviceLinear>(DeviceLinear::upload(w.aligner_w1, "aligner.w1"));
  t->aligner_w2_ = std::make_unique<DeviceLinear>(DeviceLinear::upload(w.aligner_w2, "aligner.w2"));
  t->aligner_b1_ = upload_f32(w.aligner_b1);
  t->aligner_b2_ = upload_f32(w.aligner_b2);
  t->weight_bytes_ += t->aligner_w1_->bytes() + t->aligner_w2_->bytes();
  return t;
}

void DeviceVisionTower::run_vit(const vision::ImagePatches& patches, DeviceBuffer& out) const {
  const VisionConfig& v = cpu_->config();
  const vision::ImageLayout& l = patches.layout;
  const int64_t n = l.patches(), hidden = v.hidden_size, inter = v.intermediate_size;
  const int heads = v.num_attention_heads, hd = v.head_dim();
  DSV41_CHECK(n > 0 && static_cast<int64_t>(patches.values.size()) == n * patch_in_,
              kInvalidArgument, "vision: {} patch values for a {}x{} grid of {} each",
              patches.values.size(), l.vit_h, l.vit_w, patch_in_);
  cudaStream_t s = stream_->get();
  // Host inputs: padded patches and the RoPE cos / sin tables (std::cos / std::sin of the
  // reference's fp32 angles, so both sides rotate by the same values).
  std::vector<float> padded(static_cast<size_t>(n * patch_in_padded_), 0.0f);
  for (int64_t t = 0; t < n; ++t)
    std::copy_n(patches.values.data() + t * patch_in_, patch_in_,
                padded.data() + t * patch_in_padded_);
  const std::vector<float> angles = vision::vision_rope_angles(l.vit_h, l.vit_w, hd, v.rope_theta);
  std::vector<float> cos_t(angles.size()), sin_t(angles.size());
  for (size_t i = 0; i < angles.size(); ++i) {
    cos_t[i] = std::cos(angles[i]);
    sin_t[i] = std::sin(angles[i]);
  }
  DeviceBuffer P = upload_f32(padded), C = upload_f32(cos_t), S = upload_f32(sin_t);
  DeviceBuffer x = buffer(n * hidden), xn = buffer(n * hidden), y = buffer(n * hidden);
  DeviceBuffer qkv = buffer(n * 3 * hidden), att = buffer(n * hidden);
  DeviceBuffer gu = buffer(n * 2 * inter), act = buffer(n * inter);
  float* X = x.as<float>();
  float* XN = xn.as<float>();
  float* Y = y.as<float>();
  patch_embed_->gemv(P.as<float>(), n, X, s);
  check_launch(kernels::vision_add_bias(X, patch_embed_bias_.as<float>(), n, hidden, s), -1,
               "vision patch_embed bias");
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = *blocks_[i];
    const int li = static_cast<int>(i);
    check_launch(
        kernels::rms_norm(X, b.norm1.as<float>(), XN, n, hidden, vision::kVisionNormEps, s), li,
        "vision norm1");
    b.wqkv.gemv(XN, n, qkv.as<float>(), s);
    check_launch(
        kernels::vision_add_bias(qkv.as<float>(), b.wqkv_bias.as<float>(), n, 3 * hidden, s), li,
        "vision qkv bias");
    check_launch(
        kernels::vision_rope(qkv.as<float>(), C.as<float>(), S.as<float>(), n, heads, hd, s), li,
        "vision rope");
    check_launch(kernels::vision_attention(qkv.as<float>(), att.as<float>(), n, heads, hd, s), li,
                 "vision attention");
    b.wo.gemv(att.as<float>(), n, Y, s);
    check_launch(kernels::vision_residual_add(X, Y, b.wo_bias.as<float>(), n, hidden, s), li,
                 "vision attention residual");
    check_launch(
        kernels::rms_norm(X, b.norm2.as<float>(), XN, n, hidden, vision::kVisionNormEps, s), li,
        "vision norm2");
    b.w1.gemv(XN, n, gu.as<float>(), s);
    check_launch(kernels::vision_silu_mul(gu.as<float>(), act.as<float>(), n, inter, s), li,
                 "vision silu");
    b.w2.gemv(act.as<float>(), n, Y, s);
    check_launch(kernels::vision_residual_add(X, Y, nullptr, n, hidden, s), li,
                 "vision mlp residual");
  }
  out = buffer(n * hidden);
  check_launch(kernels::rms_norm(X, norm_.as<float>(), out.as<float>(), n, hidden,
                                 vision::kVisionNormEps, s),
               -1, "vision final norm");
  stream_->synchronize();  // the per-call buffers are freed on return
}

std::vector<float> DeviceVisionTower::encode(const vision::ImagePatches& patches) const {
  std::lock_guard<std::mutex> lock(mu_);
  DeviceBuffer vit;
  run_vit(patches, vit);
  std::vector<float> host(vit.bytes() / 4);
  vit.download(std::span<float>(host));
  return host;
}

std::vector<float> DeviceVisionTower::span(const vision::ImagePatches& patches) const {
  std::lock_guard<std::mutex> lock(mu_);
  const VisionConfig& v = cpu_->config();
  const vision::ImageLayout& l = patches.layout;
  const int64_t D = cpu_->embedding_dim(), rows = l.image_tokens();
  const int r = v.downsample_ratio;
  DeviceBuffer vit;
  run_vit(patches, vit);
  cudaStream_t s = stream_->get();
  DeviceBuffer merged = buffer(rows * v.hidden_size * r * r), hid = buffer(rows * D),
               out = buffer(rows * D);
  check_launch(kernels::vision_merge(vit.as<float>(), merged.as<float>(), l.vit_h, l.vit_w,
                                     v.hidden_size, r, s),
               -1, "vision merge");
  aligner_w1_->gemv(merged.as<float>(), rows, hid.as<float>(), s);
  check_launch(kernels::vision_add_bias(hid.as<float>(), aligner_b1_.as<float>(), rows, D, s), -1,
               "aligner w1 bias");
  check_launch(kernels::vision_gelu(hid.as<float>(), rows * D, s), -1, "aligner gelu");
  aligner_w2_->gemv(hid.as<float>(), rows, out.as<float>(), s);
  check_launch(kernels::vision_add_bias(out.as<float>(), aligner_b2_.as<float>(), rows, D, s), -1,
               "aligner w2 bias");
  stream_->synchronize();
  std::vector<float> aligned(static_cast<size_t>(rows * D));
  out.download(std::span<float>(aligned));
  return cpu_->assemble_span(aligned, l);
}

}  // namespace dsv41::cuda
