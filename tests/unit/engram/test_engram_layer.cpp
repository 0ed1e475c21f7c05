// Engram gating op (spec model-architecture.md §5.3) against an independent dequantise-first
// double-precision evaluation on small random weights, plus the error paths.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

#include "core/check.hpp"
#include "engram/engram_layer.hpp"
#include "loader/safetensors.hpp"
#include "quant/dtype.hpp"
#include "support/tolerance.hpp"

using namespace dsv41;
using namespace dsv41::engram;

namespace {

struct SmallEngram {
  EngramDims dims{32, 2, 32, 2, 3};  // D 32, hc 2, head_dim 32, 2 hash columns, 3 table rows
  std::vector<uint8_t> embed, embed_scale, wkv, wkv_scale;
  std::vector<float> qk;

  SmallEngram() {
    std::mt19937 rng(5);
    auto fp8 = [&](size_t n) {
      std::vector<uint8_t> v(n);
      for (auto& b : v) {
        do b = static_cast<uint8_t>(rng() & 0xFF);
        while ((b & 0x7F) == 0x7F || (b & 0x78) == 0x78);  // no NaN, |x| <= 128
      }
      return v;
    };
    auto scales = [&](size_t n) {
      std::vector<uint8_t> v(n);
      for (auto& b : v) b = static_cast<uint8_t>(120 + rng() % 5);  // 2^-7 .. 2^-3
      return v;
    };
    embed = fp8(3 * 32);
    embed_scale = scales(3 * 1);
    wkv = fp8(96 * 64);
    wkv_scale = scales(3 * 2);
    std::normal_distribution<float> n01(0.f, 1.f);
    for (int i = 0; i < 2 * 32; ++i) qk.push_back(1.f + 0.1f * n01(rng));
  }

  EngramWeights weights() const {
    EngramWeights w;
    w.dims = dims;
    w.embed = embed.data();
    w.embed_scale = embed_scale.data();
    w.wkv = wkv.data();
    w.wkv_scale = wkv_scale.data();
    w.qk = qk;
    return w;
  }

  // Straight from spec §5.3 with every weight dequantised first, in double.
  std::vector<double> reference(const std::vector<float>& H, const std::vector<int64_t>& ids,
                                const std::vector<uint8_t>& image, int64_t T) const {
    const int64_t D = 32, hc = 2, in = 64, out = 96;
    std::vector<double> res(H.begin(), H.end());
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> e(in), kv(out, 0.0);
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t c = 0; c < 32; ++c)
          e[j * 32 + c] = e4m3_to_f32(embed[ids[t * 2 + j] * 32 + c]) *
                          std::ldexp(1.0, embed_scale[ids[t * 2 + j]] - 127);
      for (int64_t o = 0; o < out; ++o)
        for (int64_t c = 0; c < in; ++c)
          kv[o] += e4m3_to_f32(wkv[o * in + c]) *
                   std::ldexp(1.0, wkv_scale[(o / 32) * 2 + c / 32] - 127) * e[c];
      for (int64_t k = 0; k < hc; ++k) {
        double h2 = 0, k2 = 0, dot = 0;
        for (int64_t d = 0; d < D; ++d) {
          const double h = H[(t * hc + k) * D + d], key = kv[k * D + d];
          h2 += h * h;
          k2 += key * key;
          dot += h * qk[k * D + d] * key;
        }
        dot /= std::sqrt(h2 / D + 1e-20) * std::sqrt(k2 / D + 1e-20) * std::sqrt(double(D));
        const double s = std::sqrt(std::max(std::fabs(dot), 1e-6));
        const double gate = image.empty() || !image[t] ? 1 / (1 + std::exp(dot < 0 ? s : -s)) : 0;
        for (int64_t d = 0; d < D; ++d) res[(t * hc + k) * D + d] += gate * kv[hc * D + d];
      }
    }
    return res;
  }
};

std::vector<float> random_streams(int64_t T, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n01(0.f, 1.f);
  std::vector<float> H(static_cast<size_t>(T * 2 * 32));
  for (auto& x : H) x = n01(rng);
  return H;
}

}  // namespace

TEST_CASE("engram: gating matches the dequantise-first reference", "[unit][engram]") {
  const SmallEngram s;
  const EngramWeights w = s.weights();
  const int64_t T = 5;
  const std::vector<int64_t> ids = {0, 1, 2, 2, 1, 0, 1, 1, 0, 2};
  const std::vector<uint8_t> image = {0, 0, 1, 0, 0};
  std::vector<float> H = random_streams(T, 11);
  const std::vector<double> want = s.reference(H, ids, image, T);
  const std::vector<float> before = H;
  apply_engram(w, H, ids, image, T, 1e-20f);
  test::require_close("engram H", H, want, H.size(), 2e-6);
  // The image position passes through bit-identical.
  for (int64_t i = 2 * 64; i < 3 * 64; ++i) REQUIRE(H[i] == before[i]);
  // Some gate actually moved the stream.
  double moved = 0;
  for (size_t i = 0; i < H.size(); ++i)
    moved = std::max(moved, double(std::fabs(H[i] - before[i])));
  CHECK(moved > 1e-3);
}

TEST_CASE("engram: gating: thread pool gives identical results", "[unit][engram]") {
  const SmallEngram s;
  const EngramWeights w = s.weights();
  const int64_t T = 9;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < T * 2; ++i) ids.push_back(i % 3);
  std::vector<float> a = random_streams(T, 3), b = a;
  apply_engram(w, a, ids, {}, T, 1e-20f);
  ThreadPool pool(3);
  apply_engram(w, b, ids, {}, T, 1e-20f, &pool);
  CHECK(a == b);
}

TEST_CASE("engram: gating rejects bad inputs, naming them", "[unit][engram]") {
  const SmallEngram s;
  const EngramWeights w = s.weights();
  std::vector<float> H = random_streams(2, 1);
  const std::vector<int64_t> bad = {0, 1, 3, 0};
  CHECK_THROWS_WITH(
      apply_engram(w, H, bad, {}, 2, 1e-20f),
      Catch::Contains("hash row id 3 at position 1, column 0") && Catch::Contains("3 rows"));
  const std::vector<int64_t> ids = {0, 1, 2, 0};
  CHECK_THROWS_WITH(apply_engram(w, H, ids, {}, 3, 1e-20f), Catch::Contains("H has 128 floats"));
  const std::vector<int64_t> short_ids = {0, 1, 2};
  CHECK_THROWS_WITH(apply_engram(w, H, short_ids, {}, 2, 1e-20f), Catch::Contains("3 hash ids"));
  const std::vector<uint8_t> image = {0};
  CHECK_THROWS_WITH(apply_engram(w, H, ids, image, 2, 1e-20f),
                    Catch::Contains("1 image flags for 2"));
}

TEST_CASE("engram: weights: missing or mis-typed tensors are named", "[unit][engram]") {
  const SmallEngram s;
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "dsv41_unit_engram_ckpt";
  fs::create_directories(dir);
  const std::vector<uint8_t> q(2 * 32 * 4, 0);  // F32 where BF16 is expected
  const std::vector<uint8_t> k(2 * 32 * 2, 0);
  const std::vector<TensorToWrite> tensors = {
      {"layers.3.engram.embed.weight", DType::kF8E4M3, {3, 32}, s.embed},
      {"layers.3.engram.embed.scale", DType::kF8E8M0, {3, 1}, s.embed_scale},
      {"layers.3.engram.wkv.weight", DType::kF8E4M3, {96, 64}, s.wkv},
      {"layers.3.engram.wkv.scale", DType::kF8E8M0, {3, 2}, s.wkv_scale},
      {"layers.3.engram.q_weight", DType::kF32, {2, 32}, q},
      {"layers.3.engram.k_weight", DType::kBF16, {2, 32}, k},
  };
  write_safetensors((dir / "model.safetensors").string(), tensors);
  const auto ckpt = Checkpoint::open(dir.string());
  CHECK_THROWS_WITH(load_engram_weights(*ckpt, 3, s.dims),
                    Catch::Contains("layers.3.engram.q_weight"));
  CHECK_THROWS_WITH(load_engram_weights(*ckpt, 4, s.dims),
                    Catch::Contains("layers.4.engram.embed.weight"));
  EngramDims wrong = s.dims;
  wrong.table_rows = 4;
  CHECK_THROWS_WITH(load_engram_weights(*ckpt, 3, wrong), Catch::Contains("embed.weight"));
  wrong = s.dims;
  wrong.hc = 0;
  CHECK_THROWS_WITH(load_engram_weights(*ckpt, 3, wrong), Catch::Contains("non-positive dims"));
  wrong = s.dims;
  wrong.head_dim = 48;
  CHECK_THROWS_WITH(load_engram_weights(*ckpt, 3, wrong),
                    Catch::Contains("engram_head_dim must be a positive multiple of 32"));
  fs::remove_all(dir);
}
