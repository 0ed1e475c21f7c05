// Scratch of one CUDA forward step (CudaTransformer): every intermediate of a chunk of at most
// max_chunk tokens, allocated once per model so a step never allocates. Sizes from the config
// (spec model-architecture.md §2-5) and the limits; names follow the CPU reference variables.
#pragma once

#include <cstdint>
#include <map>

#include "backend/cuda/device_buffer.hpp"

namespace dsv41 {
struct ModelConfig;
}

namespace dsv41::cuda {

struct ForwardWorkspace {
  // C = max_chunk tokens, N = max_context / min ratio compressed entries.
  ForwardWorkspace(const ModelConfig& cfg, int max_chunk, int64_t max_context);
  uint64_t device_bytes() const;

  int max_chunk = 0;
  int64_t max_entries = 0;
  // Residual streams and mHC mixes (§3).
  DeviceBuffer H, Hmid;                // [C, hc, D]
  DeviceBuffer pre_init;               // [C, hc] hc_initial_pre
  DeviceBuffer pre_a, post_a, comb_a;  // attention site [C, hc], [C, hc], [C, hc, hc]
  DeviceBuffer pre_f, post_f, comb_f;  // ffn site
  DeviceBuffer x, xn, y;               // [C, D]
  DeviceBuffer hc_site_ws;             // hc_site's split partials and counters (zeroed once)
  // Attention (§2.2).
  DeviceBuffer qr;         // [C, q_lora]
  DeviceBuffer q, o;       // [C, heads, head_dim]
  DeviceBuffer kv;         // [C, head_dim]
  DeviceBuffer kv_packed;  // [C, window entry bytes]
  DeviceBuffer u, zg;      // [C, heads·head_dim/o_groups], [C, o_lora]
  DeviceBuffer z;          // [C, o_groups·o_lora]
  DeviceBuffer attn_part;  // split-key partials of window_sparse_attention (max over T <= C)
  // Compressor (§2.3) and indexer (§2.4).
  DeviceBuffer stage_kv, stage_gate;  // [max_ratio - 1 + C, head_dim]
  DeviceBuffer latent;                // [C, head_dim]
  DeviceBuffer index_k;               // [C, index_head_dim]
  DeviceBuffer index_q;               // [C, index_heads, index_head_dim]
  DeviceBuffer index_w;               // [C, index_heads]
  DeviceBuffer scores;                // [C, N]
  // Per call: the selection each index source publishes [C, index_topk] int32 and the mask of
  // the candidate source [C, N] uint8, keyed by the publishing layer.
  std::map<int, DeviceBuffer> selection;
  std::map<int, DeviceBuffer> candidates;
  // MoE (§4), S = C · top_k slots.
  DeviceBuffer logits_e;                 // [C, E]
  DeviceBuffer route_ids, route_w, inv;  // [C, k]
  DeviceBuffer counts, offsets;          // [E], [E + 1]
  DeviceBuffer slot_token, slot_weight;  // [S]
  DeviceBuffer xs, ys;                   // [S, D]
  DeviceBuffer g;  // [2, S, inter]: gate rows [0, S), up rows [S, 2S) (one grouped launch)
  DeviceBuffer desc_gate_up, desc_down;      // [2 · capacity], [capacity] MoeGemvDesc
  DeviceBuffer desc_x_gate_up, desc_x_down;  // the same for the EXL3 experts' tables
  int64_t slots = 0;                         // S
  int64_t desc_capacity = 0;
  DeviceBuffer shared_g, shared_u;  // [C, n_shared · inter] (shared_g: >= 2 rows, [g | u] at T = 1)
  DeviceBuffer shared_y;            // [C, D]
  // Token inputs (§3, §5).
  DeviceBuffer ids;        // [C] int32
  DeviceBuffer flags;      // [C] uint8
  DeviceBuffer hash_ids;   // [n_engram, C, engram cols] int64
  DeviceBuffer engram_e;   // [C, cols · engram_head_dim]
  DeviceBuffer engram_kv;  // [C, (hc + 1) · D]
  // Head.
  DeviceBuffer logits;  // [C, vocab]
};

}  // namespace dsv41::cuda
