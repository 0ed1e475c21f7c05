// Attention sublayer on the GPU: the op sequence of AttentionLayer::forward (§2.2 steps 1-7) and
// compressed_branch (§2.3-2.5), one kernel per CPU step.
#include "backend/cuda/forward/device_attention.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cuda/forward/launch_check.hpp"
#include "core/check.hpp"
#include "dsv41k/attention.hpp"
#include "dsv41k/csa.hpp"
#include "dsv41k/dspark.hpp"
#include "dsv41k/launchers.hpp"
#include "model/attention/attention_layer.hpp"

namespace dsv41::cuda {
namespace {

using kernels::KvFormat;

DeviceBuffer upload_table(const float* p, int n) {
  return upload_f32(std::vector<float>(p, p + n));
}

}  // namespace

void DeviceAttention::set_prefill_x(kernels::GemmX x) {
  for (DeviceLinear* lin : {&wq_a_, &wq_b_, &wkv_, &wo_a_, &wo_b_}) lin->set_prefill_x(x);
}

void DeviceAttention::set_side_lane(SideStream* lane, void* scratch, size_t bytes) {
  lane_ = lane;
  if (lane != nullptr) i_wk_.set_gemv_scratch(scratch, bytes);
}

void DeviceAttention::set_gemm(int min_rows, void* workspace, size_t bytes) {
  for (DeviceLinear* lin :
       {&wq_a_, &wq_b_, &wkv_, &wo_a_, &wo_b_, &c_wkv_, &c_wgate_, &i_wq_b_, &i_wproj_, &i_wk_}) {
    lin->set_gemm_min_rows(min_rows);
    lin->set_gemm_workspace(workspace, bytes);
  }
}

void DeviceAttention::set_gemv_scratch(void* p, size_t bytes) {
  for (DeviceLinear* lin :
       {&wq_a_, &wq_b_, &wkv_, &wo_a_, &wo_b_, &c_wkv_, &c_wgate_, &i_wq_b_, &i_wproj_, &i_wk_})
    lin->set_gemv_scratch(p, bytes);
}

DeviceAttention DeviceAttention::upload(const AttentionLayer& a) {
  DeviceAttention d;
  d.role_ = a.role();
  const int l = d.role_.layer;
  // A tensor-parallel rank runs its own heads and output groups (wq_b rows, sink, wo_a rows and
  // wo_b columns are the CPU layer's slices); `out` is then its partial sum (docs/tp.md).
  d.heads_ = a.local_heads();
  d.head_dim_ = a.head_dim();
  d.rope_dim_ = a.rope_dim();
  d.q_lora_ = a.q_lora();
  d.o_groups_ = a.local_groups();
  d.o_lora_ = a.o_lora();
  d.window_ = a.window();
  d.index_topk_ = a.index_topk();
  d.cand_blocks_ = a.candidate_blocks();
  d.cand_block_size_ = a.candidate_block_size();
  d.candidate_layer_ = a.candidate_layer();
  d.uses_candidates_ = a.uses_candidates();
  d.has_compressor_ = a.has_compressor();
  d.has_indexer_ = a.has_indexer();
  d.eps_ = a.eps();
  DSV41_CHECK(d.o_lora_ % 32 == 0, kInvalidArgument,
              "layer {}: o_lora_rank = {} is not a multiple of 32 (the grouped wo_a takes whole "
              "FP8 scale blocks)",
              l, d.o_lora_);
  const std::string p = "layers." + std::to_string(l) + ".attn.";
  d.wq_a_ = DeviceLinear::upload(a.wq_a(), p + "wq_a");
  d.wq_b_ = DeviceLinear::upload(a.wq_b(), p + "wq_b");
  d.wkv_ = DeviceLinear::upload(a.wkv(), p + "wkv");
  d.wo_a_ = DeviceLinear::upload(a.wo_a(), p + "wo_a");
  d.wo_b_ = DeviceLinear::upload(a.wo_b(), p + "wo_b");
  d.q_norm_ = upload_f32(a.q_norm());
  d.kv_norm_ = upload_f32(a.kv_norm());
  d.sink_ = upload_f32(a.sink());
  d.inv_freq_ = upload_table(a.inv_freq(), d.rope_dim_ / 2);
  d.inv_freq_compress_ = upload_table(a.inv_freq_compress(), d.rope_dim_ / 2);
  if (d.has_compressor_) {
    const Compressor& c = a.compressor();
    d.c_wkv_ = DeviceLinear::upload(c.wkv(), p + "compressor.wkv");
    if (c.ratio() > 1) d.c_wgate_ = DeviceLinear::upload(c.wgate(), p + "compressor.wgate");
    d.c_norm_ = upload_f32(c.norm());
    d.c_eps_ = c.eps();
  }
  if (d.has_indexer_) {
    const Indexer& ix = a.indexer();
    d.i_heads_ = ix.n_heads();
    d.i_head_dim_ = ix.head_dim();
    d.i_ratio_ = ix.ratio();
    d.i_eps_ = ix.eps();
    d.owns_keys_ = ix.owns_keys();
    d.i_wq_b_ = DeviceLinear::upload(ix.wq_b(), p + "indexer.wq_b");
    d.i_wproj_ = DeviceLinear::upload(ix.weights_proj(), p + "indexer.weights_proj");
    if (d.owns_keys_) {
      d.i_wk_ = DeviceLinear::upload(ix.wk(), p + "indexer.wk");
      d.i_k_norm_ = upload_f32(ix.k_norm());
    }
  }
  return d;
}

uint64_t DeviceAttention::device_bytes() const {
  uint64_t b = 0;
  for (const DeviceLinear* w :
       {&wq_a_, &wq_b_, &wkv_, &wo_a_, &wo_b_, &c_wkv_, &c_wgate_, &i_wq_b_, &i_wproj_, &i_wk_})
    b += w->bytes();
  for (const DeviceBuffer* v :
       {&q_norm_, &kv_norm_, &sink_, &inv_freq_, &inv_freq_compress_, &c_norm_, &i_k_norm_})
    b += v->bytes();
  return b;
}

// §2.3 (Compressor::run + Indexer::append_keys + append_compressed): this call's groups, the
// index keys of their pre-RoPE latents, then the rotated FP4 entries, appended in place. The
// call's kv (and gate) rows are already at ws.stage_kv / stage_gate row `pending` (forward()).
void DeviceAttention::compress(int64_t T, int64_t pos0, DeviceSource& src, ForwardWorkspace& ws,
                               cudaStream_t s) const {
  const int l = role_.layer, r = src.ratio, R = rope_dim_;
  const int64_t D = head_dim_;
  DSV41_CHECK(src.layer == l && src.next_pos() == pos0, kInternal,
              "layer {}: CUDA compressor state expects position {}, the call starts at {}", l,
              src.next_pos(), pos0);
  float* skv = ws.stage_kv.as<float>();
  float* sgate = ws.stage_gate.as<float>();
  float* latent = ws.latent.as<float>();
  int64_t ng = 0;
  if (r == 1) {  // every token is a group; no gate, no pooling
    ng = T;
    check_launch(kernels::rms_norm(skv, c_norm_.as<float>(), latent, T, D, c_eps_, s), l,
                 "compressor.norm");
  } else {
    const int64_t P = src.pending;
    if (P > 0) {  // the open group's rows first
      check_launch(
          cudaMemcpyAsync(skv, src.pending_kv.data(), P * D * 4, cudaMemcpyDeviceToDevice, s), l,
          "compressor pending kv");
      check_launch(
          cudaMemcpyAsync(sgate, src.pending_gate.data(), P * D * 4, cudaMemcpyDeviceToDevice, s),
          l, "compressor pending gate");
    }
    if (src.recent_capacity > 0) {  // rollback: this call's rows by position, newest kept
      const int64_t cap = src.recent_capacity;
      for (int64_t t = std::max<int64_t>(0, T - cap); t < T;) {
        const int64_t slot = (pos0 + t) % cap, run = std::min(T - t, cap - slot);
        check_launch(cudaMemcpyAsync(src.recent_kv.as<float>() + slot * D, skv + (P + t) * D,
                                     run * D * 4, cudaMemcpyDeviceToDevice, s),
                     l, "compressor recent kv");
        check_launch(cudaMemcpyAsync(src.recent_gate.as<float>() + slot * D, sgate + (P + t) * D,
                                     run * D * 4, cudaMemcpyDeviceToDevice, s),
                     l, "compressor recent gate");
        t += run;
      }
    }
    const int64_t rows = P + T;
    ng = rows / r;
    const int64_t used = ng * r, tail = rows - used;
    if (ng > 0) {
      check_launch(kernels::compressor_pool(skv, sgate, latent, ng, r, D, s), l, "compressor_pool");
      check_launch(kernels::rms_norm(latent, c_norm_.as<float>(), latent, ng, D, c_eps_, s), l,
                   "compressor.norm");
    }
    if (tail > 0) {
      check_launch(cudaMemcpyAsync(src.pending_kv.data(), skv + used * D, tail * D * 4,
                                   cudaMemcpyDeviceToDevice, s),
                   l, "compressor open group kv");
      check_launch(cudaMemcpyAsync(src.pending_gate.data(), sgate + used * D, tail * D * 4,
                                   cudaMemcpyDeviceToDevice, s),
                   l, "compressor open group gate");
    }
    src.pending = static_cast<int>(tail);
  }
  if (ng == 0) return;
  DSV41_CHECK(src.n_entries + ng <= src.capacity, kContextOverflow,
              "layer {}: {} compressed entries exceed the CUDA state's capacity {}", l,
              src.n_entries + ng, src.capacity);
  const int64_t first = src.n_entries;
  if (owns_keys_) {  // §2.4 keys from the pre-RoPE latents
    const int64_t K = i_head_dim_;
    float* k = ws.index_k.as<float>();
    i_wk_.gemv(latent, ng, k, s);
    kernels::KvRowOps ops;  // k_norm, RoPE at the entries' positions, FP4
    ops.norm_w = i_k_norm_.as<float>();
    ops.eps = i_eps_;
    ops.inv_freq = inv_freq_compress_.as<float>();
    ops.rope_dim = R;
    ops.pos0 = first * r;
    ops.pos_step = r;
    const int64_t kb = kernels::kv_packed_bytes(KvFormat::kIndexFp4, K);
    check_launch(
        kernels::kv_norm_rope_quantize(KvFormat::kIndexFp4, k, ops, nullptr,
                                       src.index_keys.as<uint8_t>() + first * kb, ng, K, s),
        l, "index keys");
  }
  kernels::KvRowOps ops;  // RoPE of the (normalised, pre-RoPE) latents, FP4
  ops.inv_freq = inv_freq_compress_.as<float>();
  ops.rope_dim = R;
  ops.pos0 = first * r;
  ops.pos_step = r;
  const int64_t cb = kernels::kv_packed_bytes(KvFormat::kCompressedFp4, D);
  check_launch(kernels::kv_norm_rope_quantize(KvFormat::kCompressedFp4, latent, ops, nullptr,
                                              src.compressed.as<uint8_t>() + first * cb, ng, D, s),
               l, "compressed entries");
  src.n_entries += ng;
}

// §2.4/§2.5 (the index half of compressed_branch): scores over the KV source's keys, the
// candidate mask (candidate source) or the restriction to it (later index sources), top-k. The
// query (ws.index_q) and head weights (ws.index_w) are already projected (forward()).
void DeviceAttention::select(int64_t T, int64_t pos0, const DeviceSource& keys,
                             ForwardWorkspace& ws, cudaStream_t s) const {
  const int l = role_.layer;
  const int64_t n = keys.n_entries;
  float* qi = ws.index_q.as<float>();
  float* w = ws.index_w.as<float>();
  float* scores = ws.scores.as<float>();
  kernels::KvRowOps ops;  // RoPE per head at the token's position, FP4 values in place
  ops.inv_freq = inv_freq_compress_.as<float>();
  ops.rope_dim = rope_dim_;
  ops.pos0 = pos0;
  ops.rows_per_position = i_heads_;
  check_launch(kernels::kv_norm_rope_quantize(KvFormat::kIndexFp4, qi, ops, qi, nullptr,
                                              T * i_heads_, i_head_dim_, s),
               l, "indexer query");
  const uint8_t* mask = nullptr;
  if (uses_candidates_) {
    auto it = ws.candidates.find(candidate_layer_);
    DSV41_CHECK(it != ws.candidates.end(), kInternal, "layer {}: no candidate mask of layer {}", l,
                candidate_layer_);
    mask = it->second.as<uint8_t>();
  }
  if (n > 0) {
    check_launch(kernels::indexer_scores(qi, w, keys.index_keys.as<uint8_t>(), mask, scores, T,
                                         i_heads_, i_head_dim_, n, pos0, i_ratio_, s),
                 l, "indexer_scores");
    if (role_.candidate_source)
      check_launch(
          kernels::candidate_blocks(scores, T, n, pos0, role_.ratio, cand_blocks_, cand_block_size_,
                                    ws.candidates.at(l).as<uint8_t>(), nullptr, s),
          l, "candidate_blocks");
  }
  check_launch(kernels::select_topk(n > 0 ? scores : nullptr, T, n, index_topk_,
                                    ws.selection.at(l).as<int32_t>(), s),
               l, "select_topk");
}

void DeviceAttention::forward(const float* xn, int64_t T, int64_t pos0, DeviceSequence& seq,
                              ForwardWorkspace& ws, float* out, cudaStream_t s,
                              StepProfile* prof) const {
  const int l = role_.layer, R = rope_dim_;
  const int64_t D = head_dim_;
  DSV41_CHECK(T >= 1 && T <= ws.max_chunk, kInternal, "layer {}: chunk of {} tokens (max {})", l, T,
              ws.max_chunk);
  DeviceWindow& ring = seq.window.at(l);
  float* qr = ws.qr.as<float>();
  float* q = ws.q.as<float>();
  float* kv = ws.kv.as<float>();
  // Every projection of xn first (steps 1-3: wq_a, wkv, the compressor's kv / gate rows after
  // its open group, the indexer's head weights): at decode the FP8 ones are one launch
  // (DeviceLinear::gemv_shared_x).
  const bool compressed_branch = role_.ratio > 0;
  const DeviceLinear* c_kv = nullptr;
  const DeviceLinear* c_gate = nullptr;
  float *c_kv_out = nullptr, *c_gate_out = nullptr;
  if (compressed_branch && has_compressor_) {
    const DeviceSource& src = seq.source.at(l);
    const int64_t P = src.ratio > 1 ? src.pending : 0;
    c_kv = &c_wkv_;
    c_kv_out = ws.stage_kv.as<float>() + P * D;
    if (src.ratio > 1) {
      c_gate = &c_wgate_;
      c_gate_out = ws.stage_gate.as<float>() + P * D;
    }
  }
  const bool indexes = compressed_branch && has_indexer_;
  {
    const DeviceLinear* lins[] = {&wq_a_, &wkv_, c_kv, c_gate, indexes ? &i_wproj_ : nullptr};
    float* const outs[] = {qr, kv, c_kv_out, c_gate_out,
                           indexes ? ws.index_w.as<float>() : nullptr};
    DeviceLinear::gemv_shared_x(lins, outs, xn, T, s);
  }
  // Steps 2-3a need only the projections above: with a lane they run beside the query chain.
  // Decode and verify steps only (as the shared expert's lane, DeviceMoe::forward): at a prefill
  // chunk the compressor's GEMM took SMs from the query chain's (attn q/kv + compressor 86.8 ->
  // 91.7 ms per 2048-token chunk, H200; docs/perf.md stop 29).
  SideStream* const lane = T <= kernels::kGemvMaxRows ? lane_ : nullptr;
  cudaStream_t ks = s;
  if (lane != nullptr) {
    lane->fork(s);
    ks = lane->get();
  }
  // Step 2: K=V = FP8(RoPE(kv_norm(x·Wkvᵀ))), packed for the ring.
  // The ring slots are written here too when no row of this call overwrites a position that
  // another row's window still reads from the ring: row t' replaces position pos0 + t' - cap,
  // which token t reads iff t' - t >= cap - window + 1 (decode and verify rows: T <= 1 +
  // max_rollback). Else the ring is written after the attention.
  uint8_t* kv_packed = ws.kv_packed.as<uint8_t>();
  const bool ring_now = T <= ring.capacity - window_ + 1;
  {
    const kernels::KvRowOps ops = window_row_ops(pos0, ring_now ? &ring : nullptr);
    check_launch(
        kernels::kv_norm_rope_quantize(KvFormat::kWindowFp8, kv, ops, nullptr, kv_packed, T, D, ks),
        l, "window K=V rows");
  }
  if (compressed_branch && has_compressor_) compress(T, pos0, seq.source.at(l), ws, ks);
  if (lane != nullptr) lane->done();
  // Step 1: qr = q_norm(x·Wq_aᵀ); q = qr·Wq_bᵀ (with the indexer's query of qr), RoPE on the
  // last R channels of every head.
  check_launch(kernels::rms_norm(qr, q_norm_.as<float>(), qr, T, q_lora_, eps_, s), l, "q_norm");
  {  // the query RoPE in the GEMV's epilogue when wq_b takes the shared-x launch (decode)
    const DeviceLinear* lins[] = {&wq_b_, indexes ? &i_wq_b_ : nullptr};
    float* const outs[] = {q, indexes ? ws.index_q.as<float>() : nullptr};
    const kernels::Fp8GemvRope rope{inv_freq_.as<float>(), head_dim_, R, pos0};
    if (!DeviceLinear::gemv_shared_x(lins, outs, qr, T, s, &rope))
      check_launch(kernels::rope_rotate(q, inv_freq_.as<float>(), T, heads_, head_dim_, R, pos0, 1,
                                        false, s),
                   l, "query RoPE");
  }
  profile_mark(prof, "attn q/kv", s);
  if (lane != nullptr) lane->join(s);
  // Step 3: compressed entries and the selection.
  const uint8_t* compressed = nullptr;
  int64_t n_entries = 0;
  const int32_t* index = nullptr;
  int topk = 0;
  if (compressed_branch) {
    profile_mark(prof, "attn compressor", s);  // on the lane: the wait for it
    const DeviceSource& src = seq.source.at(role_.kv_layer);
    DSV41_CHECK(src.layer == role_.kv_layer, kInternal, "layer {}: KV source {} has no state", l,
                role_.kv_layer);
    if (has_indexer_) select(T, pos0, src, ws, s);
    profile_mark(prof, "attn indexer+topk", s);
    auto it = ws.selection.find(has_indexer_ ? l : role_.index_layer);
    DSV41_CHECK(it != ws.selection.end(), kInternal, "layer {}: no selection of index source {}", l,
                role_.index_layer);
    compressed = src.compressed.as<uint8_t>();
    n_entries = src.n_entries;
    index = it->second.as<int32_t>();
    topk = index_topk_;
  }
  // Steps 4-6: window + selected entries + sink, inverse RoPE.
  float* o = ws.o.as<float>();
  check_launch(kernels::window_sparse_attention(
                   q, kv_packed, ring.ring.as<uint8_t>(), ring.capacity, compressed, n_entries,
                   index, topk, sink_.as<float>(), inv_freq_.as<float>(), o, T, heads_, head_dim_,
                   R, window_, pos0, ws.attn_part.data(), ws.attn_part.bytes(), s),
               l, "window_sparse_attention");
  profile_mark(prof, "attn core", s);
  output_projection(o, T, ws, out, s);
  // The ring keeps the newest `capacity` rows: slot of position p = p % capacity, copied in at
  // most two contiguous runs.
  const int64_t cap = ring.capacity, eb = ring.entry_bytes;
  for (int64_t t = ring_now ? T : std::max<int64_t>(0, T - cap); t < T;) {
    const int64_t slot = (pos0 + t) % cap, run = std::min(T - t, cap - slot);
    check_launch(cudaMemcpyAsync(ring.ring.as<uint8_t>() + slot * eb, kv_packed + t * eb, run * eb,
                                 cudaMemcpyDeviceToDevice, s),
                 l, "window ring write");
    t += run;
  }
}

kernels::KvRowOps DeviceAttention::window_row_ops(int64_t pos0, const DeviceWindow* ring) const {
  kernels::KvRowOps ops;
  ops.norm_w = kv_norm_.as<float>();
  ops.eps = eps_;
  ops.inv_freq = inv_freq_.as<float>();
  ops.rope_dim = rope_dim_;
  ops.pos0 = pos0;
  if (ring != nullptr) {
    ops.ring = ring->ring.as<uint8_t>();
    ops.ring_capacity = ring->capacity;
  }
  return ops;
}

// Step 7: z_g = u_g·Wo_a[g]ᵀ per group (u_g = the group's heads), out = z·Wo_bᵀ.
void DeviceAttention::output_projection(const float* o, int64_t T, ForwardWorkspace& ws, float* out,
                                        cudaStream_t s) const {
  const int l = role_.layer;
  const int64_t H = heads_, D = head_dim_;
  const int64_t G = o_groups_, L = o_lora_, gin = H * D / G;
  float* u = ws.u.as<float>();
  float* zg = ws.zg.as<float>();
  float* z = ws.z.as<float>();
  // Decode rows: the G groups in one launch (8 launches of 4 MB each ran at ~650 GB/s); longer
  // steps below the GEMM's row threshold (CudaForwardOptions::gemm_min_rows) 16 rows at a time.
  // gemv_grouped refuses every chunk or none (format and width), so a refusal is the first one.
  bool grouped = false;
  if (!wo_a_.takes_gemm(T)) {
    grouped = true;
    for (int64_t t0 = 0; t0 < T && grouped; t0 += kernels::kGemvMaxRows) {
      const int64_t r = std::min<int64_t>(kernels::kGemvMaxRows, T - t0);
      grouped = wo_a_.gemv_grouped(o + t0 * H * D, r, G, z + t0 * G * L, s);
    }
  }
  for (int64_t g = 0; g < G && !grouped; ++g) {
    if (T == 1 && gin % 4 == 0 && L % 4 == 0) {  // one row: contiguous, 16-byte aligned slices
      wo_a_.gemv_rows(o + g * gin, 1, g * L, (g + 1) * L, z + g * L, s);
      continue;
    }
    check_launch(cudaMemcpy2DAsync(u, gin * 4, o + g * gin, H * D * 4, gin * 4, T,
                                   cudaMemcpyDeviceToDevice, s),
                 l, "wo_a group gather");
    wo_a_.gemv_rows(u, T, g * L, (g + 1) * L, zg, s);
    check_launch(
        cudaMemcpy2DAsync(z + g * L, G * L * 4, zg, L * 4, L * 4, T, cudaMemcpyDeviceToDevice, s),
        l, "wo_a group scatter");
  }
  wo_b_.gemv(z, T, out, s);
}

void DeviceAttention::context_rows(const float* main_x, int64_t n, int64_t pos0, DeviceWindow& ring,
                                   ForwardWorkspace& ws, cudaStream_t s) const {
  const int l = role_.layer;
  DSV41_CHECK(n >= 1 && n <= ws.max_chunk && n <= ring.capacity, kInternal,
              "DSpark layer {}: {} context rows (workspace {}, ring {})", l, n, ws.max_chunk,
              ring.capacity);
  float* kv = ws.kv.as<float>();
  wkv_.gemv(main_x, n, kv, s);
  const kernels::KvRowOps ops = window_row_ops(pos0, &ring);  // FP8 into the ring slots
  check_launch(kernels::kv_norm_rope_quantize(KvFormat::kWindowFp8, kv, ops, nullptr,
                                              ws.kv_packed.as<uint8_t>(), n, head_dim_, s),
               l, "DSpark context rows");
}

void DeviceAttention::forward_block(const float* xn, int64_t K, int64_t pos0,
                                    const DeviceWindow& ring, ForwardWorkspace& ws, float* out,
                                    cudaStream_t s) const {
  const int l = role_.layer, R = rope_dim_;
  DSV41_CHECK(K >= 1 && K <= ws.max_chunk, kInternal, "DSpark layer {}: block of {} rows (max {})",
              l, K, ws.max_chunk);
  float* qr = ws.qr.as<float>();
  float* q = ws.q.as<float>();
  float* kv = ws.kv.as<float>();
  uint8_t* kv_packed = ws.kv_packed.as<uint8_t>();
  wq_a_.gemv(xn, K, qr, s);
  wkv_.gemv(xn, K, kv, s);
  check_launch(kernels::rms_norm(qr, q_norm_.as<float>(), qr, K, q_lora_, eps_, s), l, "q_norm");
  wq_b_.gemv(qr, K, q, s);
  check_launch(
      kernels::rope_rotate(q, inv_freq_.as<float>(), K, heads_, head_dim_, R, pos0, 1, false, s), l,
      "query RoPE");
  const kernels::KvRowOps ops = window_row_ops(pos0, nullptr);
  check_launch(kernels::kv_norm_rope_quantize(KvFormat::kWindowFp8, kv, ops, nullptr, kv_packed, K,
                                              head_dim_, s),
               l, "block K=V rows");
  const int64_t first = std::max<int64_t>(0, pos0 - window_), n_ctx = pos0 - first;
  DSV41_CHECK(n_ctx <= ring.capacity, kInternal,
              "DSpark layer {}: {} context rows exceed the ring of {}", l, n_ctx, ring.capacity);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim_));
  float* o = ws.o.as<float>();
  check_launch(
      kernels::dspark_block_attention(q, ring.ring.as<uint8_t>(), ring.capacity, first, n_ctx,
                                      kv_packed, sink_.as<float>(), inv_freq_.as<float>(), o, K,
                                      heads_, head_dim_, R, pos0, scale, s),
      l, "dspark_block_attention");
  output_projection(o, K, ws, out, s);
}

}  // namespace dsv41::cuda
