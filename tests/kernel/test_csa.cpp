// [kernel] The CSA ops of kernels/include/dsv41k/csa.hpp vs their CPU reference functions
// (model/attention/compressor.hpp, indexer.hpp; spec §2.3-2.5): compressor_pool within the exp
// bound (otherwise the same fp32 op sequence), indexer_scores and candidate_blocks exact.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "dsv41k/attention.hpp"
#include "dsv41k/csa.hpp"
#include "kernel/kernel_check.hpp"
#include "model/attention/compressor.hpp"
#include "model/attention/indexer.hpp"

namespace dsv41::test {
namespace {

cuda::DeviceBuffer to_device(const std::vector<float>& v) {
  cuda::DeviceBuffer b(std::max<size_t>(16, v.size() * 4));
  if (!v.empty()) b.upload(std::span<const float>(v));
  return b;
}

std::vector<float> download_f32(const cuda::DeviceBuffer& b, size_t n) {
  std::vector<float> v(n);
  if (n > 0) b.download(std::span<float>(v));
  return v;
}

// First index where a and b differ bitwise (equal NaNs / infinities count as equal), or size.
size_t first_bit_mismatch(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0 && !(std::isnan(a[i]) && std::isnan(b[i]))) return i;
  return a.size();
}

void run_pool(int64_t n_groups, int ratio, int64_t D) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const size_t rows = static_cast<size_t>(n_groups * ratio * D);
  std::vector<float> kv = random_normal(rows, rng), gate = random_normal(rows, rng);
  for (auto& g : gate) g *= 4.0f;  // softmax weights far from uniform
  std::vector<float> want(static_cast<size_t>(n_groups * D));
  compressor_pool(kv.data(), gate.data(), n_groups, ratio, D, want.data());
  cuda::CudaStream stream;
  cuda::DeviceBuffer dkv = to_device(kv), dg = to_device(gate),
                     dl(std::max<size_t>(16, want.size() * 4));
  dl.fill_bytes(0xFF);
  DSV41_CUDA_CHECK(kernels::compressor_pool(dkv.as<float>(), dg.as<float>(), dl.as<float>(),
                                            n_groups, ratio, D, stream.get()));
  stream.synchronize();
  const std::vector<float> got = download_f32(dl, want.size());
  // Bound: one weight may differ by 1 ulp where glibc's expf and the fp64-rounded exp disagree;
  // that moves w/sum by <= 2 ulp and each product by <= 2 ulp of |kv| → 4·2^-24·Σ_r|kv| per
  // element, plus the sum's own re-rounding.
  std::vector<double> tol(want.size());
  for (int64_t j = 0; j < n_groups; ++j)
    for (int64_t c = 0; c < D; ++c) {
      double s = 0;
      for (int r = 0; r < ratio; ++r) s += std::fabs(kv[(j * ratio + r) * D + c]);
      tol[j * D + c] = 8.0 * std::ldexp(s, -24) + 1e-30;
    }
  require_match(
      fmt::format("compressor_pool groups {} ratio {} D {} seed {:#x}", n_groups, ratio, D, seed),
      got, want, tol, 1e-12);
}

// Scores of random FP4-index queries / keys (fake-quantised by kv_quantize, itself bit-exact vs
// the CPU), optional random mask, vs indexer_score_rows: bit-identical.
void run_scores(int64_t T, int H, int D, int64_t n, int64_t pos0, int ratio, bool with_mask) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::vector<float> q = random_normal(static_cast<size_t>(T * H * D), rng);
  std::vector<float> keys = random_normal(static_cast<size_t>(n * D), rng);
  std::vector<float> w = random_normal(static_cast<size_t>(T * H), rng);
  std::vector<uint8_t> mask;
  if (with_mask) {
    std::uniform_int_distribution<int> bit(0, 3);
    mask.resize(static_cast<size_t>(T * n));
    for (auto& m : mask) m = bit(rng) != 0;
  }
  cuda::CudaStream stream;
  cuda::DeviceBuffer dq = to_device(q), dk = to_device(keys), dw = to_device(w);
  const int64_t kb = kernels::kv_packed_bytes(kernels::KvFormat::kIndexFp4, D);
  cuda::DeviceBuffer dpacked(std::max<int64_t>(16, n * kb));
  DSV41_CUDA_CHECK(kernels::kv_quantize(kernels::KvFormat::kIndexFp4, dq.as<float>(),
                                        dq.as<float>(), nullptr, T * H, D, stream.get()));
  DSV41_CUDA_CHECK(kernels::kv_quantize(kernels::KvFormat::kIndexFp4, dk.as<float>(),
                                        dk.as<float>(), dpacked.as<uint8_t>(), n, D, stream.get()));
  stream.synchronize();
  q = download_f32(dq, q.size());
  keys = download_f32(dk, keys.size());
  std::vector<float> want(static_cast<size_t>(T * n));
  indexer_score_rows(q.data(), w.data(), keys.data(), with_mask ? mask.data() : nullptr, T, H, D, n,
                     pos0, ratio, want.data(), nullptr);
  cuda::DeviceBuffer dmask(std::max<size_t>(16, mask.size()));
  if (with_mask) dmask.upload(mask.data(), mask.size());
  cuda::DeviceBuffer ds(std::max<size_t>(16, want.size() * 4));
  ds.fill_bytes(0x7F);
  DSV41_CUDA_CHECK(kernels::indexer_scores(dq.as<float>(), dw.as<float>(), dpacked.as<uint8_t>(),
                                           with_mask ? dmask.as<uint8_t>() : nullptr,
                                           ds.as<float>(), T, H, D, n, pos0, ratio, stream.get()));
  stream.synchronize();
  const std::vector<float> got = download_f32(ds, want.size());
  const size_t bad = first_bit_mismatch(got, want);
  INFO(
      fmt::format("indexer_scores T {} H {} D {} n {} pos0 {} ratio {} mask {} seed {:#x}: "
                  "first mismatch at (t {}, j {}): got {} want {}",
                  T, H, D, n, pos0, ratio, with_mask, seed, bad / std::max<int64_t>(1, n),
                  bad % std::max<int64_t>(1, n), bad < got.size() ? got[bad] : 0.0f,
                  bad < got.size() ? want[bad] : 0.0f));
  REQUIRE(bad == got.size());
}

// levels > 0: scores from a few values (ties across the cut); invisible entries are -inf.
void run_blocks(int64_t T, int64_t n, int64_t pos0, int ratio, int topk, int bsize, int levels) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  std::vector<float> s = random_normal(static_cast<size_t>(T * n), rng);
  std::uniform_int_distribution<int> lv(0, std::max(0, levels - 1));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < n; ++j) {
      float& v = s[t * n + j];
      if (levels > 0) v = 0.5f * static_cast<float>(lv(rng));
      if (j >= (pos0 + t + 1) / ratio) v = -INFINITY;
    }
  const int64_t nb = (n + bsize - 1) / bsize;
  std::vector<uint8_t> want(static_cast<size_t>(T * n));
  std::vector<float> want_bs(static_cast<size_t>(T * nb));
  select_candidate_blocks(s.data(), T, n, pos0, ratio, topk, bsize, want.data(), want_bs.data());
  cuda::CudaStream stream;
  cuda::DeviceBuffer ds = to_device(s), dm(std::max<size_t>(16, want.size())),
                     dbs(std::max<size_t>(16, want_bs.size() * 4));
  dm.fill_bytes(0x5A);
  DSV41_CUDA_CHECK(kernels::candidate_blocks(ds.as<float>(), T, n, pos0, ratio, topk, bsize,
                                             dm.as<uint8_t>(), dbs.as<float>(), stream.get()));
  stream.synchronize();
  std::vector<uint8_t> got(want.size());
  dm.download(got.data(), got.size());
  const std::vector<float> got_bs = download_f32(dbs, want_bs.size());
  size_t bad = got.size();
  for (size_t i = 0; i < got.size() && bad == got.size(); ++i)
    if (got[i] != want[i]) bad = i;
  INFO(
      fmt::format("candidate_blocks T {} n {} pos0 {} ratio {} topk {} block {} levels {} seed "
                  "{:#x}: first mask mismatch at (t {}, j {})",
                  T, n, pos0, ratio, topk, bsize, levels, seed, bad / n, bad % n));
  REQUIRE(bad == got.size());
  const size_t bad_bs = first_bit_mismatch(got_bs, want_bs);
  INFO("first block-score mismatch at " << bad_bs);
  REQUIRE(bad_bs == got_bs.size());
}

}  // namespace

TEST_CASE("compressor_pool matches the CPU pooling", "[kernel][csa]") {
  if (skip_without_gpu()) return;
  for (int64_t g : {1, 2, 7, 16, 300}) {
    run_pool(g, 2, 64);   // tiny
    run_pool(g, 2, 512);  // released head_dim
  }
  run_pool(9, 4, 96);
  run_pool(3, 128, 32);  // the largest ratio taken
}

TEST_CASE("indexer_scores equals the CPU scores bit for bit", "[kernel][csa]") {
  if (skip_without_gpu()) return;
  for (int64_t T : {1, 2, 7, 16}) {
    run_scores(T, 6, 64, 37, 36, 1, false);        // tiny8 layer 4 (ratio 1)
    run_scores(T, 6, 64, 18, 36, 2, true);         // tiny8 layer 1 (ratio 2), masked
    run_scores(T, 32, 128, 4096, 8190, 2, false);  // released dims
  }
  run_scores(300, 6, 64, 300, 0, 1, true);         // prefill: visibility grows with t
  run_scores(2, 32, 128, 32768, 32766, 1, false);  // released, 32k entries
  run_scores(1, 4, 32, 5, 0, 1, false);            // only entry 0 visible
  run_scores(3, 2, 256, 70, 100, 1, false);        // the largest head dim
}

TEST_CASE("candidate_blocks equals the CPU mask and block scores", "[kernel][csa]") {
  if (skip_without_gpu()) return;
  for (int64_t T : {1, 2, 7}) {
    run_blocks(T, 37, 36, 1, 2, 3, 0);    // tiny8 candidate source
    run_blocks(T, 37, 36, 1, 2, 3, 3);    // ties between blocks
    run_blocks(T, 40, 0, 1, 4, 8, 0);     // early positions: fewer reachable blocks than topk
    run_blocks(T, 0 + 5, 2, 2, 1, 8, 0);  // a single partial block
  }
  run_blocks(2, 32768, 32767, 1, 2048, 8, 0);  // released: 4096 blocks, keep 2048
  run_blocks(2, 32768, 32767, 1, 2048, 8, 4);  // released with heavy ties
  run_blocks(64, 1024, 960, 1, 16, 8, 0);      // a prefill chunk
}

TEST_CASE("CSA launchers reject unsupported arguments", "[kernel][csa]") {
  float f[64] = {};
  uint8_t b[64] = {};
  const cudaError_t inv = cudaErrorInvalidValue;
  using kernels::candidate_blocks;
  using kernels::compressor_pool;
  using kernels::indexer_scores;
  CHECK(compressor_pool(f, f + 16, f + 32, -1, 2, 4, nullptr) == inv);
  CHECK(compressor_pool(f, f + 16, f + 32, 1, 1, 4, nullptr) == inv);    // ratio 1 has no pool
  CHECK(compressor_pool(f, f + 16, f + 32, 1, 129, 4, nullptr) == inv);  // ratio too large
  CHECK(compressor_pool(f, f + 16, f + 32, 1, 2, 0, nullptr) == inv);
  CHECK(compressor_pool(nullptr, f + 16, f + 32, 1, 2, 4, nullptr) == inv);
  CHECK(compressor_pool(f, f + 16, f, 1, 2, 4, nullptr) == inv);  // latent aliases kv
  CHECK(compressor_pool(f, f, f, 0, 2, 4, nullptr) == inv);
  CHECK(indexer_scores(f, f, b, nullptr, f, -1, 2, 64, 4, 0, 1, nullptr) == inv);
  CHECK(indexer_scores(f, f, b, nullptr, f, 1, 0, 64, 4, 0, 1, nullptr) == inv);
  CHECK(indexer_scores(f, f, b, nullptr, f, 1, 2, 48, 4, 0, 1, nullptr) == inv);    // D
  CHECK(indexer_scores(f, f, b, nullptr, f, 1, 96, 128, 4, 0, 1, nullptr) == inv);  // smem
  CHECK(indexer_scores(f, f, b, nullptr, f, 1, 2, 64, -1, 0, 1, nullptr) == inv);
  CHECK(indexer_scores(f, f, b, nullptr, f, 1, 2, 64, 4, -1, 1, nullptr) == inv);
  CHECK(indexer_scores(f, f, b, nullptr, f, 1, 2, 64, 4, 0, 0, nullptr) == inv);
  CHECK(indexer_scores(f, f, nullptr, nullptr, f, 1, 2, 64, 4, 0, 1, nullptr) == inv);
  CHECK(indexer_scores(nullptr, f, b, nullptr, f, 1, 2, 64, 4, 0, 1, nullptr) == inv);
  CHECK(candidate_blocks(f, -1, 4, 0, 1, 1, 1, b, nullptr, nullptr) == inv);
  CHECK(candidate_blocks(f, 1, 4, -1, 1, 1, 1, b, nullptr, nullptr) == inv);
  CHECK(candidate_blocks(f, 1, 4, 0, 0, 1, 1, b, nullptr, nullptr) == inv);
  CHECK(candidate_blocks(f, 1, 4, 0, 1, 0, 1, b, nullptr, nullptr) == inv);
  CHECK(candidate_blocks(f, 1, 4, 0, 1, 1, 0, b, nullptr, nullptr) == inv);
  CHECK(candidate_blocks(f, 1, 4, 0, 1, 1, 1, nullptr, nullptr, nullptr) == inv);
  CHECK(candidate_blocks(nullptr, 1, 4, 0, 1, 1, 1, b, nullptr, nullptr) == inv);
}

}  // namespace dsv41::test
