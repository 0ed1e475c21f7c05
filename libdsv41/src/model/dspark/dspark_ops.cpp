#include "model/dspark/dspark_ops.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/attention/rope.hpp"

namespace dsv41 {

void hc_stream_mean(const float* H, int64_t T, int hc, int64_t D, float* out, int64_t out_stride) {
  for (int64_t t = 0; t < T; ++t) {
    const float* h = H + t * hc * D;
    float* f = out + t * out_stride;
    for (int64_t d = 0; d < D; ++d) {
      float sum = 0;
      for (int j = 0; j < hc; ++j) sum += h[j * D + d];
      f[d] = sum / static_cast<float>(hc);
    }
  }
}

void dspark_attend(const float* q, const float* const* ctx, int64_t n_ctx, const float* block,
                   const float* sink, const float* inv_freq, int64_t K, int64_t H, int64_t D, int R,
                   int64_t pos0, float* o) {
  std::vector<const float*> keys(ctx, ctx + n_ctx);
  for (int64_t t = 0; t < K; ++t) keys.push_back(block + t * D);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  std::vector<float> score(keys.size());
  for (int64_t t = 0; t < K; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      const float* qv = q + (t * H + h) * D;
      float m = sink[h];
      for (size_t j = 0; j < keys.size(); ++j) {
        float acc = 0;
        for (int64_t c = 0; c < D; ++c) acc += qv[c] * keys[j][c];
        score[j] = acc * scale;
        m = std::max(m, score[j]);
      }
      float denom = std::exp(sink[h] - m);
      for (size_t j = 0; j < keys.size(); ++j) {
        score[j] = std::exp(score[j] - m);
        denom += score[j];
      }
      float* ov = o + (t * H + h) * D;
      std::fill_n(ov, D, 0.0f);
      for (size_t j = 0; j < keys.size(); ++j) {
        const float p = score[j] / denom;
        for (int64_t c = 0; c < D; ++c) ov[c] += p * keys[j][c];
      }
      rope_rotate(ov + D - R, inv_freq, R, pos0 + t, true);
    }
  }
}

int32_t dspark_markov_pick(const float* u, const float* markov, int64_t V) {
  int32_t best = 0;
  float best_v = -INFINITY;
  for (int64_t v = 0; v < V; ++v) {
    const float l = u[v] + markov[v];
    if (l > best_v) {
      best_v = l;
      best = static_cast<int32_t>(v);
    }
  }
  return best;
}

float dspark_confidence(const float* w, const float* h, int64_t D, const float* e, int64_t R) {
  float z = 0;
  for (int64_t i = 0; i < D; ++i) z += w[i] * h[i];
  for (int64_t i = 0; i < R; ++i) z += w[D + i] * e[i];
  return 1.0f / (1.0f + std::exp(-z));
}

}  // namespace dsv41
