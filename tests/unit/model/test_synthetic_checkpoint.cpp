// bench/synthetic: the tiny synthetic checkpoint loads through Transformer::load (every tensor
// bound, none left over) and gives finite logits; the released geometry's config validates to the
// released roles, its tensor shapes match spec §1.5 and its byte total matches the hand count.
// With SyntheticExl3 (the Spark layout) the routed experts come from EXL3 banks instead of FP4.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "config/model_config.hpp"
#include "exl3/exl3_linear.hpp"
#include "model/dspark/dspark_drafter.hpp"
#include "model/transformer.hpp"
#include "synthetic/synthetic_checkpoint.hpp"
#include "synthetic/synthetic_exl3.hpp"
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

// Every regular file under `dir`, relative path -> bytes.
std::map<std::string, std::string> tree_bytes(const fs::path& dir) {
  std::map<std::string, std::string> m;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) m[fs::relative(e.path(), dir).string()] = read_bytes(e.path());
  return m;
}

double logit_rms(const std::vector<float>& logits) {
  double sq = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    INFO("logit " << i << " = " << logits[i]);
    REQUIRE(std::isfinite(logits[i]));
    sq += double(logits[i]) * logits[i];
  }
  return std::sqrt(sq / logits.size());
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

TEST_CASE("synthetic EXL3 tiny checkpoint: bank experts load, FP4 absent, forward finite",
          "[unit]") {
  const SyntheticGeometry g = SyntheticGeometry::tiny();  // 8 layers x 4 experts, 64 -> 128
  synth::SyntheticExl3 x;
  x.enabled = true;
  ScratchDir a("exl3a"), b("exl3b");
  synth::write_synthetic_checkpoint(a.dir.string(), g, 7, x);
  REQUIRE(fs::exists(a.dir / "exl3/plan/plan.json"));
  REQUIRE(fs::exists(a.dir / "exl3/qn/K5/L07.safetensors"));
  const std::string index = read_bytes(a.dir / "model.safetensors.index.json");
  REQUIRE(index.find(".ffn.experts.") == std::string::npos);

  auto m = Transformer::load(a.dir.string(), 2);
  const Checkpoint& ck = m->checkpoint();
  const std::vector<SyntheticTensor> ts = synth::synthetic_tensors(g, x);
  REQUIRE(ck.names().size() == ts.size());
  for (const std::string& name : ck.names()) {
    INFO(name);
    REQUIRE(name.find(".ffn.experts.") == std::string::npos);
  }
  uint64_t bytes = 0;
  for (const SyntheticTensor& t : ts) bytes += ck.get(t.name).nbytes();
  REQUIRE(bytes == synth::synthetic_data_bytes(g, x));
  for (const auto& grp : m->weights().ignored) {
    INFO(grp.prefix);
    REQUIRE(grp.count == 0);
  }

  const exl3::ExpertBank* bank = m->expert_bank();
  REQUIRE(bank != nullptr);
  REQUIRE(bank->expert_count() == size_t{8 * 4});
  for (int l = 0; l < g.num_hidden_layers; ++l) {
    const std::vector<int> k = synth::exl3_expert_k(g, x, l);
    REQUIRE(std::set<int>(k.begin(), k.end()) == std::set<int>{2, 3, 5});  // routing meets all
    for (int e = 0; e < g.n_routed_experts; ++e) {
      INFO("layer " << l << " expert " << e << " planned K" << k[e]);
      const exl3::BankExpert* be = bank->find(l, e);
      REQUIRE(be != nullptr);
      REQUIRE(be->K == k[e]);
      REQUIRE(be->proj[0].k == 128);  // pad128(hidden 64)
      REQUIRE(be->proj[0].n == 128);  // pad128(inter 64)
    }
  }
  REQUIRE(bank->bytes_in(bank->range()) == synth::exl3_bank_bytes(g, x));

  SequenceState st = m->new_sequence();
  const std::vector<int32_t> ids = {5, 77, 300, 2, 599};
  const std::vector<float> logits = m->forward(st, ids);
  REQUIRE(logits.size() == ids.size() * static_cast<size_t>(g.vocab_size));
  const double rms = logit_rms(logits);
  INFO("logit rms " << rms);
  REQUIRE(rms > 0.1);
  REQUIRE(rms < 10.0);

  synth::write_synthetic_checkpoint(b.dir.string(), g, 7, x);
  const auto ta = tree_bytes(a.dir), tb = tree_bytes(b.dir);
  REQUIRE(ta.size() == tb.size());
  for (const auto& [rel, data] : ta) {
    INFO(rel);
    REQUIRE(tb.count(rel) == 1);
    REQUIRE(tb.at(rel) == data);
  }
}

TEST_CASE("synthetic EXL3 values: W = suh.H.W^.H.svh has element RMS 1/sqrt(in)", "[unit]") {
  // hidden 64 -> 128 padded, inter 160 -> 256: both padding directions, unequal in / out.
  SyntheticGeometry g = SyntheticGeometry::tiny();
  g.moe_intermediate_size = 160;
  synth::SyntheticExl3 x;
  x.enabled = true;
  ScratchDir d("exl3v");
  synth::write_synthetic_checkpoint(d.dir.string(), g, 3, x);
  const std::vector<int> k = synth::exl3_expert_k(g, x, 0);
  for (int e = 0; e < g.n_routed_experts; ++e) {
    const std::string file =
        (d.dir / ("exl3/qn/K" + std::to_string(k[e]) + "/L00.safetensors")).string();
    auto f = SafetensorsFile::open(file);
    for (const char* w : {"w1", "w3", "w2"}) {
      const bool down = std::string(w) == "w2";
      const int64_t in = down ? 160 : 64, out = down ? 64 : 160;
      const std::string prefix = "layers.0.ffn.experts." + std::to_string(e) + "." + w;
      const exl3::Exl3Tensor t = exl3::load_exl3_tensor(*f, prefix);
      REQUIRE(t.codebook == exl3::Codebook::kMul1);
      REQUIRE(t.k == (down ? 256 : 128));
      REQUIRE(t.n == (down ? 128 : 256));
      const std::vector<float> W = exl3::reconstruct_weight(t);  // [k, n]
      double sq = 0.0;
      for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < out; ++o) sq += double(W[i * t.n + o]) * W[i * t.n + o];
      const double rms = std::sqrt(sq / double(in * out)), want = 1.0 / std::sqrt(double(in));
      INFO(prefix << " K" << t.K << ": rms " << rms << " want " << want << " ratio " << rms / want);
      // >= 10,240 elements: sampling noise ~1 %; 5 % leaves room for trellis correlations.
      REQUIRE(std::fabs(rms / want - 1.0) < 0.05);
    }
  }
}

TEST_CASE("synthetic EXL3 K mix: counts, mean bpw and the released byte totals", "[unit]") {
  synth::SyntheticExl3 x;
  x.enabled = true;
  const std::map<int, std::array<int, 3>> want = {
      {4, {2, 1, 1}}, {8, {4, 3, 1}}, {32, {17, 10, 5}}, {384, {204, 122, 58}}};
  for (const auto& [E, n] : want) {
    INFO(E << " experts");
    REQUIRE(synth::exl3_k_counts(E, x) == n);
  }
  // From 10 experts on the mix is within 0.05 bpw of 2.77 with every K present (a bit total
  // lands within 0.5 of 2.77·E; all three K need 2E + 4 bits, i.e. E >= 5).
  for (int E = 10; E <= 400; ++E) {
    const std::array<int, 3> n = synth::exl3_k_counts(E, x);
    const double mean = (2.0 * n[0] + 3.0 * n[1] + 5.0 * n[2]) / E;
    INFO(E << " experts: " << n[0] << " / " << n[1] << " / " << n[2] << " -> " << mean << " bpw");
    REQUIRE(n[0] + n[1] + n[2] == E);
    REQUIRE(std::min({n[0], n[1], n[2]}) >= 1);
    REQUIRE(std::fabs(mean - 2.77) < 0.05);
  }

  const SyntheticGeometry g = SyntheticGeometry::released(40, 32);
  REQUIRE(std::fabs(synth::exl3_mean_bpw(g, x) - 2.78125) < 1e-12);  // 89 bits / 32
  // Per expert (docs/formats/exl3.md): 8,891,916 B at K2, 13,315,596 at K3, 22,162,956 at K5;
  // a layer of 17 / 10 / 5 = 395,133,312 B; x 40 layers:
  REQUIRE(synth::exl3_bank_bytes(g, x) == uint64_t{15805332480});
  // The shards lose 40 x 32 FP4 experts of 18,800,640 B: 33,452,232,128 - 24,064,819,200.
  REQUIRE(synth::synthetic_data_bytes(g, x) == uint64_t{9387412928});
  const std::vector<synth::BankFile> files = synth::exl3_bank_files(g, x);
  REQUIRE(files.size() == 120);  // 40 layers x {K2, K3, K5}
  REQUIRE(files[0].rel_path.find("exl3/qn/K2/L00.safetensors") == 0);
  std::map<std::string, SyntheticTensor> t;
  for (const synth::BankFile& f : files)
    for (const SyntheticTensor& s : f.tensors) t[s.name] = s;
  const int K = synth::exl3_expert_k(g, x, 39)[31];
  const std::string p = "layers.39.ffn.experts.31.";
  REQUIRE(t.at(p + "w1.trellis").shape == std::vector<int64_t>{320, 144, 16 * K});
  REQUIRE(t.at(p + "w2.trellis").shape == std::vector<int64_t>{144, 320, 16 * K});
  REQUIRE(t.at(p + "w3.suh").shape == std::vector<int64_t>{5120});
  REQUIRE(t.at(p + "w2.svh").shape == std::vector<int64_t>{5120});
  REQUIRE(t.at(p + "w2.mul1").shape.empty());
}

TEST_CASE("synthetic EXL3 options: a bad field is named", "[unit]") {
  using Catch::Matchers::Contains;
  const SyntheticGeometry g = SyntheticGeometry::tiny();
  synth::SyntheticExl3 x;
  x.enabled = true;
  x.mean_bpw = 6.0;
  ScratchDir d("exl3bad");
  REQUIRE_THROWS_WITH(synth::write_synthetic_checkpoint(d.dir.string(), g, 1, x),
                      Contains("SyntheticExl3.mean_bpw = 6"));
  REQUIRE_FALSE(fs::exists(d.dir));  // checked before anything is written
  x.mean_bpw = 2.77;
  x.k5_fraction = -0.1;
  REQUIRE_THROWS_WITH(synth::exl3_bank_bytes(g, x), Contains("SyntheticExl3.k5_fraction"));
}

}  // namespace dsv41

namespace dsv41 {

TEST_CASE("synthetic DSpark: the mtp module binds and drafts, released stages have the spec shapes",
          "[unit]") {
  SyntheticGeometry g = SyntheticGeometry::tiny();
  g.dspark_stages = 3;
  g.dspark_experts = g.n_routed_experts;
  g.dspark_top_k = 2;
  ScratchDir a("dspark");
  synth::write_synthetic_checkpoint(a.dir.string(), g, 7);
  // Bound with the module, an unused mtp.* tensor would be an error: every one is used.
  auto m = Transformer::load(a.dir.string(), 2, nullptr, "", /*dspark=*/true);
  REQUIRE(m->weights().dspark != nullptr);
  REQUIRE(m->config().text.num_nextn_predict_layers == 3);
  REQUIRE(m->config().text.dspark_target_layer_ids == std::vector<int>{5, 6, 7});
  SequenceState st = m->new_sequence();
  (void)m->forward(st, std::vector<int32_t>{5, 77, 300, 2, 599});
  const DsparkProposal p = DsparkDrafter(*m).draft(st, 9);
  REQUIRE(p.tokens.size() == 5);
  for (float c : p.confidence) REQUIRE((c > 0.0f && c < 1.0f));

  // Released: 3 stages over a router pool of 32 (min(pool, 128) stored per stage), §1.5 shapes,
  // 43 compress ratios, the release's taps and noise id.
  SyntheticGeometry r = SyntheticGeometry::released(40, 32);
  r.expert_pool = 32;
  r.n_routed_experts = 384;
  r.dspark_stages = 3;
  Result<ModelConfig> cfg = ModelConfig::parse(synth::synthetic_config_json(r), "config.json");
  REQUIRE(cfg.is_ok());
  REQUIRE(cfg->validate().is_ok());
  REQUIRE(cfg->text.compress_ratios.size() == 43);
  REQUIRE(cfg->text.dspark_target_layer_ids == std::vector<int>{37, 38, 39});
  REQUIRE(cfg->text.dspark_noise_token_id == 128799);
  REQUIRE(cfg->text.dspark_n_routed_experts == 128);
  const auto t = by_name(r);
  REQUIRE(t.at("mtp.0.main_proj.weight").shape == std::vector<int64_t>{5120, 15360});
  REQUIRE(t.at("mtp.2.markov_head.head.weight").shape == std::vector<int64_t>{129280, 256});
  REQUIRE(t.at("mtp.2.confidence_head.proj.weight").shape == std::vector<int64_t>{1, 5376});
  REQUIRE(t.at("mtp.1.ffn.gate.weight").shape == std::vector<int64_t>{128, 5120});
  REQUIRE(t.count("mtp.2.ffn.experts.31.w2.scale") == 1);
  REQUIRE(t.count("mtp.2.ffn.experts.32.w1.weight") == 0);
  REQUIRE(t.count("mtp.3.attn_norm.weight") == 0);
  r.dspark_top_k = 0;
  REQUIRE_THROWS_WITH(synth::synthetic_tensors(r), Catch::Contains("top-k 0"));
}

}  // namespace dsv41
