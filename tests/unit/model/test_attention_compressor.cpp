// Compressor (spec model-architecture.md §2.3) on a synthetic checkpoint: the softmax pooling
// formula, group buffering across calls (any chunking gives bit-identical latents), the RoPE +
// FP4 cache append, and the named errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "../base/temp_dir.hpp"
#include "config/model_config.hpp"
#include "loader/checkpoint.hpp"
#include "model/attention/attention_state.hpp"
#include "model/attention/compressor.hpp"
#include "model/attention/kv_quant.hpp"
#include "model/attention/rope.hpp"

using namespace dsv41;
using dsv41::test::TempDir;

namespace {

constexpr int kHidden = 8, kHeadDim = 32, kRope = 8;

std::vector<float> pseudo_random(size_t n, uint32_t seed, float amp) {
  std::vector<float> v(n);
  uint32_t s = seed;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = amp * (static_cast<float>(s >> 8) / 8388608.0f - 1.0f);
  }
  return v;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Layers 0..2 with ratios 2, 3, 1 have compressor weights; layer 3 (ratio 2) has none.
struct Fixture {
  TempDir dir;
  ModelConfig cfg;
  std::vector<std::vector<float>> wkv, wgate, norm;
  std::unique_ptr<Checkpoint> ck;

  Fixture() {
    cfg.text.hidden_size = kHidden;
    cfg.text.head_dim = kHeadDim;
    cfg.text.qk_rope_head_dim = kRope;
    cfg.text.rms_norm_eps = 1e-20;
    cfg.text.index_head_dim = 32;
    cfg.text.compress_ratios = {2, 3, 1, 2};
    cfg.text.num_hidden_layers = 4;
    for (int l = 0; l < 4; ++l) {
      LayerRole r;
      r.layer = l;
      r.ratio = cfg.text.compress_ratios[l];
      r.kv_source = true;
      cfg.roles.push_back(r);
    }
    std::vector<std::vector<uint8_t>> bytes;
    std::vector<TensorToWrite> tensors;
    for (int l = 0; l < 3; ++l) {
      wkv.push_back(pseudo_random(kHeadDim * kHidden, 11 + l, 0.5f));
      wgate.push_back(pseudo_random(kHeadDim * kHidden, 23 + l, 2.0f));
      norm.push_back(pseudo_random(kHeadDim, 37 + l, 0.1f));
      for (float& w : norm.back()) w += 1.0f;
    }
    bytes.reserve(9);
    for (int l = 0; l < 3; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".attn.compressor.";
      bytes.push_back(f32_bytes(wkv[l]));
      tensors.push_back({p + "wkv.weight", DType::kF32, {kHeadDim, kHidden}, bytes.back()});
      if (cfg.text.compress_ratios[l] > 1) {
        bytes.push_back(f32_bytes(wgate[l]));
        tensors.push_back({p + "wgate.weight", DType::kF32, {kHeadDim, kHidden}, bytes.back()});
      }
      bytes.push_back(f32_bytes(norm[l]));
      tensors.push_back({p + "norm.weight", DType::kF32, {kHeadDim}, bytes.back()});
    }
    write_safetensors(dir.file("model.safetensors"), tensors);
    ck = Checkpoint::open(dir.path());
  }

  // Double-precision §2.3 formula for group j of x [T, hidden].
  std::vector<double> reference_latent(int l, const std::vector<float>& x, int64_t j) const {
    const int r = cfg.text.compress_ratios[l];
    std::vector<double> lat(kHeadDim, 0.0);
    for (int c = 0; c < kHeadDim; ++c) {
      std::vector<double> kv(r), g(r);
      for (int i = 0; i < r; ++i) {
        for (int k = 0; k < kHidden; ++k) {
          kv[i] += double{wkv[l][c * kHidden + k]} * x[(j * r + i) * kHidden + k];
          g[i] += double{wgate[l][c * kHidden + k]} * x[(j * r + i) * kHidden + k];
        }
      }
      double m = -INFINITY, sum = 0;
      for (int i = 0; i < r; ++i) m = std::max(m, r > 1 ? g[i] : 0.0);
      for (int i = 0; i < r; ++i) sum += std::exp((r > 1 ? g[i] : 0.0) - m);
      for (int i = 0; i < r; ++i) lat[c] += kv[i] * std::exp((r > 1 ? g[i] : 0.0) - m) / sum;
    }
    double ss = 0;
    for (double v : lat) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / kHeadDim + 1e-20);
    for (int c = 0; c < kHeadDim; ++c) lat[c] *= inv * norm[l][c];
    return lat;
  }
};

CsaSourceState fresh(const Fixture& f, int l) {
  CsaSourceState st;
  st.reset(l, f.cfg.text.compress_ratios[l], kHeadDim, 32);
  return st;
}

// Runs x [T, hidden] through the compressor in chunks; returns all latents in order.
std::vector<float> run_chunks(const Compressor& c, const std::vector<float>& x,
                              const std::vector<int64_t>& plan, CsaSourceState& st) {
  std::vector<float> all;
  int64_t t0 = 0;
  for (int64_t n : plan) {
    CompressedGroups g = c.run(x.data() + t0 * kHidden, n, st, nullptr);
    CHECK(g.first_entry == st.n_entries);
    all.insert(all.end(), g.latent.begin(), g.latent.end());
    st.n_entries += g.n_groups;  // stands in for append_compressed()
    t0 += n;
  }
  return all;
}

}  // namespace

TEST_CASE("compressor: softmax pooling per channel matches the §2.3 formula", "[unit][attention]") {
  Fixture f;
  const std::vector<float> x = pseudo_random(7 * kHidden, 5, 1.0f);
  for (int l : {0, 1, 2}) {
    const Compressor c = Compressor::bind(*f.ck, f.cfg, l);
    CsaSourceState st = fresh(f, l);
    const CompressedGroups g = c.run(x.data(), 7, st, nullptr);
    const int r = f.cfg.text.compress_ratios[l];
    INFO("layer " << l << " ratio " << r);
    REQUIRE(g.n_groups == 7 / r);
    CHECK(st.pending == 7 % r);
    for (int64_t j = 0; j < g.n_groups; ++j) {
      const std::vector<double> want = f.reference_latent(l, x, j);
      for (int c2 = 0; c2 < kHeadDim; ++c2)
        CHECK(g.latent[j * kHeadDim + c2] == Approx(want[c2]).margin(2e-6));
    }
  }
}

TEST_CASE("compressor: partial groups carry across calls, any chunking is bit-identical",
          "[unit][attention]") {
  Fixture f;
  const std::vector<float> x = pseudo_random(11 * kHidden, 9, 1.0f);
  for (int l : {0, 1, 2}) {
    const Compressor c = Compressor::bind(*f.ck, f.cfg, l);
    CsaSourceState one = fresh(f, l);
    const std::vector<float> want = run_chunks(c, x, {11}, one);
    for (const std::vector<int64_t>& plan : std::vector<std::vector<int64_t>>{
             {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {3, 8}, {2, 2, 7}, {5, 0, 6}, {1, 4, 1, 5}}) {
      CsaSourceState st = fresh(f, l);
      const std::vector<float> got = run_chunks(c, x, plan, st);
      INFO("layer " << l << ", plan of " << plan.size() << " chunks");
      CHECK(got == want);
      CHECK(st.pending == one.pending);
      CHECK(st.pending_kv == one.pending_kv);
      CHECK(st.pending_gate == one.pending_gate);
      CHECK(st.next_pos() == 11);
    }
  }
}

TEST_CASE("compressor: cache entry j = FP4(RoPE(latent_j) at j·ratio)", "[unit][attention]") {
  Fixture f;
  const RopeTables rope = [] {
    TextConfig t;
    t.head_dim = kHeadDim;
    t.qk_rope_head_dim = kRope;
    t.rope_scaling.rope_type = "yarn";
    t.rope_scaling.factor = 16;
    t.rope_scaling.original_max_position_embeddings = 65536;
    return RopeTables::from_config(t);
  }();
  const std::vector<float> x = pseudo_random(9 * kHidden, 3, 1.0f);
  const Compressor c = Compressor::bind(*f.ck, f.cfg, 1);  // ratio 3
  CsaSourceState st = fresh(f, 1);
  const CompressedGroups a = c.run(x.data(), 4, st, nullptr);  // 1 group + 1 pending
  append_compressed(a, rope.compress.data(), kRope, st);
  const CompressedGroups b = c.run(x.data() + 4 * kHidden, 5, st, nullptr);  // 2 groups
  CHECK(b.first_entry == 1);
  append_compressed(b, rope.compress.data(), kRope, st);
  REQUIRE(st.n_entries == 3);
  const std::vector<float> cache = st.compressed_fp32();  // unpacked from the FP4 pages
  REQUIRE(cache.size() == 3 * kHeadDim);
  for (int64_t j = 0; j < 3; ++j) {
    const CompressedGroups& g = j == 0 ? a : b;
    const int64_t k = j == 0 ? 0 : j - 1;
    std::vector<float> e(g.latent.begin() + k * kHeadDim, g.latent.begin() + (k + 1) * kHeadDim);
    rope_rotate(e.data() + kHeadDim - kRope, rope.compress.data(), kRope, j * 3, false);
    fake_quant_compressed_fp4(e.data(), kHeadDim);
    CHECK(std::vector<float>(cache.begin() + j * kHeadDim, cache.begin() + (j + 1) * kHeadDim) ==
          e);
  }
  CHECK_THROWS_WITH(append_compressed(a, rope.compress.data(), kRope, st),
                    Catch::Contains("start at entry 0, cache holds 3"));
}

TEST_CASE("compressor: missing weights and mismatched state are named errors",
          "[unit][attention]") {
  Fixture f;
  CHECK_THROWS_WITH(Compressor::bind(*f.ck, f.cfg, 3),
                    Catch::Contains("layers.3.attn.compressor.wkv.weight"));
  const Compressor c = Compressor::bind(*f.ck, f.cfg, 0);
  CsaSourceState wrong = fresh(f, 1);  // ratio 3 state for a ratio-2 compressor
  const std::vector<float> x(kHidden, 0.5f);
  CHECK_THROWS_WITH(c.run(x.data(), 1, wrong, nullptr), Catch::Contains("ratio 3"));
}

TEST_CASE("attention state: sizes from the config, ring range checks", "[unit][attention]") {
  Fixture f;
  f.cfg.text.sliding_window = 4;
  AttentionSequenceState st;
  st.init(f.cfg, {.max_rollback = 0});
  REQUIRE(st.window.size() == 4);
  CHECK(st.window[0].packed.size() == 4 * (kHeadDim + kHeadDim / 32));  // FP8 + ue8m0 per slot
  CHECK(st.source[1].ratio == 3);
  CHECK(st.source[2].next_pos() == 0);
  std::vector<float> e(kHeadDim, 0.0f);
  e[1] = 1.5f;
  st.window[0].write(2, e.data());
  st.window[0].next_pos = 6;  // keeps positions 2..5
  std::vector<float> back(kHeadDim, 9.0f);
  st.window[0].read(2, back.data());
  CHECK(back == e);
  CHECK_THROWS_WITH(st.window[0].read(1, back.data()),
                    Catch::Contains("position 1 is outside the kept range [2, 6)"));
  CHECK_THROWS_WITH(st.window[0].read(6, back.data()), Catch::Contains("position 6"));
  st.reset();
  CHECK(st.window[0].next_pos == 0);
  f.cfg.roles.pop_back();
  CHECK_THROWS_WITH(st.init(f.cfg), Catch::Contains("3 layer roles for 4 layers"));
}
