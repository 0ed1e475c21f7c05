#include "backend/cuda/forward/forward_workspace.hpp"

#include <algorithm>

#include "config/model_config.hpp"
#include "core/check.hpp"
#include "dsv41k/attention.hpp"
#include "dsv41k/mhc.hpp"
#include "dsv41k/moe.hpp"
#include "model/mhc.hpp"

namespace dsv41::cuda {
namespace {

DeviceBuffer f32(int64_t n) { return DeviceBuffer(static_cast<size_t>(n) * sizeof(float)); }

}  // namespace

ForwardWorkspace::ForwardWorkspace(const ModelConfig& cfg, int C, int64_t max_context)
    : max_chunk(C) {
  const TextConfig& t = cfg.text;
  DSV41_CHECK(C >= 1, kInvalidArgument, "CUDA forward: max_chunk = {} must be >= 1", C);
  const int64_t D = t.hidden_size, hc = t.hc_mult, hd = t.head_dim;
  int min_ratio = 0, max_ratio = 1;
  for (const LayerRole& r : cfg.roles) {
    if (r.ratio > 0) min_ratio = min_ratio == 0 ? r.ratio : std::min(min_ratio, r.ratio);
    max_ratio = std::max(max_ratio, r.ratio);
  }
  max_entries = min_ratio > 0 ? max_context / min_ratio : 0;
  H = f32(C * hc * D);
  Hmid = f32(C * hc * D);
  HcShape shape;
  shape.hc = t.hc_mult;
  shape.dim = D;
  shape.hc_eps = static_cast<float>(t.hc_eps);
  const std::vector<float> pre0 = hc_initial_pre(shape, C);
  pre_init = f32(C * hc);
  pre_init.upload(pre0.data(), pre0.size() * sizeof(float));
  pre_a = f32(C * hc);
  post_a = f32(C * hc);
  comb_a = f32(C * hc * hc);
  pre_f = f32(C * hc);
  post_f = f32(C * hc);
  comb_f = f32(C * hc * hc);
  x = f32(C * D);
  xn = f32(C * D);
  hc_site_ws = DeviceBuffer(kernels::hc_site_workspace_bytes(C, static_cast<int>(hc), D));
  hc_site_ws.fill_bytes(0);  // the counters start at zero; every call leaves them so
  y = f32(C * D);
  const int64_t heads = t.num_attention_heads;
  qr = f32(C * t.q_lora_rank);
  q = f32(C * heads * hd);
  o = f32(C * heads * hd);
  kv = f32(C * hd);
  kv_packed = DeviceBuffer(
      static_cast<size_t>(C * kernels::kv_packed_bytes(kernels::KvFormat::kWindowFp8, hd)));
  u = f32(C * heads * hd / std::max(1, t.o_groups));
  zg = f32(C * t.o_lora_rank);
  z = f32(C * int64_t{t.o_groups} * t.o_lora_rank);
  // Splits shrink as T grows (one split from 32 tokens on): the max is at small T.
  size_t part = 0;
  for (int64_t T = 1; T <= std::min<int64_t>(C, 256); ++T)
    part = std::max(part, kernels::window_sparse_attention_workspace_bytes(
                              T, static_cast<int>(heads), static_cast<int>(hd), t.sliding_window,
                              t.index_topk));
  attn_part = DeviceBuffer(std::max<size_t>(part, 16));
  stage_kv = f32((max_ratio - 1 + C) * hd);
  stage_gate = f32((max_ratio - 1 + C) * hd);
  latent = f32(C * hd);
  index_k = f32(C * std::max(1, t.index_head_dim));
  index_q = f32(C * int64_t{t.index_n_heads} * t.index_head_dim);
  index_w = f32(C * int64_t{std::max(1, t.index_n_heads)});
  scores = f32(std::max<int64_t>(1, C * max_entries));
  for (const LayerRole& r : cfg.roles) {
    if (r.index_source)
      selection.emplace(r.layer, DeviceBuffer(static_cast<size_t>(C) * t.index_topk * 4));
    if (r.candidate_source)
      candidates.emplace(r.layer,
                         DeviceBuffer(static_cast<size_t>(std::max<int64_t>(1, C * max_entries))));
  }
  const int64_t E = t.n_routed_experts, k = t.num_experts_per_tok, S = C * k;
  logits_e = f32(C * E);
  route_ids = DeviceBuffer(static_cast<size_t>(S) * 4);
  route_w = f32(S);
  inv = DeviceBuffer(static_cast<size_t>(S) * 4);
  counts = DeviceBuffer(static_cast<size_t>(E) * 4);
  offsets = DeviceBuffer(static_cast<size_t>(E + 1) * 4);
  slot_token = DeviceBuffer(static_cast<size_t>(S) * 4);
  slot_weight = f32(S);
  xs = f32(S * D);
  ys = f32(S * D);
  slots = S;
  g = f32(2 * S * t.moe_intermediate_size);
  // Descriptor tables for the smallest tile (1 row, CudaForwardOptions::moe_gemv_tile_rows):
  // E + S entries at most, 12,672 of 32 bytes per table at C = 2048.
  desc_capacity = kernels::moe_tile_capacity(C, static_cast<int>(k), static_cast<int>(E), 1);
  const size_t dbytes = static_cast<size_t>(desc_capacity) * sizeof(kernels::MoeGemvDesc);
  desc_gate_up = DeviceBuffer(2 * dbytes);
  desc_down = DeviceBuffer(dbytes);
  desc_x_gate_up = DeviceBuffer(2 * dbytes);
  desc_x_down = DeviceBuffer(dbytes);
  const int64_t shared_inter = int64_t{t.n_shared_experts} * t.moe_intermediate_size;
  shared_g = f32(std::max<int64_t>(C, 2) * std::max<int64_t>(1, shared_inter));  // T = 1: [g | u]
  shared_u = f32(C * std::max<int64_t>(1, shared_inter));
  shared_y = f32(C * D);
  ids = DeviceBuffer(static_cast<size_t>(C) * 4);
  flags = DeviceBuffer(static_cast<size_t>(C));
  const int64_t cols = int64_t{std::max(0, t.engram_max_ngram_size - 1)} * t.engram_n_heads;
  const int64_t n_engram = static_cast<int64_t>(t.engram_layer_ids.size());
  hash_ids = DeviceBuffer(static_cast<size_t>(std::max<int64_t>(1, n_engram * C * cols)) * 8);
  engram_e = f32(std::max<int64_t>(1, C * cols * t.engram_head_dim));
  engram_kv = f32(C * (hc + 1) * D);
  logits = f32(C * t.vocab_size);
}

uint64_t ForwardWorkspace::device_bytes() const {
  uint64_t b = 0;
  b += hc_site_ws.bytes();
  for (const DeviceBuffer* p : {&H,           &Hmid,
                                &pre_init,    &pre_a,
                                &post_a,      &comb_a,
                                &pre_f,       &post_f,
                                &comb_f,      &x,
                                &xn,          &y,
                                &qr,          &q,
                                &o,           &attn_part,
                                &kv,          &kv_packed,
                                &u,           &zg,
                                &z,           &stage_kv,
                                &stage_gate,  &latent,
                                &index_k,     &index_q,
                                &index_w,     &scores,
                                &logits_e,    &route_ids,
                                &route_w,     &inv,
                                &counts,      &offsets,
                                &slot_token,  &slot_weight,
                                &xs,          &ys,
                                &g,           &desc_gate_up,
                                &desc_down,   &desc_x_gate_up,
                                &desc_x_down, &shared_g,
                                &shared_u,    &shared_y,
                                &ids,         &flags,
                                &hash_ids,    &engram_e,
                                &engram_kv,   &logits})
    b += p->bytes();
  for (const auto& [l, buf] : selection) b += buf.bytes();
  for (const auto& [l, buf] : candidates) b += buf.bytes();
  return b;
}

}  // namespace dsv41::cuda
