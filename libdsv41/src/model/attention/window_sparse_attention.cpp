// §2.2 steps 4-6 / §2.6: window + selected compressed entries + sink, one softmax per
// (token, head). Moved verbatim out of AttentionLayer::forward (same fp32 operation order).
#include "model/attention/window_sparse_attention.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.hpp"
#include "core/thread_pool.hpp"
#include "model/attention/rope.hpp"

namespace dsv41 {
namespace {

template <typename Fn>
void for_range(ThreadPool* pool, int64_t n, Fn&& fn) {
  if (pool != nullptr && n > 1) {
    pool->parallel_for(static_cast<size_t>(n), [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) fn(static_cast<int64_t>(i));
    });
  } else {
    for (int64_t i = 0; i < n; ++i) fn(i);
  }
}

}  // namespace

void window_sparse_attention(const float* q, const float* new_kv, int64_t T, int64_t H, int64_t D,
                             int R, int64_t W, int64_t pos0, const WindowRing& ring,
                             const IndexSelection* selection, const CsaSourceState* csrc,
                             const float* sink, const float* inv_freq, int layer, float* o,
                             ThreadPool* pool) {
  const int l = layer;
  DSV41_CHECK((selection == nullptr) == (csrc == nullptr), kInternal,
              "layer {}: a selection needs its KV source (and the other way round)", l);
  // Per-call fp32 scratch of the packed state this call reads: window positions
  // [first_old, pos0) and the compressed entries any query selected (rows in `sel_rows`).
  const int64_t first_old = std::max<int64_t>(0, pos0 - W + 1);
  std::vector<float> old_kv((pos0 - first_old) * D);
  for (int64_t p = first_old; p < pos0; ++p) ring.read(p, old_kv.data() + (p - first_old) * D);
  std::vector<int32_t> used;
  if (selection != nullptr) {
    for (int32_t i : selection->index) {
      if (i < 0) continue;
      DSV41_CHECK(i < csrc->n_entries && i < csrc->cache.n_compressed(), kInvalidArgument,
                  "layer {}: selected entry {} but source {} holds {}", l, i, csrc->layer,
                  csrc->cache.n_compressed());
      used.push_back(i);
    }
    std::sort(used.begin(), used.end());
    used.erase(std::unique(used.begin(), used.end()), used.end());
  }
  std::vector<float> sel_rows(used.size() * D);
  for (size_t r = 0; r < used.size(); ++r) csrc->cache.read_compressed(used[r], &sel_rows[r * D]);
  auto selected_row = [&](int32_t i) {
    return sel_rows.data() + (std::lower_bound(used.begin(), used.end(), i) - used.begin()) * D;
  };

  const float scale = static_cast<float>(std::pow(static_cast<double>(D), -0.5));
  for_range(pool, T * H, [&](int64_t th) {
    const int64_t t = th / H, h = th % H, pos = pos0 + t;
    const float* qh = q + th * D;
    std::vector<const float*> keys;
    const int64_t first = std::max<int64_t>(0, pos - W + 1);
    for (int64_t k = first; k <= pos; ++k)
      keys.push_back(k >= pos0 ? new_kv + (k - pos0) * D : old_kv.data() + (k - first_old) * D);
    if (selection != nullptr) {
      const int32_t* idx = selection->index.data() + t * selection->topk;
      for (int i = 0; i < selection->topk; ++i) {
        if (idx[i] >= 0) keys.push_back(selected_row(idx[i]));
      }
    }
    std::vector<float> s(keys.size());
    float m = sink[h];
    for (size_t j = 0; j < keys.size(); ++j) {
      float dot = 0.0f;
      for (int64_t c = 0; c < D; ++c) dot += qh[c] * keys[j][c];
      s[j] = dot * scale;
      m = std::max(m, s[j]);
    }
    float denom = std::exp(sink[h] - m);
    for (float& v : s) {
      v = std::exp(v - m);
      denom += v;
    }
    float* oh = o + th * D;
    std::fill(oh, oh + D, 0.0f);
    for (size_t j = 0; j < keys.size(); ++j) {
      const float p = s[j] / denom;
      for (int64_t c = 0; c < D; ++c) oh[c] += p * keys[j][c];
    }
    rope_rotate(oh + D - R, inv_freq, R, pos, true);
  });
}

}  // namespace dsv41
