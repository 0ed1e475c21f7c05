#include "vision_fixture.hpp"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "loader/safetensors.hpp"
#include "quant/dtype.hpp"
#include "support/fixtures.hpp"
#include "support/tiny8_variant.hpp"

namespace dsv41::test {
namespace {

namespace fs = std::filesystem;

// The JSON object value of `"key": {...}` in s replaced by `value`.
void replace_object(std::string& s, const std::string& key, const std::string& value) {
  const size_t k = s.find("\"" + key + "\":");
  if (k == std::string::npos) throw std::runtime_error("vision fixture: no " + key);
  const size_t open = s.find('{', k);
  int depth = 0;
  size_t e = open;
  for (; e < s.size(); ++e) {
    if (s[e] == '{') ++depth;
    if (s[e] == '}' && --depth == 0) break;
  }
  s.replace(open, e + 1 - open, value);
}

struct Writer {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<TensorToWrite> tensors;
  const std::set<std::string>& drop;
  std::mt19937_64 rng{20261205};

  // BF16 values uniform in [-a, a) (or all `fill` when a == 0).
  void bf16(const std::string& name, std::vector<int64_t> shape, float a, float fill = 0.0f) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::uniform_real_distribution<float> u(-a, a);
    std::vector<uint8_t> b(static_cast<size_t>(n) * 2);
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t h = f32_to_bf16(a > 0 ? fill + u(rng) : fill);
      std::memcpy(b.data() + 2 * i, &h, 2);
    }
    if (drop.count(name)) return;
    bytes.push_back(std::move(b));
    tensors.push_back({name, DType::kBF16, std::move(shape), bytes.back()});
  }
};

}  // namespace

std::string make_tiny8_vision(const std::set<std::string>& drop, bool zero_blocks) {
  using V = TinyVision;
  const fs::path src = fixture("golden/tiny8");
  const fs::path dir = tiny8_variant_dir("vision");
  std::string cfg = read_text(src / "config.json");
  std::ostringstream vc;
  vc << "{\"model_type\": \"deepseek_v41_vision\", \"hidden_size\": " << V::kHidden
     << ", \"intermediate_size\": " << V::kInter << ", \"num_hidden_layers\": " << V::kLayers
     << ", \"num_attention_heads\": " << V::kHeads << ", \"patch_size\": " << V::kPatch
     << ", \"downsample_ratio\": " << V::kDownsample << ", \"rope_theta\": 10000.0"
     << ", \"max_image_tokens\": " << V::kMaxTokens << ", \"min_pixels\": " << V::kMinPixels
     << ", \"max_wh_ratio\": null}";
  replace_object(cfg, "vision_config", vc.str());
  std::ofstream(dir / "config.json") << cfg;

  Writer w{{}, {}, drop};
  const int64_t h = V::kHidden, D = V::kTextDim, patch_in = 3 * V::kPatch * V::kPatch;
  const float zero_or = zero_blocks ? 0.0f : 1.0f;
  w.bf16("vision.patch_embed.proj.weight", {h, patch_in}, 0.4f);
  w.bf16("vision.patch_embed.proj.bias", {h}, 0.1f);
  for (int b = 0; b < V::kLayers; ++b) {
    const std::string p = "vision.blocks." + std::to_string(b) + ".";
    w.bf16(p + "norm1.weight", {h}, 0.1f, 1.0f);
    w.bf16(p + "attn.wqkv.weight", {3 * h, h}, 0.3f);
    w.bf16(p + "attn.wqkv.bias", {3 * h}, 0.1f);
    w.bf16(p + "attn.wo.weight", {h, h}, 0.2f * zero_or);
    w.bf16(p + "attn.wo.bias", {h}, 0.1f * zero_or);
    w.bf16(p + "norm2.weight", {h}, 0.1f, 1.0f);
    w.bf16(p + "mlp.w1.weight", {2 * V::kInter, h}, 0.3f);
    w.bf16(p + "mlp.w2.weight", {h, V::kInter}, 0.2f * zero_or);
  }
  w.bf16("vision.norm.weight", {h}, 0.1f, 1.0f);
  const int64_t merged = h * V::kDownsample * V::kDownsample;
  w.bf16("aligner.w1.weight", {D, merged}, 0.1f);
  w.bf16("aligner.w1.bias", {D}, 0.1f);
  w.bf16("aligner.w2.weight", {D, D}, 0.1f);
  w.bf16("aligner.w2.bias", {D}, 0.1f);
  for (const char* n : {"image_start", "image_newline", "image_end", "image_pad"})
    w.bf16(n, {D}, 0.5f);
  write_safetensors((dir / "model-vision.safetensors").string(), w.tensors);

  write_index_with(dir, "model-vision.safetensors", w.tensors);
  return dir.string();
}

}  // namespace dsv41::test
