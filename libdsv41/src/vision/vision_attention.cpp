#include "vision/vision_attention.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace dsv41::vision {

void full_attention(const float* qkv, int64_t n, int heads, int head_dim, float* out,
                    ThreadPool& pool) {
  const int64_t hd = head_dim, hidden = int64_t{heads} * hd;
  // q head-major [heads, n, hd]; k transposed per head [heads, hd, n], so the scores of
  // consecutive keys are independent sums the compiler can run side by side (one key's dot
  // product is still summed over d in order: the scores are the same bits).
  std::vector<float> q(static_cast<size_t>(n * hidden)), kt(q.size());
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      std::copy_n(qkv + t * 3 * hidden + h * hd, hd, &q[(h * n + t) * hd]);
      for (int64_t d = 0; d < hd; ++d)
        kt[(h * hd + d) * n + t] = qkv[t * 3 * hidden + hidden + h * hd + d];
    }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // kQueries queries of one head per job share each key and value row read (n keys of a large
  // image are megabytes); every query's sums keep their index order, as one query at a time.
  constexpr int64_t kQueries = 4, kKeys = 16;
  const int64_t blocks = (n + kQueries - 1) / kQueries;
  pool.parallel_for(static_cast<size_t>(heads * blocks), [&](size_t b, size_t e) {
    std::vector<float> s(static_cast<size_t>(kQueries * n));
    for (size_t job = b; job < e; ++job) {
      const int64_t h = static_cast<int64_t>(job) / blocks;
      const int64_t i0 = (static_cast<int64_t>(job) % blocks) * kQueries;
      const int64_t nq = std::min(kQueries, n - i0);
      float mx[kQueries], sum[kQueries];
      for (int64_t qi = 0; qi < nq; ++qi) mx[qi] = -INFINITY;
      const float* kh = &kt[h * hd * n];
      for (int64_t j0 = 0; j0 < n; j0 += kKeys) {
        const int64_t nk = std::min(kKeys, n - j0);
        for (int64_t qi = 0; qi < nq; ++qi) {
          const float* qr = &q[(h * n + i0 + qi) * hd];
          float dot[kKeys] = {};
          for (int64_t d = 0; d < hd; ++d) {
            const float* kd = kh + d * n + j0;
            for (int64_t jj = 0; jj < nk; ++jj) dot[jj] += qr[d] * kd[jj];
          }
          for (int64_t jj = 0; jj < nk; ++jj) {
            s[qi * n + j0 + jj] = dot[jj] * scale;
            mx[qi] = std::max(mx[qi], s[qi * n + j0 + jj]);
          }
        }
      }
      for (int64_t qi = 0; qi < nq; ++qi) {
        sum[qi] = 0.0f;
        for (int64_t j = 0; j < n; ++j) {
          s[qi * n + j] = std::exp(s[qi * n + j] - mx[qi]);
          sum[qi] += s[qi * n + j];
        }
        std::fill_n(out + (i0 + qi) * hidden + h * hd, hd, 0.0f);
      }
      for (int64_t j = 0; j < n; ++j) {
        const float* vj = qkv + j * 3 * hidden + 2 * hidden + h * hd;
        for (int64_t qi = 0; qi < nq; ++qi) {
          const float p = s[qi * n + j] / sum[qi];
          float* o = out + (i0 + qi) * hidden + h * hd;
          for (int64_t d = 0; d < hd; ++d) o[d] += p * vj[d];
        }
      }
    }
  });
}

}  // namespace dsv41::vision
