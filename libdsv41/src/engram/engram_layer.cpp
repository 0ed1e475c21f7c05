#include "engram/engram_layer.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>

#include "core/check.hpp"
#include "quant/dtype.hpp"

namespace dsv41::engram {
namespace {

constexpr int64_t kScaleBlock = 32;  // E8M0 scale granularity (spec §1.4, §5.1)
constexpr double kGateClamp = 1e-6;  // |dot| floor before the signed sqrt (HF-mod clamp_value)

const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = e4m3_to_f32(static_cast<uint8_t>(i));
    return t;
  }();
  return table;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

void gather_rows(const EngramWeights& w, const int64_t* ids, float* e) {
  const auto& lut = e4m3_table();
  const EngramDims& d = w.dims;
  const int64_t row_blocks = d.head_dim / kScaleBlock;
  for (int64_t j = 0; j < d.n_cols; ++j) {
    const uint8_t* row = w.embed + ids[j] * d.head_dim;
    const uint8_t* scale = w.embed_scale + ids[j] * row_blocks;
    for (int64_t c = 0; c < d.head_dim; ++c)
      e[j * d.head_dim + c] = lut[row[c]] * e8m0_to_f32(scale[c / kScaleBlock]);
  }
}

void project_kv(const EngramWeights& w, const float* e, float* kv) {
  const auto& lut = e4m3_table();
  const EngramDims& d = w.dims;
  const int64_t in = d.n_cols * d.head_dim, out = (d.hc + 1) * d.hidden;
  const int64_t in_blocks = ceil_div(in, kScaleBlock);
  // kv[o] = sum_c W[o,c] * 2^s[o/32, c/32] * E[c]; the power-of-two scale factors out of each
  // 32-column block exactly, so this equals the dot with the dequantised weight row.
  for (int64_t o = 0; o < out; ++o) {
    const uint8_t* wrow = w.wkv + o * in;
    const uint8_t* srow = w.wkv_scale + (o / kScaleBlock) * in_blocks;
    double acc = 0.0;
    for (int64_t b = 0; b < in_blocks; ++b) {
      const int64_t c_end = (b + 1) * kScaleBlock < in ? (b + 1) * kScaleBlock : in;
      double block = 0.0;
      for (int64_t c = b * kScaleBlock; c < c_end; ++c)
        block += static_cast<double>(lut[wrow[c]]) * e[c];
      acc += block * e8m0_to_f32(srow[b]);
    }
    kv[o] = static_cast<float>(acc);
  }
}

void apply_gate(float* h, const float* kv, const float* qk_all, int64_t hidden, int64_t hc,
                bool image, float eps) {
  const float* value = kv + hc * hidden;
  for (int64_t k = 0; k < hc; ++k) {
    float* hk = h + k * hidden;
    const float* key = kv + k * hidden;
    const float* qk = qk_all + k * hidden;
    double sum_h2 = 0.0, sum_k2 = 0.0, dot = 0.0;
    for (int64_t c = 0; c < hidden; ++c) {
      sum_h2 += static_cast<double>(hk[c]) * hk[c];
      sum_k2 += static_cast<double>(key[c]) * key[c];
      dot += static_cast<double>(hk[c]) * qk[c] * key[c];
    }
    const double n = static_cast<double>(hidden);
    // eps is fp32 in the reference (1e-20 released); it is added to the fp32 mean square.
    const double rstd = 1.0 / std::sqrt(sum_h2 / n + eps) / std::sqrt(sum_k2 / n + eps);
    dot *= rstd / std::sqrt(n);
    double gate = 0.0;
    if (!image) {
      const double mag = std::sqrt(std::fabs(dot) > kGateClamp ? std::fabs(dot) : kGateClamp);
      gate = 1.0 / (1.0 + std::exp(-std::copysign(mag, dot)));
    }
    const float g = static_cast<float>(gate);
    for (int64_t c = 0; c < hidden; ++c) hk[c] += g * value[c];
  }
}

EngramWeights load_engram_weights(const Checkpoint& ckpt, int64_t layer, const EngramDims& dims) {
  DSV41_CHECK(dims.hidden > 0 && dims.hc > 0 && dims.n_cols > 0 && dims.table_rows > 0,
              kInvalidArgument, "Engram layer {}: non-positive dims", layer);
  DSV41_CHECK(dims.head_dim > 0 && dims.head_dim % kScaleBlock == 0, kInvalidArgument,
              "engram_head_dim must be a positive multiple of 32, found {}", dims.head_dim);
  const std::string p = fmt::format("layers.{}.engram.", layer);
  const int64_t out = (dims.hc + 1) * dims.hidden, in = dims.n_cols * dims.head_dim;
  EngramWeights w;
  w.dims = dims;
  w.embed = ckpt.expect(p + "embed.weight", DType::kF8E4M3, {dims.table_rows, dims.head_dim}).data;
  w.embed_scale =
      ckpt.expect(p + "embed.scale", DType::kF8E8M0, {dims.table_rows, dims.head_dim / kScaleBlock})
          .data;
  w.wkv = ckpt.expect(p + "wkv.weight", DType::kF8E4M3, {out, in}).data;
  w.wkv_scale = ckpt.expect(p + "wkv.scale", DType::kF8E8M0,
                            {ceil_div(out, kScaleBlock), ceil_div(in, kScaleBlock)})
                    .data;
  const std::vector<float> q =
      tensor_to_f32(ckpt.expect(p + "q_weight", DType::kBF16, {dims.hc, dims.hidden}));
  const std::vector<float> k =
      tensor_to_f32(ckpt.expect(p + "k_weight", DType::kBF16, {dims.hc, dims.hidden}));
  w.qk.resize(q.size());
  for (size_t i = 0; i < q.size(); ++i) w.qk[i] = q[i] * k[i];  // fp32 product, as HF-mod
  return w;
}

void apply_engram(const EngramWeights& w, std::span<float> H, std::span<const int64_t> hash_ids,
                  std::span<const uint8_t> is_image, int64_t n_tokens, float eps,
                  ThreadPool* pool) {
  const EngramDims& d = w.dims;
  DSV41_CHECK(n_tokens >= 0 && H.size() == static_cast<size_t>(n_tokens * d.hc * d.hidden),
              kInvalidArgument, "Engram: H has {} floats, expected [{}, {}, {}]", H.size(),
              n_tokens, d.hc, d.hidden);
  DSV41_CHECK(hash_ids.size() == static_cast<size_t>(n_tokens * d.n_cols), kInvalidArgument,
              "Engram: {} hash ids, expected [{}, {}]", hash_ids.size(), n_tokens, d.n_cols);
  DSV41_CHECK(is_image.empty() || is_image.size() == static_cast<size_t>(n_tokens),
              kInvalidArgument, "Engram: {} image flags for {} positions", is_image.size(),
              n_tokens);
  for (int64_t i = 0; i < n_tokens * d.n_cols; ++i) {
    DSV41_CHECK(hash_ids[i] >= 0 && hash_ids[i] < d.table_rows, kInvalidArgument,
                "Engram: hash row id {} at position {}, column {} is outside the table of {} rows",
                hash_ids[i], i / d.n_cols, i % d.n_cols, d.table_rows);
  }
  auto run = [&](size_t begin, size_t end) {
    std::vector<float> e(static_cast<size_t>(d.n_cols * d.head_dim));
    std::vector<float> kv(static_cast<size_t>((d.hc + 1) * d.hidden));
    for (size_t t = begin; t < end; ++t) {
      gather_rows(w, hash_ids.data() + t * d.n_cols, e.data());
      project_kv(w, e.data(), kv.data());
      apply_gate(H.data() + t * d.hc * d.hidden, kv.data(), w.qk.data(), d.hidden, d.hc,
                 !is_image.empty() && is_image[t] != 0, eps);
    }
  };
  if (pool != nullptr && n_tokens > 1) {
    pool->parallel_for(static_cast<size_t>(n_tokens), run);
  } else {
    run(0, static_cast<size_t>(n_tokens));
  }
}

}  // namespace dsv41::engram
