#include "model/mhc.hpp"

#include <cmath>

#include "core/thread_pool.hpp"
#include "model/rms_norm.hpp"

namespace dsv41 {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

void for_tokens(ThreadPool* pool, int64_t T, const auto& fn) {
  if (pool && T > 1) {
    pool->parallel_for(static_cast<size_t>(T), [&](size_t b, size_t e) {
      for (size_t t = b; t < e; ++t) fn(static_cast<int64_t>(t));
    });
  } else {
    for (int64_t t = 0; t < T; ++t) fn(t);
  }
}

}  // namespace

void hc_sinkhorn(const float* logits, int hc, int iters, float eps, float* c) {
  for (int j = 0; j < hc; ++j) {
    const float* l = logits + j * hc;
    float mx = l[0];
    for (int k = 1; k < hc; ++k) mx = std::max(mx, l[k]);
    float sum = 0.0f;
    for (int k = 0; k < hc; ++k) sum += (c[j * hc + k] = std::exp(l[k] - mx));
    for (int k = 0; k < hc; ++k) c[j * hc + k] = c[j * hc + k] / sum + eps;
  }
  auto normalise_columns = [&] {
    for (int k = 0; k < hc; ++k) {
      float sum = 0.0f;
      for (int j = 0; j < hc; ++j) sum += c[j * hc + k];
      for (int j = 0; j < hc; ++j) c[j * hc + k] /= (sum + eps);
    }
  };
  auto normalise_rows = [&] {
    for (int j = 0; j < hc; ++j) {
      float sum = 0.0f;
      for (int k = 0; k < hc; ++k) sum += c[j * hc + k];
      for (int k = 0; k < hc; ++k) c[j * hc + k] /= (sum + eps);
    }
  };
  normalise_columns();
  for (int it = 1; it < iters; ++it) {
    normalise_rows();
    normalise_columns();
  }
}

HcMixes hc_mixes(const HcSiteWeights& w, const HcShape& s, const float* H, int64_t T,
                 ThreadPool* pool) {
  const int hc = s.hc;
  const int mix = s.mix_dim();
  const int64_t flat = hc * s.dim;  // §3.1: one statistic over all hc·D values of a token
  HcMixes m;
  m.pre.resize(T * hc);
  m.post.resize(T * hc);
  m.comb.resize(T * hc * hc);
  for_tokens(pool, T, [&](int64_t t) {
    const float* v = H + t * flat;
    const float inv = rms_inverse(v, flat, s.norm_eps);
    std::vector<float> mixes(mix), logits(hc * hc);
    for (int r = 0; r < mix; ++r) {  // m = fn · v̂ (v̂ = v · inv; inv factored out of the sum)
      const float* f = w.fn.data() + r * flat;
      double acc = 0.0;
      for (int64_t i = 0; i < flat; ++i) acc += static_cast<double>(f[i]) * v[i];
      mixes[r] = static_cast<float>(acc * inv);
    }
    for (int j = 0; j < hc; ++j) {
      m.pre[t * hc + j] = sigmoid(mixes[j] * w.scale[0] + w.base[j]) + s.hc_eps;
      m.post[t * hc + j] = 2.0f * sigmoid(mixes[hc + j] * w.scale[1] + w.base[hc + j]);
    }
    for (int i = 0; i < hc * hc; ++i)
      logits[i] = mixes[2 * hc + i] * w.scale[2] + w.base[2 * hc + i];
    hc_sinkhorn(logits.data(), hc, s.sinkhorn_iters, s.hc_eps, m.comb.data() + t * hc * hc);
  });
  return m;
}

void hc_collapse(const float* H, const float* pre, const HcShape& s, int64_t T, float* x) {
  const int hc = s.hc;
  const int64_t D = s.dim;
  for (int64_t t = 0; t < T; ++t) {
    const float* h = H + t * hc * D;
    const float* p = pre + t * hc;
    float* xt = x + t * D;
    for (int64_t d = 0; d < D; ++d) {
      float acc = 0.0f;
      for (int j = 0; j < hc; ++j) acc += p[j] * h[j * D + d];
      xt[d] = acc;
    }
  }
}

void hc_expand(const float* y, const float* H_old, const HcMixes& m, const HcShape& s, int64_t T,
               float* H_new) {
  const int hc = s.hc;
  const int64_t D = s.dim;
  for (int64_t t = 0; t < T; ++t) {
    const float* h = H_old + t * hc * D;
    const float* c = m.comb.data() + t * hc * hc;
    const float* post = m.post.data() + t * hc;
    const float* yt = y + t * D;
    float* out = H_new + t * hc * D;
    for (int k = 0; k < hc; ++k) {
      for (int64_t d = 0; d < D; ++d) {
        float acc = post[k] * yt[d];
        for (int j = 0; j < hc; ++j) acc += c[j * hc + k] * h[j * D + d];
        out[k * D + d] = acc;
      }
    }
  }
}

std::vector<float> hc_initial_pre(const HcShape& s, int64_t T) {
  std::vector<float> pre(T * s.hc, 0.0f);
  for (int64_t t = 0; t < T; ++t) pre[t * s.hc] = 1.0f;
  return pre;
}

}  // namespace dsv41
