// A tiny Spark-layout model built in the test from the tiny8 golden model (tests/fixtures/golden/
// tiny8): the same config, tokenizer and non-expert tensors, routed experts of the plan's layers
// as random EXL3 trellis data (MUL1) in two bank roots, the release FP4 experts for keep_native /
// "native" experts and layers absent from the plan. Its dense twin is the same model with every
// bank expert stored as F32 [out, in] = the CPU reference reconstruct (exl3::reconstruct_weight)
// cut to the model dims (tiny8 is hidden 96 / inter 64, so the bank stores them padded to 128,
// spec exl3-format.md §2.1).
#pragma once

#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "exl3/allocation_plan.hpp"
#include "exl3/exl3_linear.hpp"
#include "exl3/expert_store.hpp"
#include "loader/checkpoint.hpp"
#include "model/linear.hpp"
#include "support/fixtures.hpp"
#include "unit/exl3/synth_exl3.hpp"

namespace dsv41::test {

namespace fs = std::filesystem;

inline void write_text(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// Plan of the tiny model (8 layers x 6 experts): layers 0, 2, 5, 7 EXL3 with mixed K; layer 2
// keeps experts 1 and 4 native but overrides 4 to K3 (expert_state applies last); layer 5 sends
// expert 3 back to native; layers 1, 3, 4, 6 are absent (release FP4).
inline const char* kTinyPlan = R"({
  "layers": {"0": "K3", "2": "K2", "5": "K4", "7": "K5"},
  "keep_native": {"2": [1, 4]},
  "expert_state": {"0": {"2": "K5"}, "2": {"4": "K3"}, "5": {"1": "K2", "3": "native"}},
  "qdir": "qa:qb"
})";

struct TinyExl3Model {
  static constexpr int kLayers = 8, kExperts = 6;
  static constexpr int64_t kHidden = 96, kInter = 64;

  std::unique_ptr<TempDir> tmp;  // when no root was given
  std::string exl3_dir, dense_dir;
  std::map<std::pair<int, int>, int> bank_k;  // (layer, expert) -> K of the bank expert
  float target_rms = 0;                       // rms of tiny8's FP4 experts, matched by the bank

  // keep_shadowed_fp4: also copy the FP4 tensors of bank-supplied experts into the EXL3 model
  // (a checkpoint that still carries them; the loader must skip them).
  // Writes <root>/exl3_model and <root>/dense_twin (root empty: a temp dir removed with this).
  explicit TinyExl3Model(bool keep_shadowed_fp4 = false, const std::string& root = "") {
    if (root.empty()) tmp = std::make_unique<TempDir>();
    const fs::path base = root.empty() ? tmp->path : fs::path(root);
    exl3_dir = (base / "exl3_model").string();
    dense_dir = (base / "dense_twin").string();
    const std::string src = fixture("golden/tiny8");
    for (const std::string& d : {exl3_dir, dense_dir}) {
      fs::create_directories(d);
      fs::copy_file(src + "/config.json", d + "/config.json");
      fs::copy_file(src + "/tokenizer.json", d + "/tokenizer.json");
    }
    write_text(fs::path(exl3_dir) / "exl3/plan/plan.json", kTinyPlan);
    const exl3::AllocationPlan plan = exl3::AllocationPlan::parse(kTinyPlan, "tiny plan");
    for (int l = 0; l < kLayers; ++l) {
      if (!plan.covers(l)) continue;
      for (int e = 0; e < kExperts; ++e) {
        const int K = exl3::state_bits(plan.state(l, e), "tiny plan");
        if (K != exl3::kNativeState) bank_k[{l, e}] = K;
      }
    }
    auto ck = Checkpoint::open(src);
    target_rms = fp4_expert_rms(*ck);
    write_banks();
    write_checkpoints(*ck, keep_shadowed_fp4);
  }

  static std::string expert_prefix(int l, int e) {
    return "layers." + std::to_string(l) + ".ffn.experts." + std::to_string(e) + ".";
  }

 private:
  // RMS of the dequantised w1 of tiny8's layer-0 experts.
  static float fp4_expert_rms(const Checkpoint& ck) {
    QuantizationConfig q;
    double sum = 0;
    int64_t n = 0;
    std::vector<float> row(kHidden);
    for (int e = 0; e < kExperts; ++e) {
      const Linear w1 = Linear::bind(ck, expert_prefix(0, e) + "w1", kInter, kHidden, q);
      for (int64_t r = 0; r < kInter; ++r) {
        w1.dequantize_row(r, row.data());
        for (float v : row) sum += static_cast<double>(v) * v;
        n += kHidden;
      }
    }
    return static_cast<float>(std::sqrt(sum / static_cast<double>(n)));
  }

  // suh/svh of magnitude a·(0.5..1.5), random signs: |W| ~ rms(Ŵ)·a² with rms(Ŵ) ~ 1 (MUL1).
  std::vector<uint8_t> scales(int64_t n, uint32_t seed) const {
    const float a = std::sqrt(target_rms / 1.08f);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> mag(0.5f, 1.5f);
    std::vector<uint8_t> b(2 * n);
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t h = f32_to_f16((rng() & 1 ? -a : a) * mag(rng));
      std::memcpy(&b[2 * i], &h, 2);
    }
    return b;
  }

  void add_matrix(TensorSet& set, const std::string& prefix, int K, uint32_t seed) const {
    constexpr int64_t k = 128, n = 128;  // pad128(96), pad128(64): every projection is 128x128
    set.add(prefix + ".trellis", DType::kI16, {k / 16, n / 16, 16 * K},
            random_bytes(static_cast<size_t>(k / 16 * n / 16 * 16 * K * 2), seed));
    set.add(prefix + ".suh", DType::kF16, {k}, scales(k, seed + 1));
    set.add(prefix + ".svh", DType::kF16, {n}, scales(n, seed + 2));
    set.add(prefix + ".mul1", DType::kI32, {}, i32_scalar(kMul1Marker));
  }

  void add_bank_expert(TensorSet& set, int l, int e, int K, uint32_t seed) const {
    for (const char* w : {"w1", "w3", "w2"}) add_matrix(set, expert_prefix(l, e) + w, K, seed += 7);
  }

  // Per (layer, K): even experts in qa/K<K>/L<LL>.part.safetensors, odd ones in
  // qb/K<K>/L<LL>.safetensors; qb also holds a decoy copy (other random data) of the first even
  // expert, which qa shadows (first root wins).
  void write_banks() {
    std::map<std::pair<int, int>, std::vector<int>> groups;  // (layer, K) -> experts
    for (const auto& [le, K] : bank_k) groups[{le.first, K}].push_back(le.second);
    uint32_t seed = 1000;
    for (const auto& [lk, experts] : groups) {
      const auto [l, K] = lk;
      TensorSet qa, qb;
      for (int e : experts) add_bank_expert(e % 2 == 0 ? qa : qb, l, e, K, seed += 100);
      for (int e : experts)
        if (e % 2 == 0) {
          add_bank_expert(qb, l, e, K, seed += 100);  // decoy, shadowed by qa
          break;
        }
      char name[32];
      std::snprintf(name, sizeof name, "K%d/L%02d", K, l);
      if (!qa.tensors.empty()) qa.write(exl3_dir + "/exl3/qa/" + name + ".part.safetensors");
      if (!qb.tensors.empty()) qb.write(exl3_dir + "/exl3/qb/" + name + ".safetensors");
    }
  }

  // The bank expert's projection as the model's F32 [out, in]: W_model = W_exl3[:in, :out]ᵀ.
  std::vector<float> dense_weight(int l, int e, const char* w, int64_t out, int64_t in) const {
    const int K = bank_k.at({l, e});
    char name[32];
    std::snprintf(name, sizeof name, "K%d/L%02d", K, l);
    const std::string file = e % 2 == 0 ? exl3_dir + "/exl3/qa/" + name + ".part.safetensors"
                                        : exl3_dir + "/exl3/qb/" + name + ".safetensors";
    auto f = SafetensorsFile::open(file);
    const exl3::Exl3Tensor t = exl3::load_exl3_tensor(*f, expert_prefix(l, e) + w);
    const std::vector<float> W = exl3::reconstruct_weight(t);  // [k, n] = (in, out)
    std::vector<float> m(static_cast<size_t>(out * in));
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) m[o * in + i] = W[i * t.n + o];
    return m;
  }

  void write_checkpoints(const Checkpoint& ck, bool keep_shadowed_fp4) {
    std::vector<TensorToWrite> exl3_tensors, dense_tensors;
    std::deque<std::vector<float>> dense_storage;  // stable addresses
    for (const std::string& name : ck.names()) {
      const TensorView v = ck.get(name);
      const TensorToWrite copy{name, v.dtype(), v.shape(), {v.data, v.nbytes()}};
      int l = -1, e = -1;
      char w[8] = {};
      char rest[16] = {};
      const bool expert =
          std::sscanf(name.c_str(), "layers.%d.ffn.experts.%d.%2s.%15s", &l, &e, w, rest) == 4;
      if (!expert || !bank_k.count({l, e})) {
        exl3_tensors.push_back(copy);
        dense_tensors.push_back(copy);
        continue;
      }
      if (keep_shadowed_fp4) exl3_tensors.push_back(copy);
      if (std::string(rest) != "weight") continue;  // the twin's F32 weight has no scale
      const bool down = std::string(w) == "w2";
      const int64_t out = down ? kHidden : kInter, in = down ? kInter : kHidden;
      dense_storage.push_back(dense_weight(l, e, w, out, in));
      const auto& d = dense_storage.back();
      dense_tensors.push_back({name,
                               DType::kF32,
                               {out, in},
                               {reinterpret_cast<const uint8_t*>(d.data()), d.size() * 4}});
    }
    write_safetensors(exl3_dir + "/model.safetensors", exl3_tensors);
    write_safetensors(dense_dir + "/model.safetensors", dense_tensors);
  }
};

}  // namespace dsv41::test
