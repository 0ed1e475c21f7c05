// Synthetic DeepSeek-V4.1 checkpoints: random weights in the released on-disk format (tensor
// names, dtypes, shapes, sharded safetensors + index, config.json) that Transformer::load accepts,
// for full-geometry benchmarks without the 510 GB release (docs/perf.md "Synthetic
// full-geometry checkpoint"). DSpark (mtp.*) only when SyntheticGeometry::dspark_stages is set;
// Engram (layers.L.engram.*, tokenizer.json) only
// when SyntheticGeometry::engram is set (synthetic_engram.hpp), the vision tower (vision.*,
// aligner.*, image_*) only when SyntheticGeometry::vision is set.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quant/dtype.hpp"

namespace dsv41::synth {

// Every text_config value the writer emits (names = config keys, spec model-architecture.md
// §1.2). shard_bytes is not a config key: the data bytes per shard before a new one starts.
struct SyntheticGeometry {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int head_dim = 0;
  int qk_rope_head_dim = 0;
  int q_lora_rank = 0;
  int o_groups = 0;
  int o_lora_rank = 0;
  int sliding_window = 0;
  std::vector<int> compress_ratios;  // num_hidden_layers entries
  std::vector<int> kv_source_layer_ids;
  std::vector<int> index_source_layer_ids;
  int candidate_source_layer_id = -1;
  int candidate_topk_blocks = 0;
  int candidate_block_size = 0;
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  int moe_intermediate_size = 0;
  int n_routed_experts = 0;  // router width
  // > 0: only experts [0, expert_pool) are written and expert e runs expert e % expert_pool's
  // weights (text_config.synthetic_expert_pool, not a release key): the router spreads over all
  // n_routed_experts while the stored pool fits one GPU. 0: every expert written.
  int expert_pool = 0;
  int n_shared_experts = 1;
  int num_experts_per_tok = 0;
  double routed_scaling_factor = 1.5;
  double swiglu_limit = 10.0;
  int hc_mult = 4;
  int hc_sinkhorn_iters = 20;
  uint64_t shard_bytes = uint64_t{2} << 30;

  // vision_config values (spec §7.1); hidden_size 0 = no vision tower in the checkpoint.
  struct Vision {
    int hidden_size = 0;
    int intermediate_size = 0;
    int num_hidden_layers = 0;
    int num_attention_heads = 0;
    int patch_size = 0;
    int downsample_ratio = 0;
    int max_image_tokens = 0;
    int64_t min_pixels = 0;
    static Vision released();  // 1024 wide, 32 blocks of 16 heads, patch 14, 3x3, 1024 tokens
    static Vision tiny();      // 32 wide, 2 blocks of 2 heads, patch 2, 3x3, 40 tokens
  } vision;

  // DSpark draft module (spec §1.5, §6.1): stages (0 = none; the release has 3) with the
  // release's block 5, Markov rank 256, 128 routed experts top-3 (the router width; with
  // expert_pool > 0 only min(pool, 128) are stored and aliased like the backbone's), target
  // layers the last three backbone layers ([37, 38, 39] at 40).
  int dspark_stages = 0;
  int dspark_experts = 128;
  int dspark_top_k = 3;
  int dspark_markov_rank = 256;

  // Engram (spec §5); no layer ids = none. num_embeddings (the prime sums) and
  // compressed_vocab_size (the tokenizer's compressed map) are derived: add_engram() fills them.
  struct Engram {
    std::vector<int> layer_ids;
    int64_t vocab_size = 0;  // engram_vocab_size, where the bucket prime search starts
    int max_ngram_size = 0;
    int n_heads = 0;
    int head_dim = 0;
    int pad_token_id = 2;
    std::vector<int64_t> num_embeddings;  // table rows per Engram layer
    int64_t compressed_vocab_size = 0;
  } engram;

  // The released dimensions (§1.2) with `layers` backbone layers and `experts` routed experts.
  // Ratios: [0, 0] + [2] * n2 + [1] * n1 with (n2, n1) = (18, 20) at 40 layers (the release),
  // else n2 = (layers - 2) / 2. KV sources: every 6th ratio-2 layer from the first, the first
  // ratio-1 layer (also the candidate source); index sources: the KV sources and every 4th
  // ratio-1 layer. At 40 layers: kv [2, 8, 14, 20], index [2, 8, 14, 20, 24, 28, 32, 36].
  static SyntheticGeometry released(int layers, int experts);
  // CPU-test size: vocab 600, hidden 64, 2 heads x 64, 8 layers with tiny8's schedule
  // [0, 2, 2, 2, 1, 1, 1, 1] (every role: SWA, Full, Reuse, Reindex), 4 experts top-2.
  static SyntheticGeometry tiny();
};

// How a tensor's bytes are drawn (docs/perf.md lists the distributions).
enum class Fill : uint8_t {
  kConst,     // every element = value (BF16 / F32 / E8M0 byte)
  kNormal,    // BF16 / F32 i.i.d. N(0, sigma) (truncated at 4.1 sigma)
  kUniform,   // F32 i.i.d. U(value - sigma, value + sigma)
  kE4m3Code,  // e4m3 codes ~ N(0, sigma) rounded, never NaN (0x7F / 0xFF)
  kE2m1Pair,  // bytes of two e2m1 codes ~ N(0, sigma) rounded
  kBits,      // raw random bits, any dtype (an EXL3 trellis: every bit pattern decodes)
  kSign,      // BF16 / F16 / F32 +value or -value, equal odds (EXL3 suh / svh)
};

struct SyntheticTensor {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;
  Fill fill = Fill::kConst;
  double value = 0.0;  // kConst: the value (E8M0: the byte); kUniform: the centre; kSign: |x|
  double sigma = 0.0;  // kNormal / kE4m3Code / kE2m1Pair: code std; kUniform: half width
  uint64_t nbytes() const;
};

// The Spark layout (docs/formats/exl3.md "Spark banks and the allocation plan"): every routed
// expert of every layer is an EXL3 MUL1 expert in DIR/exl3/qn/K<K>/L<LL>.safetensors, named by
// the plan DIR/exl3/plan/plan.json, and has no release FP4 tensors. K in {2, 3, 5} per expert:
// per layer the counts whose mean is nearest mean_bpw, every K present at >= 3 experts, ties to
// the K5 count nearest k5_fraction x experts (synthetic_exl3.hpp).
struct SyntheticExl3 {
  bool enabled = false;
  double mean_bpw = 2.77;     // the Spark checkpoint's average (spec exl3-format.md §4.1)
  double k5_fraction = 0.15;  // 2.77 = 0.55 x 2 + 0.30 x 3 + 0.15 x 5 (+0.02)
  // Throws kInvalidArgument naming the field: mean_bpw outside [2, 5], k5_fraction outside [0, 1].
  void validate() const;
};

// The full tensor list in file order (embed, layers 0..L-1, norm, head). Weight RMS per row is
// 1/sqrt(in) for every FP8 / FP4 / BF16 matrix (code RMS x 2^(scale - 127)). Throws on a
// geometry the config validator would reject (bad role lists, in not divisible by 32 for FP4).
// exl3.enabled: without the routed experts (layers.L.ffn.experts.E.*), which live in the banks.
std::vector<SyntheticTensor> synthetic_tensors(const SyntheticGeometry& g,
                                               const SyntheticExl3& exl3 = {});
// Sum of nbytes() over synthetic_tensors(g, exl3): the shards' data bytes (no headers; the EXL3
// banks are exl3_bank_bytes in synthetic_exl3.hpp).
uint64_t synthetic_data_bytes(const SyntheticGeometry& g, const SyntheticExl3& exl3 = {});
// config.json text (released nested layout, text_config (+ vision_config); the engram_* keys, or
// engram_layer_ids [] without Engram).
std::string synthetic_config_json(const SyntheticGeometry& g);

// Writes DIR/config.json, DIR/model-0000N-of-0000M.safetensors and
// DIR/model.safetensors.index.json (DIR is created), with exl3.enabled also the bank files and
// DIR/exl3/plan/plan.json (without, a plan.json left there by an earlier run is removed, so the
// directory does not load as a Spark checkpoint), and DIR/tokenizer.json (below). Deterministic in
// (g, exl3, seed). Generates on all hardware threads with positional writes; throws detail::Failure
// (kIo / kInvalidArgument) naming the path, tensor or option field. tokenizer_json: written as
// DIR/tokenizer.json, required with Engram (its compressed token map sized g.engram); empty: none
// written and a tokenizer.json left by an earlier run removed.
void write_synthetic_checkpoint(const std::string& dir, const SyntheticGeometry& g, uint64_t seed,
                                const SyntheticExl3& exl3 = {},
                                const std::string& tokenizer_json = "");

}  // namespace dsv41::synth
