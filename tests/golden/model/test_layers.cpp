// Teacher-forced per-layer check (tests/fixtures/golden/tiny40/README.md
// "Recommended tolerances and protocol" 1): layer l is fed the oracle's H[l-1],
// pre[l-1], Engram hash ids and, for Reuse / Reindex layers, the oracle's CSA
// caches, selections and candidate mask; every recorded tensor of the layer
// must agree within abs 1e-5 and every selection exactly.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "golden_case.hpp"
#include "support/tolerance.hpp"

namespace dsv41::test {
namespace {

constexpr double kTol = 1e-5;

// [L, T, ...] golden tensor -> the slice of layer l.
std::vector<float> layer_slice(const std::vector<float>& all, int l, size_t per_layer) {
  return std::vector<float>(all.begin() + l * per_layer, all.begin() + (l + 1) * per_layer);
}

double g_worst = 0;  // largest difference seen in the current case (printed for docs/testing.md)
std::string g_worst_what;

void check(const std::string& what, const std::vector<float>& got, const std::vector<float>& want) {
  const double d = max_abs_diff(got.data(), want.data(), std::min(got.size(), want.size()));
  if (d > g_worst) {
    g_worst = d;
    g_worst_what = what;
  }
  REQUIRE(got.size() == want.size());
  require_close(what, got, want, got.size(), kTol);
}

// Golden CSA caches of KV source s into the state (Reuse / Reindex layers read
// them).
void inject_source(GoldenCase& g, int s, CsaSourceState& src) {
  const std::string p = "debug.csa.L" + std::to_string(s) + ".";
  src.inject(g.f32(p + "compressed_kv"), g.f32(p + "index_k"));
}

void check_routing(const std::string& where, const Routing& r, const std::vector<float>& ids,
                   const std::vector<float>& weights, const std::vector<float>& biased, int64_t T,
                   int k) {
  check(where + " router_biased_scores", r.biased_scores, biased);
  for (int64_t t = 0; t < T; ++t) {
    std::set<int> got, want;
    for (int i = 0; i < k; ++i) {
      got.insert(r.ids[t * k + i]);
      want.insert(static_cast<int>(ids[t * k + i]));
    }
    INFO(where << " token " << t);
    REQUIRE(got == want);
    for (int i = 0; i < k; ++i) {  // weights aligned by expert id
      const int e = static_cast<int>(ids[t * k + i]);
      const int j =
          static_cast<int>(std::find(r.ids.begin() + t * k, r.ids.begin() + (t + 1) * k, e) -
                           (r.ids.begin() + t * k));
      REQUIRE(std::fabs(r.weights[t * k + j] - weights[t * k + i]) <= kTol);
    }
  }
}

void teacher_forced(const std::string& name) {
  GoldenCase g(name);
  Transformer& m = g.model();
  const ModelConfig& cfg = m.config();
  const TextConfig& tc = cfg.text;
  const int L = tc.num_hidden_layers, hc = m.hc(), k = tc.num_experts_per_tok;
  const int64_t D = m.dim();
  const std::vector<int32_t> ids = g.i32("prompt1.input_ids");
  const int64_t T = static_cast<int64_t>(ids.size());
  const size_t nH = T * hc * D, nX = T * D, nP = T * hc, nC = T * hc * hc;
  const auto H_all = g.f32("debug.H"), pre_all = g.f32("debug.pre");
  const auto hash_f = g.f32("debug.engram_hash_ids");
  const int64_t cols = g.shape("debug.engram_hash_ids")[2];
  const std::vector<int64_t> hash(hash_f.begin(), hash_f.end());
  std::map<std::string, std::vector<float>> per_layer;
  for (const char* n :
       {"mix_attn_pre", "mix_attn_post", "mix_attn_comb", "mix_ffn_pre", "mix_ffn_post",
        "mix_ffn_comb", "attn_collapsed", "attn_normed", "attn_out", "ffn_collapsed", "ffn_normed",
        "ffn_out", "router_biased_scores", "router_ids", "router_weights"})
    per_layer[n] = g.f32(std::string("debug.") + n);
  int engram_slot = 0;
  for (int l = 0; l < L; ++l) {
    const LayerRole& role = cfg.roles[l];
    const std::string where = name + " layer " + std::to_string(l);
    INFO(where << " (" << attn_role_name(role.role) << ")");
    SequenceState st = m.new_sequence();
    StepSelections sel;
    if (role.ratio > 0 && !role.kv_source)
      inject_source(g, role.kv_layer, st.attn.source[role.kv_layer]);
    if (role.role == AttnRole::kReuse) {
      IndexSelection& s = sel.index[role.index_layer];
      s.T = T;
      s.topk = tc.index_topk;
      s.index = g.i32("debug.index_sel.L" + std::to_string(role.index_layer));
    }
    if (role.role == AttnRole::kReindex) {
      CandidateMask& c = sel.candidates[role.candidate_layer];
      const std::string n = "debug.candidates.L" + std::to_string(role.candidate_layer);
      c.T = T;
      c.n_entries = g.shape(n)[1];
      const auto mask = g.i32(n);
      c.mask.assign(mask.begin(), mask.end());
    }
    std::vector<float> H(nH), pre;
    if (l == 0) {
      for (int64_t t = 0; t < T; ++t)
        for (int j = 0; j < hc; ++j) m.weights().embed_row(ids[t], H.data() + (t * hc + j) * D);
      pre = hc_initial_pre(HcShape{hc, D}, T);
    } else {
      H = layer_slice(H_all, l - 1, nH);
      pre = layer_slice(pre_all, l - 1, nP);
    }
    const int64_t* hash_l = nullptr;
    if (role.engram) hash_l = hash.data() + (engram_slot++) * T * cols;
    LayerTrace tr;
    m.run_layer(l, T, 0, H.data(), pre, hash_l, nullptr, st, sel, &tr);

    if (role.engram)
      check(where + " engram_out", tr.engram_out, g.f32("debug.engram_out.L" + std::to_string(l)));
    check(where + " mix_attn_pre", tr.mix_attn.pre, layer_slice(per_layer["mix_attn_pre"], l, nP));
    check(where + " mix_attn_post", tr.mix_attn.post,
          layer_slice(per_layer["mix_attn_post"], l, nP));
    check(where + " mix_attn_comb", tr.mix_attn.comb,
          layer_slice(per_layer["mix_attn_comb"], l, nC));
    check(where + " attn_collapsed", tr.attn_collapsed,
          layer_slice(per_layer["attn_collapsed"], l, nX));
    check(where + " attn_normed", tr.attn_normed, layer_slice(per_layer["attn_normed"], l, nX));
    if (role.index_source) {
      const std::string s = ".L" + std::to_string(l);
      check(where + " index_scores", tr.attention.index_scores, g.f32("debug.index_scores" + s));
      const auto want = g.i32("debug.index_sel" + s);
      REQUIRE(sel.index.count(l) == 1);
      REQUIRE(sel.index[l].index == want);
      if (role.candidate_source) {
        check(where + " candidate_block_scores", tr.attention.candidate_block_scores,
              g.f32("debug.candidate_block_scores" + s));
        const auto cm = g.i32("debug.candidates" + s);
        REQUIRE(sel.candidates.count(l) == 1);
        REQUIRE(std::vector<int32_t>(sel.candidates[l].mask.begin(),
                                     sel.candidates[l].mask.end()) == cm);
      }
    }
    if (role.kv_source) {  // the caches must be identical (FP4 values; 1e-5
                           // covers none flipping)
      const std::string p = "debug.csa.L" + std::to_string(l) + ".";
      check(where + " compressed_kv", st.attn.source[l].compressed_fp32(),
            g.f32(p + "compressed_kv"));
      check(where + " index_k", st.attn.source[l].index_keys_fp32(), g.f32(p + "index_k"));
    }
    check(where + " attn_out", tr.attn_out, layer_slice(per_layer["attn_out"], l, nX));
    check(where + " mix_ffn_pre", tr.mix_ffn.pre, layer_slice(per_layer["mix_ffn_pre"], l, nP));
    check(where + " mix_ffn_post", tr.mix_ffn.post, layer_slice(per_layer["mix_ffn_post"], l, nP));
    check(where + " mix_ffn_comb", tr.mix_ffn.comb, layer_slice(per_layer["mix_ffn_comb"], l, nC));
    check(where + " ffn_collapsed", tr.ffn_collapsed,
          layer_slice(per_layer["ffn_collapsed"], l, nX));
    check(where + " ffn_normed", tr.ffn_normed, layer_slice(per_layer["ffn_normed"], l, nX));
    const size_t nE = T * tc.n_routed_experts, nK = T * k;
    check_routing(where, tr.routing, layer_slice(per_layer["router_ids"], l, nK),
                  layer_slice(per_layer["router_weights"], l, nK),
                  layer_slice(per_layer["router_biased_scores"], l, nE), T, k);
    check(where + " ffn_out", tr.ffn_out, layer_slice(per_layer["ffn_out"], l, nX));
    check(where + " H", H, layer_slice(H_all, l, nH));
    check(where + " pre", pre, layer_slice(pre_all, l, nP));
  }
  std::printf("%s teacher-forced: worst difference %.3g (%s)\n", name.c_str(), g_worst,
              g_worst_what.c_str());
}

TEST_CASE("model: tiny8 teacher-forced layers match the oracle within 1e-5", "[golden][model]") {
  teacher_forced("tiny8");
}

TEST_CASE("model: tiny40 teacher-forced layers match the oracle within 1e-5", "[golden][model]") {
  teacher_forced("tiny40");
}

}  // namespace
}  // namespace dsv41::test
