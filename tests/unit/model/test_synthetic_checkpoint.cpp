// bench/synthetic: the tiny synthetic checkpoint loads through Transformer::load (every tensor
// bound, none left over) and gives finite logits; the released geometry's config validates to the
// released roles, its tensor shapes match spec §1.5 and its byte total matches the hand count.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "config/model_config.hpp"
#include "model/transformer.hpp"
#include "synthetic/synthetic_checkpoint.hpp"
#include "synthetic/value_table.hpp"

namespace dsv41 {
namespace {

namespace fs = std::filesystem;
using synth::SyntheticGeometry;
using synth::SyntheticTensor;

struct ScratchDir {
  fs::path dir;
  explicit ScratchDir(const char* tag) {
    dir = fs::temp_directory_path() /
          (std::string("dsv41_synth_") + tag + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
  }
  ~ScratchDir() { fs::remove_all(dir); }
};

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::map<std::string, SyntheticTensor> by_name(const SyntheticGeometry& g) {
  std::map<std::string, SyntheticTensor> m;
  for (const SyntheticTensor& t : synth::synthetic_tensors(g)) m[t.name] = t;
  return m;
}

}  // namespace

TEST_CASE("synthetic tiny checkpoint: Transformer::load + 5-token forward is finite", "[unit]") {
  const SyntheticGeometry g = SyntheticGeometry::tiny();
  ScratchDir a("a"), b("b");
  synth::write_synthetic_checkpoint(a.dir.string(), g, 7);
  REQUIRE(fs::exists(a.dir / "model.safetensors.index.json"));
  REQUIRE_FALSE(fs::exists(a.dir / "tokenizer.json"));  // no Engram: not needed

  auto m = Transformer::load(a.dir.string(), 2);
  const Checkpoint& ck = m->checkpoint();
  REQUIRE(ck.shard_count() > 1);  // tiny().shard_bytes splits it
  const std::vector<SyntheticTensor> ts = synth::synthetic_tensors(g);
  REQUIRE(ck.names().size() == ts.size());
  uint64_t bytes = 0;
  for (const SyntheticTensor& t : ts) {
    INFO(t.name);
    REQUIRE(ck.has(t.name));
    REQUIRE(ck.get(t.name).shape() == t.shape);
    REQUIRE(ck.get(t.name).dtype() == t.dtype);
    bytes += ck.get(t.name).nbytes();
  }
  REQUIRE(bytes == synth::synthetic_data_bytes(g));
  REQUIRE(m->weights().ignored.size() == 4);  // only the mtp/vision/aligner/image_ groups,
  for (const auto& grp : m->weights().ignored) REQUIRE(grp.count == 0);  // all empty

  SequenceState st = m->new_sequence();
  const std::vector<int32_t> ids = {5, 77, 300, 2, 599};
  const std::vector<float> logits = m->forward(st, ids);
  REQUIRE(logits.size() == ids.size() * static_cast<size_t>(g.vocab_size));
  double sq = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    INFO("logit " << i);
    REQUIRE(std::isfinite(logits[i]));
    sq += double(logits[i]) * logits[i];
  }
  const double rms = std::sqrt(sq / logits.size());
  INFO("logit rms " << rms);
  // head rows have RMS 1/sqrt(D) on a unit-RMS normed input: logits ~ N(0, 1).
  REQUIRE(rms > 0.1);
  REQUIRE(rms < 10.0);

  // Deterministic in the seed, whatever the thread interleaving.
  synth::write_synthetic_checkpoint(b.dir.string(), g, 7);
  for (const auto& e : fs::directory_iterator(a.dir)) {
    INFO(e.path().filename().string());
    REQUIRE(read_bytes(e.path()) == read_bytes(b.dir / e.path().filename()));
  }
}

TEST_CASE("synthetic 40-layer released schedule at tiny width stays finite", "[unit]") {
  // The value rules through the full released depth and role schedule (Full / Reuse / Reindex
  // at the released layer ids), at tiny width so that the CPU forward takes milliseconds.
  SyntheticGeometry g = SyntheticGeometry::tiny();
  const SyntheticGeometry r = SyntheticGeometry::released(40, 4);
  g.num_hidden_layers = r.num_hidden_layers;
  g.compress_ratios = r.compress_ratios;
  g.kv_source_layer_ids = r.kv_source_layer_ids;
  g.index_source_layer_ids = r.index_source_layer_ids;
  g.candidate_source_layer_id = r.candidate_source_layer_id;
  g.shard_bytes = uint64_t{1} << 20;
  ScratchDir d("deep");
  synth::write_synthetic_checkpoint(d.dir.string(), g, 11);
  auto m = Transformer::load(d.dir.string(), 2);
  REQUIRE(m->config().roles[24].role == AttnRole::kReindex);
  SequenceState st = m->new_sequence();
  std::vector<int32_t> ids(12);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((97 * i + 5) % 600);
  const std::vector<float> logits = m->forward(st, ids);
  REQUIRE(logits.size() == ids.size() * 600);
  double sq = 0.0;
  for (float x : logits) {
    REQUIRE(std::isfinite(x));
    sq += double(x) * x;
  }
  const double rms = std::sqrt(sq / logits.size());
  INFO("logit rms " << rms);
  REQUIRE(rms > 0.1);
  REQUIRE(rms < 10.0);
}

TEST_CASE("synthetic value tables: decoded RMS equals the requested one", "[unit]") {
  // FP8 code RMS 14.3 (in = 5120), FP4 code RMS 1.41 (in = 2048), BF16 1/sqrt(5120).
  const SyntheticTensor e4{"w", DType::kF8E4M3, {32, 32}, synth::Fill::kE4m3Code, 0.0, 14.31};
  const SyntheticTensor e2{"x", DType::kI8, {32, 16}, synth::Fill::kE2m1Pair, 0.0, 1.41};
  const SyntheticTensor bf{"y", DType::kBF16, {4, 8}, synth::Fill::kNormal, 0.0, 0.0139755};
  for (const SyntheticTensor& t : {e4, e2, bf}) {
    INFO(t.name);
    const synth::ValueTable v = synth::ValueTable::make(t);
    // 1 %: rounding 256 quantiles to the 8 e2m1 magnitudes makes the RMS a step function of the
    // code std (0.25 % off here); e4m3 / bf16 land within 1e-3.
    REQUIRE(std::fabs(v.rms() / t.sigma - 1.0) < (t.dtype == DType::kI8 ? 1e-2 : 1e-3));
  }
  // Never a NaN e4m3 code, even at the largest code RMS the writer asks for (16).
  const SyntheticTensor big{"z", DType::kF8E4M3, {64, 1024}, synth::Fill::kE4m3Code, 0.0, 16.0};
  std::vector<uint8_t> buf(64 * 1024);
  synth::ValueTable::make(big).fill(buf.data(), buf.size(), 3);
  for (uint8_t c : buf) REQUIRE((c & 0x7F) != 0x7F);
}

TEST_CASE("synthetic released geometry: roles, shapes and the byte total", "[unit]") {
  const SyntheticGeometry g = SyntheticGeometry::released(40, 32);
  Result<ModelConfig> cfg = ModelConfig::parse(synth::synthetic_config_json(g), "config.json");
  REQUIRE(cfg.is_ok());
  REQUIRE(cfg->validate().is_ok());
  REQUIRE(cfg->text.kv_source_layer_ids == std::vector<int>{2, 8, 14, 20});
  REQUIRE(cfg->text.index_source_layer_ids == std::vector<int>{2, 8, 14, 20, 24, 28, 32, 36});
  REQUIRE(cfg->text.candidate_source_layer_id == 20);
  std::vector<int> ratios = {0, 0};
  ratios.insert(ratios.end(), 18, 2);
  ratios.insert(ratios.end(), 20, 1);
  REQUIRE(cfg->text.compress_ratios == ratios);
  REQUIRE(cfg->roles[24].role == AttnRole::kReindex);
  REQUIRE(cfg->roles[21].role == AttnRole::kReuse);
  REQUIRE(cfg->text.engram_layer_ids.empty());

  // Spec §1.5 shapes.
  const auto t = by_name(g);
  const std::map<std::string, std::vector<int64_t>> spec = {
      {"embed.weight", {129280, 5120}},
      {"layers.0.hc_attn_fn", {24, 20480}},
      {"layers.0.attn.wq_a.scale", {40, 160}},
      {"layers.0.attn.wq_b.weight", {32768, 1280}},
      {"layers.0.attn.wq_b.scale", {1024, 40}},
      {"layers.0.attn.wkv.scale", {16, 160}},
      {"layers.0.attn.wo_a.weight", {8192, 4096}},
      {"layers.0.attn.wo_a.scale", {256, 128}},
      {"layers.0.attn.wo_b.scale", {160, 256}},
      {"layers.0.ffn.gate.weight", {32, 5120}},
      {"layers.0.ffn.shared_experts.w2.scale", {160, 72}},
      {"layers.0.ffn.experts.31.w1.weight", {2304, 2560}},
      {"layers.0.ffn.experts.31.w1.scale", {2304, 160}},
      {"layers.0.ffn.experts.31.w2.weight", {5120, 1152}},
      {"layers.0.ffn.experts.31.w2.scale", {5120, 72}},
      {"layers.2.attn.compressor.wgate.weight", {512, 5120}},
      {"layers.2.attn.indexer.wq_b.scale", {128, 40}},
      {"layers.2.attn.indexer.weights_proj.weight", {32, 5120}},
      {"layers.2.attn.indexer.wk.weight", {128, 512}},
      {"layers.20.attn.compressor.wkv.weight", {512, 5120}},
      {"layers.24.attn.indexer.wq_b.weight", {4096, 1280}},
  };
  for (const auto& [name, shape] : spec) {
    INFO(name);
    REQUIRE(t.count(name) == 1);
    REQUIRE(t.at(name).shape == shape);
  }
  REQUIRE(t.count("layers.20.attn.compressor.wgate.weight") == 0);  // ratio 1: no gate
  REQUIRE(t.count("layers.24.attn.indexer.wk.weight") == 0);        // keys from layer 20
  REQUIRE(t.count("layers.1.attn.compressor.wkv.weight") == 0);     // SWA only
  REQUIRE(t.at("layers.5.attn.wq_a.scale").value == 117);  // 2^-10 * code RMS 14.3 = 1/sqrt(5120)

  // Hand count (bytes; fp8(o,i) = o*i + ceil(o/32)*ceil(i/32), fp4(o,i) = o*i/2 + o*i/32):
  //  globals: embed + head 2 * 129280*5120*2 + norm 5120*2                 =  2,647,664,640
  //  per layer, E = 32: norms 2*5120*2 + hc 2*(24*20480*4 + 24*4 + 3*4) + fp8 wq_a(1280,5120)
  //    + q_norm 2560 + fp8 wq_b(32768,1280) + fp8 wkv(512,5120) + kv_norm 1024
  //    + fp8 wo_a(8192,4096) + fp8 wo_b(5120,8192) + sink 256 + shared 2*fp8(2304,5120)
  //    + fp8(5120,2304) = 166,119,896; + E * (gate 5120*2 + bias 8 = 10,248
  //    + expert 2*fp4(2304,5120) + fp4(5120,2304) = 18,800,640)              =    768,068,312
  //  x 40 layers                                                           = 30,722,732,480
  //  ratio-2 KV sources 2, 8, 14: compressor wkv + wgate 2*512*5120*2 + norm 1024
  //    + fp8 indexer.wq_b(4096,1280) + weights_proj 32*5120*2 + wk 128*512*2 + k_norm 256
  //    = 16,193,792 each; ratio-1 KV source 20: no wgate = 10,950,912; index-only 24, 28, 32,
  //    36: wq_b + weights_proj = 5,575,680 each                           =     81,835,008
  //  total                                                                 = 33,452,232,128
  REQUIRE(synth::synthetic_data_bytes(g) == uint64_t{33452232128});

  // Fewer layers: [0, 0] + half 2 / half 1, the first ratio-1 layer is the candidate source.
  const SyntheticGeometry s = SyntheticGeometry::released(8, 4);
  REQUIRE(s.compress_ratios == std::vector<int>{0, 0, 2, 2, 2, 1, 1, 1});
  REQUIRE(s.kv_source_layer_ids == std::vector<int>{2, 5});
  REQUIRE(s.index_source_layer_ids == std::vector<int>{2, 5});
  REQUIRE(s.candidate_source_layer_id == 5);
  REQUIRE(s.num_experts_per_tok == 4);
  Result<ModelConfig> c8 = ModelConfig::parse(synth::synthetic_config_json(s), "config.json");
  REQUIRE(c8.is_ok());
  REQUIRE(c8->validate().is_ok());
}

}  // namespace dsv41
