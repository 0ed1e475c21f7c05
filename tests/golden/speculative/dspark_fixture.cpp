#include "dspark_fixture.hpp"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "loader/checkpoint.hpp"
#include "loader/safetensors.hpp"
#include "quant/dtype.hpp"
#include "support/fixtures.hpp"
#include "support/tiny8_variant.hpp"

namespace dsv41::test {
namespace {

namespace fs = std::filesystem;

void replace_once(std::string& s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  if (at == std::string::npos) throw std::runtime_error("dspark fixture: '" + from + "' not found");
  s.replace(at, from.size(), to);
}

constexpr int kStages = 3, kRank = 16, kExperts = 4;  // config: markov rank 16, 4 experts, top 2

struct Writer {
  std::vector<std::vector<uint8_t>> bytes;  // owned storage of every tensor
  std::vector<TensorToWrite> tensors;
  const std::set<std::string>& drop;
  void add(const std::string& name, DType dt, std::vector<int64_t> shape,
           std::vector<uint8_t> data) {
    if (drop.count(name)) return;
    bytes.push_back(std::move(data));
    tensors.push_back({name, dt, std::move(shape), bytes.back()});
  }
  // A copy of `from` in the tiny8 checkpoint under the name `to`, rows [0, rows) (0 = all).
  void copy(const Checkpoint& ck, const std::string& from, const std::string& to,
            int64_t rows = 0) {
    const TensorView v = ck.get(from);
    std::vector<int64_t> shape = v.shape();
    size_t n = v.nbytes();
    if (rows > 0) {
      n = n / static_cast<size_t>(shape[0]) * static_cast<size_t>(rows);
      shape[0] = rows;
    }
    add(to, v.dtype(), shape, std::vector<uint8_t>(v.data, v.data + n));
  }
  // Uniform values in [lo, hi) as BF16 or F32.
  void random(const std::string& name, DType dt, std::vector<int64_t> shape, std::mt19937_64& rng,
              float lo, float hi) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::uniform_real_distribution<float> u(lo, hi);
    const size_t width = dt == DType::kBF16 ? 2 : 4;
    std::vector<uint8_t> b(static_cast<size_t>(n) * width);
    for (int64_t i = 0; i < n; ++i) {
      const float v = u(rng);
      if (dt == DType::kBF16) {
        const uint16_t h = f32_to_bf16(v);
        std::memcpy(b.data() + 2 * i, &h, 2);
      } else {
        std::memcpy(b.data() + 4 * i, &v, 4);
      }
    }
    add(name, dt, std::move(shape), std::move(b));
  }
};

}  // namespace

std::string make_tiny8_dspark(const std::set<std::string>& drop,
                              const std::set<std::string>& extra) {
  const fs::path src = fixture("golden/tiny8");
  const fs::path dir = tiny8_variant_dir("dspark");

  std::string cfg = read_text(src / "config.json");
  replace_once(cfg, "\"num_nextn_predict_layers\": 0", "\"num_nextn_predict_layers\": 3");
  replace_once(cfg, "\"dspark_markov_rank\": 256", "\"dspark_markov_rank\": 16");
  replace_once(cfg, "\"dspark_n_routed_experts\": 6", "\"dspark_n_routed_experts\": 4");
  replace_once(cfg, "\"dspark_num_experts_per_tok\": 3", "\"dspark_num_experts_per_tok\": 2");
  const size_t ratios = cfg.find("\"compress_ratios\": [");
  const size_t close = cfg.find(']', ratios);
  cfg.insert(close, ", 0, 0, 0");
  std::ofstream(dir / "config.json") << cfg;

  auto ck = Checkpoint::open(src.string());
  std::mt19937_64 rng(20261205);
  Writer w{{}, {}, drop};
  const int64_t D = 96, V = 600;
  const int source_layer[kStages] = {0, 3, 7};  // tiny8 blocks whose tensors seed the stages
  for (int s = 0; s < kStages; ++s) {
    const std::string to = "mtp." + std::to_string(s) + ".";
    const std::string from = "layers." + std::to_string(source_layer[s]) + ".";
    for (const char* n : {"attn_norm.weight", "ffn_norm.weight", "hc_attn_fn", "hc_attn_base",
                          "hc_attn_scale", "hc_ffn_fn", "hc_ffn_base", "hc_ffn_scale",
                          "attn.q_norm.weight", "attn.kv_norm.weight", "attn.attn_sink"})
      w.copy(*ck, from + n, to + n);
    for (const char* m : {"wq_a", "wq_b", "wkv", "wo_a", "wo_b"})
      for (const char* part : {".weight", ".scale"})
        w.copy(*ck, from + "attn." + m + part, to + "attn." + m + part);
    w.copy(*ck, from + "ffn.gate.weight", to + "ffn.gate.weight", kExperts);
    w.copy(*ck, from + "ffn.gate.bias", to + "ffn.gate.bias", kExperts);
    w.copy(*ck, from + "ffn.gate.bias_vl", to + "ffn.gate.bias_vl", kExperts);
    for (const char* m : {"w1", "w2", "w3"})
      for (const char* part : {".weight", ".scale"}) {
        w.copy(*ck, from + "ffn.shared_experts." + m + part, to + "ffn.shared_experts." + m + part);
        for (int e = 0; e < kExperts; ++e) {
          const std::string ex = "ffn.experts." + std::to_string(e) + ".";
          w.copy(*ck, from + ex + m + part, to + ex + m + part);
        }
      }
  }
  w.random("mtp.0.main_proj.weight", DType::kBF16, {D, 3 * D}, rng, -0.1f, 0.1f);
  w.random("mtp.0.main_norm.weight", DType::kBF16, {D}, rng, 0.9f, 1.1f);
  w.random("mtp.2.norm.weight", DType::kBF16, {D}, rng, 0.9f, 1.1f);
  w.random("mtp.2.markov_head.embed.weight", DType::kBF16, {V, kRank}, rng, -1.0f, 1.0f);
  w.random("mtp.2.markov_head.head.weight", DType::kBF16, {V, kRank}, rng, -0.5f, 0.5f);
  w.random("mtp.2.confidence_head.proj.weight", DType::kF32, {1, D + kRank}, rng, -0.1f, 0.1f);
  for (const std::string& name : extra) w.random(name, DType::kF32, {1}, rng, 0.0f, 1.0f);
  write_safetensors((dir / "model-mtp.safetensors").string(), w.tensors);

  write_index_with(dir, "model-mtp.safetensors", w.tensors);
  return dir.string();
}

}  // namespace dsv41::test
