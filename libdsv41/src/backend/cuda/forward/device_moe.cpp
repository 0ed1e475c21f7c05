#include "backend/cuda/forward/device_moe.hpp"

#include <algorithm>
#include <map>
#include <string>

#include "backend/cuda/forward/launch_check.hpp"
#include "core/check.hpp"
#include "dsv41k/moe.hpp"

namespace dsv41::cuda {
namespace {

DeviceBuffer pointer_table(const std::vector<const uint8_t*>& p) {
  DeviceBuffer b(p.size() * sizeof(const uint8_t*));
  b.upload(p.data(), p.size() * sizeof(const uint8_t*));
  return b;
}

}  // namespace

void DeviceMoe::set_prefill_x(kernels::GemmX x) {
  prefill_x_ = x;
  for (auto* v : {&w1_, &w2_, &w3_})
    for (DeviceLinear& lin : *v) lin.set_prefill_x(x);
  for (DeviceLinear* lin : {&shared_w1_, &shared_w2_, &shared_w3_, &shared_w13_})
    lin->set_prefill_x(x);
}

void DeviceMoe::set_gemv_scratch(void* p, size_t bytes, int tc_min_rows, int tc_decode_min_rows,
                                 int tc_decode_max_rows) {
  scratch_ = p;
  scratch_bytes_ = bytes;
  tc_min_rows_ = tc_min_rows;
  tc_decode_min_rows_ = tc_decode_min_rows;
  tc_decode_max_rows_ = tc_decode_max_rows;
  for (DeviceLinear* lin : {&gate_, &shared_w1_, &shared_w2_, &shared_w3_, &shared_w13_})
    lin->set_gemv_scratch(p, bytes);
}

void DeviceMoe::set_gemm(int dense_min_rows, int routed_min_rows, int exl3_min_rows,
                         int long_tile_rows, int verify_tile_rows, void* workspace, size_t bytes) {
  routed_gemm_min_rows_ = routed_min_rows;
  exl3_gemm_min_rows_ = exl3_min_rows;
  long_tile_rows_ = long_tile_rows;
  verify_tile_rows_ = verify_tile_rows;
  auto set = [&](DeviceLinear& lin) {
    lin.set_gemm_min_rows(dense_min_rows);
    lin.set_gemm_workspace(workspace, bytes);
  };
  for (auto* v : {&w1_, &w2_, &w3_})
    for (DeviceLinear& lin : *v) set(lin);
  for (DeviceLinear* lin : {&gate_, &shared_w1_, &shared_w2_, &shared_w3_, &shared_w13_}) set(*lin);
}

void DeviceMoe::set_shared_lane(SideStream* lane, void* scratch, size_t bytes) {
  shared_lane_ = lane;
  if (lane != nullptr)
    for (DeviceLinear* lin : {&shared_w1_, &shared_w2_, &shared_w3_, &shared_w13_})
      lin->set_gemv_scratch(scratch, bytes);
}

DeviceMoe DeviceMoe::upload(const MoeWeights& w, const MoeShape& s, int layer,
                            const exl3::ExpertBank* bank) {
  DeviceMoe d;
  d.layer_ = layer;
  d.shape_ = s;
  const std::string p = "layers." + std::to_string(layer) + ".ffn.";
  // A tensor-parallel rank holds routed experts [expert_begin, expert_end): routing runs over
  // all of them (replicated gate), the permutation keeps the local ones, and y is this rank's
  // partial sum (routed share + its slice of the shared expert, docs/tp.md).
  DSV41_CHECK(0 <= w.expert_begin && w.expert_begin < w.expert_end && w.expert_end <= s.n_experts,
              kInternal, "{}experts: rank range [{}, {}) outside [0, {})", p, w.expert_begin,
              w.expert_end, s.n_experts);
  d.expert_begin_ = w.expert_begin;
  d.expert_end_ = w.expert_end;
  DSV41_CHECK(s.n_experts <= kernels::kMoeMaxExperts && s.top_k <= kernels::kMoeMaxTopK,
              kInvalidArgument, "{}: {} experts / top-{} exceed the CUDA MoE limits ({} / {})", p,
              s.n_experts, s.top_k, kernels::kMoeMaxExperts, kernels::kMoeMaxTopK);
  d.gate_ = DeviceLinear::from_f32(w.gate, s.n_experts, s.dim, p + "gate.weight");
  d.bias_ = upload_f32(w.bias);
  d.bias_vl_ = upload_f32(w.bias_vl.empty() ? w.bias : w.bias_vl);
  d.inter_ = s.inter;
  for (int e = w.expert_begin; e < w.expert_end && d.inter_ == 0; ++e)
    if (w.experts.at(e).w1.bound()) d.inter_ = w.experts[e].w1.out_features();
  DSV41_CHECK(d.inter_ > 0, kInvalidArgument,
              "{}experts: MoeShape.inter is 0 and no FP4 expert gives the routed width", p);
  if (bank != nullptr)
    d.exl3_ =
        DeviceExl3Experts::upload(*bank, layer, w.expert_begin, w.expert_end, s.dim, d.inter_);
  std::vector<const uint8_t*> w1, s1, w2, s2, w3, s3;  // local index e - expert_begin
  // Host w1 bytes -> the local index that uploaded them: experts of a synthetic expert pool bind
  // the same mapped bytes (TextConfig::synthetic_expert_pool) and share one device copy (384
  // copies of a 32-expert pool would not fit the GPU the pool was sized for).
  std::map<const uint8_t*, size_t> uploaded;
  for (int e = w.expert_begin; e < w.expert_end; ++e) {
    if (d.exl3_.has(e)) {  // computed by the EXL3 tables: null here
      for (auto* v : {&w1, &s1, &w2, &s2, &w3, &s3}) v->push_back(nullptr);
      d.w1_.emplace_back();
      d.w2_.emplace_back();
      d.w3_.emplace_back();
      continue;
    }
    const ExpertWeights& ex = w.experts.at(e);
    const std::string pe = p + "experts." + std::to_string(e) + ".";
    for (const auto& [lin, name] : {std::pair{&ex.w1, "w1"}, {&ex.w2, "w2"}, {&ex.w3, "w3"}})
      DSV41_CHECK(lin->bound() && lin->format() == WeightFormat::kFp4Row, kUnsupported,
                  "{}{}: the CUDA backend runs release FP4 or EXL3-bank experts only (unbound, "
                  "or another format)",
                  pe, name);
    DSV41_CHECK(ex.w1.out_features() == d.inter_ && ex.w1.in_features() == s.dim, kCorruptFile,
                "{}w1: [{}, {}], the MoE needs [{}, {}]", pe, ex.w1.out_features(),
                ex.w1.in_features(), d.inter_, s.dim);
    const auto it = uploaded.find(ex.w1.weight_bytes());
    const ExpertWeights* src = it != uploaded.end()
                                   ? &w.experts.at(w.expert_begin + static_cast<int>(it->second))
                                   : nullptr;
    if (src != nullptr && src->w2.weight_bytes() == ex.w2.weight_bytes() &&
        src->w3.weight_bytes() == ex.w3.weight_bytes()) {
      const size_t j = it->second;
      for (auto* v : {&w1, &s1, &w2, &s2, &w3, &s3}) {
        const uint8_t* shared = (*v)[j];
        v->push_back(shared);
      }
      d.w1_.emplace_back();
      d.w2_.emplace_back();
      d.w3_.emplace_back();
      ++d.n_alias_;
      continue;
    }
    uploaded.emplace(ex.w1.weight_bytes(), d.w1_.size());
    d.w1_.push_back(DeviceLinear::upload(ex.w1, pe + "w1"));
    d.w2_.push_back(DeviceLinear::upload(ex.w2, pe + "w2"));
    d.w3_.push_back(DeviceLinear::upload(ex.w3, pe + "w3"));
    w1.push_back(d.w1_.back().weight());
    s1.push_back(d.w1_.back().scale());
    w2.push_back(d.w2_.back().weight());
    s2.push_back(d.w2_.back().scale());
    w3.push_back(d.w3_.back().weight());
    s3.push_back(d.w3_.back().scale());
    d.has_fp4_ = true;
  }
  d.w1_table_ = pointer_table(w1);
  d.w1_scales_ = pointer_table(s1);
  d.w2_table_ = pointer_table(w2);
  d.w2_scales_ = pointer_table(s2);
  d.w3_table_ = pointer_table(w3);
  d.w3_scales_ = pointer_table(s3);
  d.shared_w2_ = DeviceLinear::upload(w.shared.w2, p + "shared_experts.w2");
  d.shared_inter_ = w.shared.w1.out_features();
  d.shared_stacked_ = DeviceLinear::stackable(w.shared.w1, w.shared.w3) &&
                      w.shared.w3.out_features() == d.shared_inter_;
  if (d.shared_stacked_) {
    d.shared_w13_ = DeviceLinear::stack(w.shared.w1, w.shared.w3, p + "shared_experts.w1+w3");
  } else {
    d.shared_w1_ = DeviceLinear::upload(w.shared.w1, p + "shared_experts.w1");
    d.shared_w3_ = DeviceLinear::upload(w.shared.w3, p + "shared_experts.w3");
  }
  return d;
}

uint64_t DeviceMoe::device_bytes() const {
  uint64_t b = gate_.bytes() + bias_.bytes() + bias_vl_.bytes() + shared_w1_.bytes() +
               shared_w2_.bytes() + shared_w3_.bytes() + shared_w13_.bytes() + exl3_.device_bytes();
  for (size_t e = 0; e < w1_.size(); ++e) b += w1_[e].bytes() + w2_[e].bytes() + w3_[e].bytes();
  return b;
}

uint64_t DeviceMoe::expert_bytes() const {
  uint64_t b = exl3_.expert_bytes_total();
  for (size_t e = 0; e < w1_.size(); ++e) b += w1_[e].bytes() + w2_[e].bytes() + w3_[e].bytes();
  const int resident = resident_experts();
  return resident <= 0 ? 0 : b / static_cast<uint64_t>(resident);
}

void DeviceMoe::forward(const float* xn, int64_t T, const uint8_t* flags, ForwardWorkspace& ws,
                        float* y, cudaStream_t s, StepProfile* prof) const {
  const int l = layer_, E = shape_.n_experts, k = shape_.top_k;
  const int El = expert_end_ - expert_begin_;  // this rank's experts (E at world 1)
  const int64_t D = shape_.dim;
  DSV41_CHECK(T >= 1 && T <= ws.max_chunk, kInternal, "layer {}: chunk of {} tokens (max {})", l, T,
              ws.max_chunk);
  float* logits = ws.logits_e.as<float>();
  int32_t* ids = ws.route_ids.as<int32_t>();
  float* rw = ws.route_w.as<float>();
  int32_t* counts = ws.counts.as<int32_t>();
  int32_t* offsets = ws.offsets.as<int32_t>();
  int32_t* slot_token = ws.slot_token.as<int32_t>();
  float* slot_weight = ws.slot_weight.as<float>();
  int32_t* inv = ws.inv.as<int32_t>();
  float* xs = ws.xs.as<float>();
  float* ys = ws.ys.as<float>();
  float* g = ws.g.as<float>();
  float* gu = g + ws.slots * inter_;  // the up rows: y_row_shift = slots in their descriptors
  // Shared expert, weight 1: only xn in common with the routed path, so on the lane it runs
  // beside the router chain (latency-bound: ~40 us per layer at decode) and the routed experts.
  // Decode and verify steps only: beside a prefill chunk's routed GEMMs the shared expert's
  // GEMMs took SMs from them (H200, 2048-token chunk: routed 367 -> 403 ms, shared + routed 427 ->
  // 446 ms; docs/perf.md stop 29).
  SideStream* const lane = T <= kernels::kMoeGemvMaxRows ? shared_lane_ : nullptr;
  cudaStream_t ss = s;
  if (lane != nullptr) {
    lane->fork(s);
    ss = lane->get();
  }
  float* sg = ws.shared_g.as<float>();
  float* su = ws.shared_u.as<float>();
  float* sy = ws.shared_y.as<float>();
  const int64_t I = shared_inter_;
  if (shared_stacked_ && T == 1) {  // one launch: sg = [g | u] of the token
    shared_w13_.gemv(xn, 1, sg, ss);
    su = sg + I;
  } else if (shared_stacked_) {
    shared_w13_.gemv_rows(xn, T, 0, I, sg, ss);
    shared_w13_.gemv_rows(xn, T, I, 2 * I, su, ss);
  } else {
    shared_w1_.gemv(xn, T, sg, ss);
    shared_w3_.gemv(xn, T, su, ss);
  }
  check_launch(
      kernels::moe_swiglu(sg, su, nullptr, nullptr, T, shared_inter_, shape_.swiglu_limit, ss), l,
      "shared expert SwiGLU");
  shared_w2_.gemv(sg, T, sy, ss);
  if (lane != nullptr) lane->done();
  auto* dgu = ws.desc_gate_up.as<kernels::MoeGemvDesc>();
  auto* dd = ws.desc_down.as<kernels::MoeGemvDesc>();
  auto* xgu = ws.desc_x_gate_up.as<kernels::MoeGemvDesc>();
  auto* xd = ws.desc_x_down.as<kernels::MoeGemvDesc>();
  // Descriptors for this call's T (not the workspace's max_chunk): empty ones still cost a launch
  // slot per block row. Steps of moe_gemm_min_rows+ rows (default 1409; a layer with EXL3
  // experts: moe_exl3_gemm_min_rows, 97) take 64-row tiles and the GEMMs (FP4: tensor-core tiles
  // decoded to bf16; EXL3: each weight decoded once per 64 rows), shorter ones the GEMVs: steps
  // of 17+ rows of an FP4-only layer in tiles of long_tile_rows_ (default 8: the decode
  // tensor-core GEMV's rows per pass), its decode and verify steps in tiles of
  // verify_tile_rows_ (default 16: one tile per expert); a layer with EXL3 experts one 16-row tile
  // per expert.
  const bool has_x = !exl3_.empty();
  const bool gemm = T >= (has_x ? exl3_gemm_min_rows_ : routed_gemm_min_rows_);
  const int tile = gemm                           ? kernels::kMoeGemmTileRows
                   : has_x                        ? kernels::kMoeGemvMaxRows
                   : T > kernels::kMoeGemvMaxRows ? long_tile_rows_
                                                  : verify_tile_rows_;
  const int64_t cap = kernels::moe_tile_capacity(T, k, El, tile);
  DSV41_CHECK(cap <= ws.desc_capacity && ws.slots <= 0x7FFFFFFF, kInternal,
              "layer {}: {} MoE descriptors exceed the {} of the workspace", l, cap,
              ws.desc_capacity);
  auto table = [](const DeviceBuffer& b) { return b.as<const uint8_t* const>(); };
  const auto up_shift = static_cast<int32_t>(ws.slots);
  // Per format: w1 then w3 in one array (one grouped launch for gate and up), w2 apart (it reads
  // g). An EXL3 record table doubles as its own scale table (the builder only copies entries).
  // Both formats' tables are written by one launch.
  kernels::MoeTileSet sets[6];
  int n_sets = 0;
  if (has_fp4_) {
    sets[n_sets++] = {table(w1_table_), table(w1_scales_), 0, dgu};
    sets[n_sets++] = {table(w3_table_), table(w3_scales_), up_shift, dgu + cap};
    sets[n_sets++] = {table(w2_table_), table(w2_scales_), 0, dd};
  }
  if (has_x) {
    using exl3::ExpertProj;
    const auto xt = [&](ExpertProj p) { return exl3_.table(p); };
    sets[n_sets++] = {xt(ExpertProj::kGate), xt(ExpertProj::kGate), 0, xgu};
    sets[n_sets++] = {xt(ExpertProj::kUp), xt(ExpertProj::kUp), up_shift, xgu + cap};
    sets[n_sets++] = {xt(ExpertProj::kDown), xt(ExpertProj::kDown), 0, xd};
  }
  gate_.gemv(xn, T, logits, s);
  const int32_t* n_slots = offsets + El;
  // A bucket holds each token at most once, so no descriptor has more than T rows.
  const int max_rows =
      static_cast<int>(std::min<int64_t>(T, gemm ? kernels::kMoeGemvMaxRows : tile));
  // Steps of tc_min_rows_ (default 5) ..16 rows: the tensor-core GEMV (x split into the
  // transformer's scratch) when the scratch is set; its x rows are every slot [0, T·k). Below 5
  // rows the CUDA-core GEMV was faster (H200, routed experts of a 40-layer step, CUDA-core /
  // tensor-core ms: 1 row 3.01 / 4.45, 2 rows 6.32 / 7.49, 4 rows 11.4 / 13.3, 6 rows 17.4 /
  // 14.3, 16 rows 58.3 / 32.7): its time follows the distinct experts' bytes, the CUDA-core
  // kernel's the rows per expert as well.
  const int64_t x_rows = T * k;
  const auto tc_gemv = [&](int64_t in) {
    return !gemm && max_rows >= tc_min_rows_ && scratch_ != nullptr && in % 128 == 0 &&
           kernels::moe_grouped_fp4_gemv_tc_workspace_bytes(x_rows, in) <= scratch_bytes_;
  };
  // Steps of tc_decode_min_rows_ (default 2)..tc_decode_max_rows_ rows: the decode tensor-core
  // GEMV (its x split staged per block, in k chunks where 3+ rows of 5120 exceed its shared
  // memory; no extra launch), ahead of both kernels above (H100, full-geometry checkpoint, routed
  // experts of a 40-layer step in ms, without / with it: 1 row 2.85 / 3.48, 2 rows 6.20 / 5.96, 6
  // rows 19.17 / 17.75 with w2 on it; docs/perf.md "Stop 33").
  const auto tc_decode = [&](int64_t in) {
    return !gemm && max_rows >= tc_decode_min_rows_ && max_rows <= tc_decode_max_rows_ &&
           kernels::moe_grouped_fp4_gemv_tc_decode_supported(max_rows, in);
  };
  // FP4-only decode steps on the decode tensor-core GEMV or on the CUDA-core GEMV with x staged:
  // the gate+up launch reads the tokens' rows through slot_token itself, so no moe_gather launch
  // sits on the critical path (4.0 us per layer under ncu, H100).
  const bool decode_gu = has_fp4_ && tc_decode(D);
  const bool fold_gather =
      has_fp4_ && !has_x && !gemm &&
      (decode_gu || (!tc_gemv(D) && kernels::moe_grouped_fp4_gemv_gathered_supported(max_rows, D)));
  if (T <= kernels::kMoeDispatchMaxTokens && El <= kernels::kMoeDispatchMaxLocalExperts) {
    // Decode and verify steps: route, permutation and descriptors in one launch (the same bytes
    // as the three below; two launch boundaries fewer on the critical path per layer).
    const kernels::MoeRouteArgs r{
        logits,           bias_.as<float>(),     bias_vl_.as<float>(),        flags, E, k,
        shape_.gate_temp, shape_.norm_topk_prob, shape_.routed_scaling_factor};
    check_launch(
        kernels::moe_route_dispatch(r, T, ids, rw, expert_begin_, expert_end_, counts, offsets,
                                    slot_token, slot_weight, inv, sets, n_sets, tile, cap, s),
        l, "moe_route_dispatch");
    profile_mark(prof, "moe gate+route", s);
    if (!fold_gather)
      check_launch(kernels::moe_gather(xn, slot_token, n_slots, xs, T * k, D, s), l, "moe_gather");
  } else {
    check_launch(kernels::moe_route(logits, bias_.as<float>(), bias_vl_.as<float>(), flags, ids, rw,
                                    nullptr, T, E, k, shape_.gate_temp, shape_.norm_topk_prob,
                                    shape_.routed_scaling_factor, s),
                 l, "moe_route");
    check_launch(kernels::moe_permute(ids, rw, T, k, expert_begin_, expert_end_, counts, offsets,
                                      slot_token, slot_weight, inv, s),
                 l, "moe_permute");
    profile_mark(prof, "moe gate+route", s);
    if (!fold_gather)
      check_launch(kernels::moe_gather(xn, slot_token, n_slots, xs, T * k, D, s), l, "moe_gather");
    check_launch(kernels::moe_expert_tile_sets(counts, offsets, El, sets, n_sets, tile, cap, s), l,
                 "moe_expert_tile_sets");
  }
  profile_mark(prof, "moe permute+descriptors", s);
  const int n_desc = static_cast<int>(cap);
  auto grouped = [&](const kernels::MoeGemvDesc* d, int n, const float* in_rows, float* out_rows,
                     int64_t out, int64_t in, const char* what) {
    if (tc_decode(in)) {
      check_launch(kernels::moe_grouped_fp4_gemv_tc_decode(d, n, max_rows, in_rows, nullptr,
                                                           out_rows, out, in, s),
                   l, what);
      return;
    }
    // (Slots × width beyond the scratch, not at the released dims, stay on the CUDA-core kernel.)
    if (tc_gemv(in)) {
      check_launch(kernels::moe_grouped_fp4_gemv_tc(d, n, max_rows, in_rows, x_rows, out_rows, out,
                                                    in, scratch_, scratch_bytes_, s),
                   l, what);
      return;
    }
    check_launch(
        gemm ? kernels::moe_grouped_fp4_gemm(d, n, in_rows, out_rows, out, in, prefill_x_, s)
             : kernels::moe_grouped_fp4_gemv(d, n, max_rows, in_rows, out_rows, out, in, s),
        l, what);
  };
  // EXL3: the bank matrices are (pad128(in), pad128(out)); x rows zero-extended, y rows cut.
  auto grouped_x = [&](const kernels::MoeGemvDesc* d, int n, const float* in_rows, int64_t in,
                       float* out_rows, int64_t out, int64_t k_pad, int64_t n_pad,
                       const char* what) {
    check_launch(gemm ? kernels::moe_grouped_exl3_gemm(d, n, exl3_.max_k(), in_rows, in, out_rows,
                                                       out, k_pad, n_pad, s)
                      : kernels::moe_grouped_exl3_gemv(d, n, max_rows, exl3_.max_k(), in_rows, in,
                                                       out_rows, out, k_pad, n_pad, s),
                 l, what);
  };
  const int64_t Dp = exl3_.hidden_padded(), Ip = exl3_.inter_padded();
  if (fold_gather && decode_gu)
    check_launch(kernels::moe_grouped_fp4_gemv_tc_decode(dgu, 2 * n_desc, max_rows, xn, slot_token,
                                                         g, inter_, D, s),
                 l, "grouped expert w1+w3 (decode tensor cores, gathered)");
  else if (fold_gather)
    check_launch(kernels::moe_grouped_fp4_gemv_gathered(dgu, 2 * n_desc, max_rows, xn, slot_token,
                                                        g, inter_, D, s),
                 l, "grouped expert w1+w3 (gathered)");
  else if (has_fp4_)
    grouped(dgu, 2 * n_desc, xs, g, inter_, D, "grouped expert w1+w3");
  if (has_x) grouped_x(xgu, 2 * n_desc, xs, D, g, inter_, Dp, Ip, "grouped EXL3 expert w1+w3");
  check_launch(
      kernels::moe_swiglu(g, gu, slot_weight, n_slots, T * k, inter_, shape_.swiglu_limit, s), l,
      "moe_swiglu");
  if (has_fp4_) grouped(dd, n_desc, g, ys, D, inter_, "grouped expert w2");
  if (has_x) grouped_x(xd, n_desc, g, inter_, ys, D, Ip, Dp, "grouped EXL3 expert w2");
  profile_mark(prof, "moe routed experts", s);
  if (lane != nullptr) lane->join(s);
  profile_mark(prof, "moe shared expert", s);  // on the lane: the wait for it
  check_launch(kernels::moe_combine(ys, ids, inv, sy, y, T, k, D, s), l, "moe_combine");
}

}  // namespace dsv41::cuda
