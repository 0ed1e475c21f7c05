// `dsv41 logits`: run the CPU reference forward pass on token ids and write the
// fp32 logits of every position; `dsv41 info`: print a model's config, derived
// layer roles, tensor inventory and, for a Spark checkpoint, the EXL3 expert plan.
#include <cstdio>
#include <string>
#include <vector>

#include "cli_args.hpp"
#include "core/check.hpp"
#include "loader/checkpoint.hpp"
#include "loader/safetensors.hpp"
#include "model/exl3_experts.hpp"
#include "model/model_weights.hpp"
#include "model/transformer.hpp"
#include "plan_report.hpp"

namespace {

using dsv41::cli::Args;
using dsv41::cli::UsageError;

std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

// Prefill [0, decode_from) in chunks of `chunk` (0 = one call), then one call
// per token.
int run_logits(const Args& args) {
  args.allow({"model", "ids", "out", "chunk", "decode-from", "threads", "plan"});
  const std::string dir = args.require("model");
  const std::string out = args.require("out");
  const std::vector<int32_t> ids = Args::parse_ids("ids", args.require("ids"));
  const auto n = static_cast<int64_t>(ids.size());
  if (n == 0) throw UsageError("--ids is empty");
  const int64_t chunk = args.get_int("chunk", 0);
  const int64_t decode_from = args.get_int("decode-from", n);
  const int64_t threads = args.get_int("threads", 0);
  if (chunk < 0) throw UsageError("--chunk must be >= 0");
  if (decode_from < 1 || decode_from > n)
    throw UsageError("--decode-from must be in [1, " + std::to_string(n) + "]");
  if (threads < 0) throw UsageError("--threads must be >= 0");

  auto model =
      dsv41::Transformer::load(dir, static_cast<size_t>(threads), nullptr,
                                args.get("plan").value_or(""));
  const int64_t V = model->config().text.vocab_size;
  dsv41::SequenceState st = model->new_sequence();
  std::vector<float> logits;
  logits.reserve(n * V);
  auto feed = [&](int64_t begin, int64_t count) {
    std::vector<float> l = model->forward(st, std::span<const int32_t>(ids.data() + begin, count));
    logits.insert(logits.end(), l.begin(), l.end());
  };
  const int64_t step = chunk > 0 ? chunk : decode_from;
  for (int64_t at = 0; at < decode_from; at += step) feed(at, std::min(step, decode_from - at));
  for (int64_t at = decode_from; at < n; ++at) feed(at, 1);
  const auto* bytes = reinterpret_cast<const uint8_t*>(logits.data());
  dsv41::write_safetensors(
      out, {{"logits", dsv41::DType::kF32, {n, V}, {bytes, logits.size() * sizeof(float)}}});
  std::printf("wrote %s: logits [%lld, %lld]\n", out.c_str(), static_cast<long long>(n),
              static_cast<long long>(V));
  return 0;
}

int run_info(const Args& args) {
  args.allow({"model", "plan"});
  const std::string dir = args.require("model");
  dsv41::Result<dsv41::ModelConfig> cfg = dsv41::ModelConfig::load(dir);
  if (!cfg)
    throw dsv41::detail::Failure(cfg.status().code(), cfg.status().message(), __FILE__, __LINE__);
  const dsv41::TextConfig& t = cfg->text;
  std::printf("model %s (%s)\n", dir.c_str(), cfg->model_type.c_str());
  std::printf(
      "vocab %lld  hidden %lld  layers %d  heads %d x %d (rope %d)  "
      "q_lora %d  o %d x %d\n",
      static_cast<long long>(t.vocab_size), static_cast<long long>(t.hidden_size),
      t.num_hidden_layers, t.num_attention_heads, t.head_dim, t.qk_rope_head_dim, t.q_lora_rank,
      t.o_groups, t.o_lora_rank);
  std::printf("window %d  index %d heads x %d top-%d  candidates %d blocks x %d\n",
              t.sliding_window, t.index_n_heads, t.index_head_dim, t.index_topk,
              t.candidate_topk_blocks, t.candidate_block_size);
  std::printf(
      "experts %d routed top-%d + %d shared, inter %d, scale %g, "
      "swiglu_limit %g\n",
      t.n_routed_experts, t.num_experts_per_tok, t.n_shared_experts, t.moe_intermediate_size,
      t.routed_scaling_factor, t.swiglu_limit);
  std::printf(
      "hc %d, sinkhorn %d, rms_norm_eps %g; engram layers [%s], n-gram "
      "%d, %d heads x %d\n",
      t.hc_mult, t.hc_sinkhorn_iters, t.rms_norm_eps, join(t.engram_layer_ids).c_str(),
      t.engram_max_ngram_size, t.engram_n_heads, t.engram_head_dim);
  std::printf("layer roles:\n");
  for (const dsv41::LayerRole& r : cfg->roles) {
    std::printf("  %2d ratio %d %-7s kv %3d index %3d candidate %3d%s%s\n", r.layer, r.ratio,
                dsv41::attn_role_name(r.role), r.kv_layer, r.index_layer, r.candidate_layer,
                r.candidate_source ? " candidate-source" : "", r.engram ? " engram" : "");
  }
  // A Spark checkpoint: its routed experts come from the EXL3 banks of the plan.
  const auto bank = dsv41::open_expert_bank(dir, *cfg, args.get("plan").value_or(""));
  dsv41::ModelWeights::ExternalExperts external;
  if (bank) {
    std::printf("routed experts: EXL3 banks (decoded on the fly) + release FP4\n");
    dsv41::cli::print_plan_report(*bank, 1);
    std::vector<int> fp4_layers;
    for (int l = 0; l < t.num_hidden_layers; ++l)
      if (!bank->plan().covers(l)) fp4_layers.push_back(l);
    std::printf("layers absent from the plan (release FP4 experts): [%s]\n",
                join(fp4_layers).c_str());
    external = [&bank](int l, int e) { return bank->find(l, e) != nullptr; };
  }
  auto ck = dsv41::Checkpoint::open(dir);
  // Also proves every tensor is used or ignored.
  auto w = dsv41::ModelWeights::bind(*ck, *cfg, nullptr, external);
  std::printf("tensors: %zu in %zu shard(s)\n", ck->names().size(), ck->shard_count());
  for (const auto& [dt, inv] : ck->inventory())
    std::printf("  %-8s %8zu tensors %14llu bytes\n", dsv41::dtype_name(dt), inv.count,
                static_cast<unsigned long long>(inv.bytes));
  for (const dsv41::IgnoredGroup& g : w->ignored)
    std::printf("  ignored %-9s %8zu tensors %14llu bytes\n", g.prefix.c_str(), g.count,
                static_cast<unsigned long long>(g.bytes));
  return 0;
}

const dsv41::cli::Registration reg_logits{
    {"logits",
     "--model DIR --ids 0,17,5 --out FILE.safetensors [--chunk N] "
     "[--decode-from N] "
     "[--threads N] [--plan NAME|FILE]",
     "run the CPU reference forward pass; writes tensor `logits` F32 [T, "
     "vocab]",
     &run_logits}};
const dsv41::cli::Registration reg_info{
    {"info", "--model DIR [--plan NAME|FILE]",
     "print config, layer roles, tensor inventory and (Spark checkpoints) the EXL3 expert plan",
     &run_info}};

}  // namespace
