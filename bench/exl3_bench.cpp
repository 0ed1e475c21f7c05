// EXL3 CPU decode throughput (docs/perf.md "EXL3 CPU decode"): one DeepSeek-V4.1 expert
// projection (k = 5120 in, n = 2304 out, MUL1) at K = 2, 3, 5 with random trellis bits, one thread.
//   decode   tile states + LUT into a 16x16 fp32 tile (the inner loop of every CPU path)
//   inner    decode_inner: Ŵ as fp16 [k, n] row-major
//   gemv     matmul with 1 row (x·W decoded on the fly, both Hadamards)
//   gemm8    matmul with 8 rows
// Usage: dsv41_bench_exl3 [--reps N]   (weights/s = k·n·reps / seconds, per core)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "exl3/codebook.hpp"
#include "exl3/exl3_linear.hpp"
#include "exl3/trellis_tile.hpp"
#include "quant/dtype.hpp"

using namespace dsv41;
using namespace dsv41::exl3;

namespace {

constexpr int64_t kIn = 5120, kOut = 2304;

struct Buffers {
  std::vector<uint8_t> trellis, suh, svh;
};

Exl3Tensor make_tensor(int K, Buffers& b) {
  std::mt19937 rng(K);
  b.trellis.resize(static_cast<size_t>(kIn / 16 * kOut / 16 * 32 * K));
  for (auto& x : b.trellis) x = static_cast<uint8_t>(rng());
  auto signs = [&](std::vector<uint8_t>& v, int64_t n) {
    v.resize(2 * n);
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t h = f32_to_f16(rng() & 1 ? -0.01f : 0.01f);
      std::memcpy(&v[2 * i], &h, 2);
    }
  };
  signs(b.suh, kIn);
  signs(b.svh, kOut);
  Exl3Tensor t;
  t.prefix = "bench";
  t.k = kIn;
  t.n = kOut;
  t.K = K;
  t.codebook = Codebook::kMul1;
  t.trellis = b.trellis.data();
  t.suh = {b.suh.data(), false, kIn};
  t.svh = {b.svh.data(), false, kOut};
  return t;
}

template <typename Fn>
double weights_per_second(int reps, Fn&& fn) {
  fn();  // warm-up (LUT build, page faults)
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) fn();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(kIn * kOut) * reps / s;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
  std::printf("EXL3 CPU decode, expert projection %lldx%lld (in x out), MUL1, 1 thread, %d reps\n",
              static_cast<long long>(kIn), static_cast<long long>(kOut), reps);
  std::printf(
      "| K | decode (Mw/s) | inner fp16 (Mw/s) | gemv 1 row (Mw/s) | gemm 8 rows (Mw/s) |\n");
  std::printf("|---|---|---|---|---|\n");
  for (int K : {2, 3, 5}) {
    Buffers b;
    const Exl3Tensor t = make_tensor(K, b);
    const float* lut = codebook_lut_f32(t.codebook);
    volatile float sink = 0;
    const double dec = weights_per_second(reps, [&] {
      float tile[kTileElems];
      float acc = 0;
      for (int64_t tk = 0; tk < t.tiles_k(); ++tk)
        for (int64_t tn = 0; tn < t.tiles_n(); ++tn) {
          decode_tile_f32(t.tile(tk, tn), K, lut, tile);
          acc += tile[tn & 255];
        }
      sink = sink + acc;
    });
    const double inner = weights_per_second(reps, [&] { sink = sink + decode_inner(t)[7]; });
    std::vector<float> x(8 * kIn, 0.5f), y(8 * kOut);
    const double gemv = weights_per_second(reps, [&] { matmul(t, x.data(), 1, y.data()); });
    const double gemm8 = weights_per_second(reps, [&] { matmul(t, x.data(), 8, y.data()); });
    std::printf("| %d | %.1f | %.1f | %.1f | %.1f |\n", K, dec / 1e6, inner / 1e6, gemv / 1e6,
                gemm8 / 1e6);
  }
  return 0;
}
