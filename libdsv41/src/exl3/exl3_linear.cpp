// Tile-by-tile decode with the codebook LUT (spec exl3-format.md §1.7).
#include "exl3/exl3_linear.hpp"

#include <algorithm>
#include <cstring>

#include "core/thread_pool.hpp"
#include "exl3/hadamard.hpp"
#include "exl3/trellis_tile.hpp"
#include "quant/dtype.hpp"

namespace dsv41::exl3 {

namespace {

// Accumulates yh[r, 16tn .. 16tn+15] += xh[r, 16tk .. 16tk+15] · tile for tiles tn in
// [tn_begin, tn_end) over every k band, so each worker owns disjoint output columns.
void accumulate_columns(const Exl3Tensor& t, const float* xh, size_t rows, float* yh,
                        int64_t tn_begin, int64_t tn_end) {
  const float* lut = codebook_lut_f32(t.codebook);
  const size_t k = static_cast<size_t>(t.k), n = static_cast<size_t>(t.n);
  float tile[kTileElems];
  for (int64_t tk = 0; tk < t.tiles_k(); ++tk) {
    for (int64_t tn = tn_begin; tn < tn_end; ++tn) {
      decode_tile_f32(t.tile(tk, tn), t.K, lut, tile);
      for (size_t r = 0; r < rows; ++r) {
        const float* xr = xh + r * k + 16 * tk;
        float* yr = yh + r * n + 16 * tn;
        float acc[kTileSize] = {};
        for (int i = 0; i < kTileSize; ++i) {
          const float xi = xr[i];
          const float* wrow = tile + i * kTileSize;
          for (int c = 0; c < kTileSize; ++c) acc[c] += xi * wrow[c];
        }
        for (int c = 0; c < kTileSize; ++c) yr[c] += acc[c];
      }
    }
  }
}

}  // namespace

std::vector<uint16_t> decode_inner(const Exl3Tensor& t) {
  const uint16_t* lut = codebook_lut_f16(t.codebook);
  const size_t n = static_cast<size_t>(t.n);
  std::vector<uint16_t> out(static_cast<size_t>(t.k) * n);
  uint16_t tile[kTileElems];
  for (int64_t tk = 0; tk < t.tiles_k(); ++tk) {
    for (int64_t tn = 0; tn < t.tiles_n(); ++tn) {
      decode_tile_f16(t.tile(tk, tn), t.K, lut, tile);
      for (int r = 0; r < kTileSize; ++r)
        std::memcpy(&out[(16 * tk + r) * n + 16 * tn], tile + r * kTileSize, 2 * kTileSize);
    }
  }
  return out;
}

std::vector<float> reconstruct_weight(const Exl3Tensor& t) {
  const size_t k = static_cast<size_t>(t.k), n = static_cast<size_t>(t.n);
  const std::vector<uint16_t> inner = decode_inner(t);
  std::vector<double> w(k * n);
  for (size_t i = 0; i < k * n; ++i) w[i] = f16_to_f32(inner[i]);
  // Hk·Ŵ: butterflies between rows inside each 128-row block, vectorised along the row.
  for (size_t b = 0; b < k; b += kHadamardSize) {
    for (size_t h = 1; h < kHadamardSize; h *= 2) {
      for (size_t i = b; i < b + kHadamardSize; i += 2 * h) {
        for (size_t j = i; j < i + h; ++j) {
          double* top = &w[j * n];
          double* bot = &w[(j + h) * n];
          for (size_t c = 0; c < n; ++c) {
            const double a = top[c], d = bot[c];
            top[c] = a + d;
            bot[c] = a - d;
          }
        }
      }
    }
  }
  // ·Hn: each row's 128-column blocks.
  for (size_t r = 0; r < k; ++r)
    for (size_t b = 0; b < n; b += kHadamardSize) hadamard128_unscaled(&w[r * n + b]);
  std::vector<float> suh(k), svh(n);
  t.suh.to_f32(suh.data());
  t.svh.to_f32(svh.data());
  std::vector<float> out(k * n);
  constexpr double kScale = 1.0 / 128.0;  // (1/sqrt(128))^2, exact
  for (size_t r = 0; r < k; ++r)
    for (size_t c = 0; c < n; ++c)
      out[r * n + c] = static_cast<float>(
          w[r * n + c] * kScale * (static_cast<double>(suh[r]) * static_cast<double>(svh[c])));
  return out;
}

void matmul(const Exl3Tensor& t, const float* x, size_t rows, float* y, ThreadPool* pool) {
  const size_t k = static_cast<size_t>(t.k), n = static_cast<size_t>(t.n);
  std::vector<float> suh(k), svh(n);
  t.suh.to_f32(suh.data());
  t.svh.to_f32(svh.data());
  std::vector<float> xh(rows * k);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t i = 0; i < k; ++i) xh[r * k + i] = x[r * k + i] * suh[i];
    hadamard128_blocks(&xh[r * k], k);
  }
  std::fill(y, y + rows * n, 0.0f);
  const size_t tiles_n = static_cast<size_t>(t.tiles_n());
  if (pool && pool->size() > 1) {
    pool->parallel_for(tiles_n, [&](size_t b, size_t e) {
      accumulate_columns(t, xh.data(), rows, y, static_cast<int64_t>(b), static_cast<int64_t>(e));
    });
  } else {
    accumulate_columns(t, xh.data(), rows, y, 0, static_cast<int64_t>(tiles_n));
  }
  for (size_t r = 0; r < rows; ++r) {
    float* yr = y + r * n;
    hadamard128_blocks(yr, n);
    for (size_t c = 0; c < n; ++c) yr[c] *= svh[c];
    if (t.bias) {
      for (size_t c = 0; c < n; ++c) {
        if (t.bias_dtype == DType::kF32) {
          float b;
          std::memcpy(&b, t.bias + 4 * c, 4);
          yr[c] += b;
        } else {
          uint16_t h;
          std::memcpy(&h, t.bias + 2 * c, 2);
          yr[c] += f16_to_f32(h);
        }
      }
    }
  }
}

}  // namespace dsv41::exl3
