// End-to-end (free-running) checks against the oracle
// (tests/fixtures/golden/tiny40/README.md, protocol 2): tiny8 logits within abs
// 2e-3 with identical argmax for one-shot prefill, decode, chunked prefill and
// greedy continuation; tiny40's end-to-end difference is recorded and explained
// from the per-layer tensors (the oracle itself is unstable there).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <set>

#include "golden_case.hpp"
#include "model/attention/kv_quant.hpp"
#include "model/attention/rope.hpp"
#include "model/rms_norm.hpp"
#include "support/tolerance.hpp"

namespace dsv41::test {
namespace {

constexpr double kTiny8Tol = 2e-3;

void check_logits(const std::string& what, const std::vector<float>& got,
                  const std::vector<float>& want, int64_t V) {
  REQUIRE(got.size() == want.size());
  std::printf("tiny8 %s: max |logits - oracle| %.3g\n", what.c_str(),
              max_abs_diff(got.data(), want.data(), got.size()));
  require_close(what, got, want, got.size(), kTiny8Tol);
  for (size_t r = 0; r < got.size() / V; ++r) {
    INFO(what << " row " << r);
    REQUIRE(argmax(got.data() + r * V, V) == argmax(want.data() + r * V, V));
  }
}

std::vector<float> run(Transformer& m, const std::vector<int32_t>& ids,
                       const std::vector<int64_t>& chunks) {
  SequenceState st = m.new_sequence();
  std::vector<float> out;
  size_t at = 0;
  for (int64_t c : chunks) {
    std::vector<float> l = m.forward(st, std::span<const int32_t>(ids.data() + at, c));
    out.insert(out.end(), l.begin(), l.end());
    at += c;
  }
  REQUIRE(at == ids.size());
  REQUIRE(st.pos == static_cast<int64_t>(ids.size()));
  return out;
}

TEST_CASE("model: tiny8 end to end matches the oracle within 2e-3", "[golden][model]") {
  GoldenCase g("tiny8");
  Transformer& m = g.model();
  const int64_t V = m.config().text.vocab_size;
  for (int p = 0; p < 3; ++p) {
    const std::string n = "prompt" + std::to_string(p);
    const auto ids = g.i32(n + ".input_ids");
    check_logits(n + ".logits", run(m, ids, {static_cast<int64_t>(ids.size())}),
                 g.f32(n + ".logits"), V);
  }
  const auto prompt1 = g.i32("prompt1.input_ids");
  check_logits("chunked.plan0", run(m, prompt1, {16, 16, 5}), g.f32("chunked.plan0.logits"), V);
  check_logits("chunked.plan1", run(m, prompt1, {7, 13, 17}), g.f32("chunked.plan1.logits"), V);

  const auto dec = g.i32("decode.input_ids");  // prompt1 + 12 continuation tokens
  check_logits("decode.full_logits", run(m, dec, {static_cast<int64_t>(dec.size())}),
               g.f32("decode.full_logits"), V);
  std::vector<int64_t> steps{37};
  steps.resize(13, 1);
  const std::vector<float> stepped = run(m, dec, steps);
  check_logits("decode.step_logits", std::vector<float>(stepped.begin() + 37 * V, stepped.end()),
               g.f32("decode.step_logits"), V);

  // Greedy: prefill prompt1, then feed back the argmax 12 times.
  SequenceState st = m.new_sequence();
  std::vector<float> logits = m.forward(st, prompt1);
  const auto want = g.i32("greedy.tokens");
  for (size_t i = 0; i < want.size(); ++i) {
    const int32_t next = argmax(logits.data() + logits.size() - V, V);
    INFO("greedy step " << i);
    REQUIRE(next == want[i]);
    const int32_t one[1] = {next};
    logits = m.forward(st, one);
  }
}

// Window K=V latents of layer l (§2.2 step 2) from attention inputs x [T, D],
// before and after the FP8 fake-quantiser; returns how many FP8 values differ
// between inputs a and b although the pre-quantisation values differ by at most
// `pre_diff` (a rounding-boundary flip).
int window_fp8_flips(const Transformer& m, int l, const std::vector<float>& a,
                     const std::vector<float>& b, int64_t T, double* pre_diff) {
  const TextConfig& tc = m.config().text;
  const int hd = tc.head_dim, rd = tc.qk_rope_head_dim;
  const std::string p = "layers." + std::to_string(l) + ".attn.";
  const Linear wkv = Linear::bind(m.checkpoint(), p + "wkv", hd, m.dim(), m.config().quant);
  const std::vector<float> norm = load_vector(m.checkpoint(), p + "kv_norm.weight", hd);
  const float* freq = m.weights().rope->for_layer(m.config().roles[l].compress_rope).data();
  auto latents = [&](const std::vector<float>& x, std::vector<float>& raw, std::vector<float>& q) {
    raw.resize(T * hd);
    wkv.forward(x.data(), T, raw.data(), nullptr);
    rms_norm(raw.data(), norm.data(), T, hd, static_cast<float>(tc.rms_norm_eps), raw.data());
    for (int64_t t = 0; t < T; ++t) rope_rotate(raw.data() + t * hd + hd - rd, freq, rd, t, false);
    q = raw;
    for (int64_t t = 0; t < T; ++t) fake_quant_window_fp8(q.data() + t * hd, hd);
  };
  std::vector<float> ra, qa, rb, qb;
  latents(a, ra, qa);
  latents(b, rb, qb);
  *pre_diff = max_abs_diff(ra.data(), rb.data(), ra.size());
  int flips = 0;
  for (size_t i = 0; i < qa.size(); ++i) flips += qa[i] != qb[i];
  return flips;
}

// The oracle is unstable end to end on tiny40 (README: 2.1 between its own CPU
// and GPU runs), so this RECORDS the end-to-end difference and locates its
// origin; the per-layer agreement is asserted by the teacher-forced test.
// Numbers go to docs/testing.md.
TEST_CASE(
    "model: tiny40 end to end: record the difference and the first "
    "diverging layer",
    "[golden][model]") {
  GoldenCase g("tiny40");
  Transformer& m = g.model();
  const ModelConfig& cfg = m.config();
  const int64_t V = cfg.text.vocab_size, D = m.dim();
  const int hc = m.hc();
  const auto ids = g.i32("prompt1.input_ids");
  const int64_t T = static_cast<int64_t>(ids.size());
  // The forward() schedule, layer by layer, to compare H after each layer.
  SequenceState st = m.new_sequence();
  st.tokens = ids;
  st.image_flags.assign(T, 0);
  std::vector<float> H(T * hc * D);
  for (int64_t t = 0; t < T; ++t)
    for (int j = 0; j < hc; ++j) m.weights().embed_row(ids[t], H.data() + (t * hc + j) * D);
  std::vector<float> pre = hc_initial_pre(HcShape{hc, D}, T);
  const std::vector<int64_t> hash = m.engram_ids(st, 0, T);
  const int64_t cols = m.hasher()->n_cols();
  const auto H_all = g.f32("debug.H");
  const auto router_ids = g.f32("debug.router_ids");
  StepSelections sel;
  int slot = 0, first_bad = -1, first_bad_flips = 0, first_bad_router = 0;
  const size_t nH = T * hc * D;
  for (int l = 0; l < cfg.text.num_hidden_layers; ++l) {
    LayerTrace tr;
    const int64_t* h = cfg.roles[l].engram ? hash.data() + (slot++) * T * cols : nullptr;
    m.run_layer(l, T, 0, H.data(), pre, h, nullptr, st, sel, &tr);
    const double d = max_abs_diff(H.data(), H_all.data() + l * nH, nH);
    int router_mismatch = 0;
    const int k = cfg.text.num_experts_per_tok;
    for (int64_t t = 0; t < T; ++t) {
      std::set<int> a, b;
      for (int i = 0; i < k; ++i) {
        a.insert(tr.routing.ids[t * k + i]);
        b.insert(static_cast<int>(router_ids[(l * T + t) * k + i]));
      }
      router_mismatch += a != b;
    }
    std::printf(
        "tiny40 free-running layer %2d: max|H - oracle| %.3g, router "
        "rows differing %d\n",
        l, d, router_mismatch);
    if (first_bad < 0 && d > 1e-5) {
      first_bad = l;
      const size_t nX = T * D;
      const auto normed = g.f32("debug.attn_normed"), out = g.f32("debug.attn_out");
      const std::vector<float> want_in(normed.begin() + l * nX, normed.begin() + (l + 1) * nX);
      double pre_diff = 0;
      const int flips = window_fp8_flips(m, l, tr.attn_normed, want_in, T, &pre_diff);
      first_bad_flips = flips;
      first_bad_router = router_mismatch;
      std::printf(
          "  first divergence at layer %d (%s): attn input differs by %.3g, "
          "attn_out by "
          "%.3g; window KV before FP8 differs by %.3g and %d FP8 values flip\n",
          l, attn_role_name(cfg.roles[l].role),
          max_abs_diff(tr.attn_normed.data(), want_in.data(), nX),
          max_abs_diff(tr.attn_out.data(), out.data() + l * nX, nX), pre_diff, flips);
    }
  }
  const std::vector<float> logits = m.head(H.data(), pre, T);
  const std::vector<float> want = g.f32("prompt1.logits");
  const double diff = max_abs_diff(logits.data(), want.data(), want.size());
  int argmax_equal = 0;
  for (int64_t t = 0; t < T; ++t)
    argmax_equal += argmax(logits.data() + t * V, V) == argmax(want.data() + t * V, V);
  std::printf(
      "tiny40 prompt1 end to end: max|logits - oracle| %.3g, argmax "
      "equal %d/%lld, first "
      "layer with H beyond 1e-5: %d\n",
      diff, argmax_equal, static_cast<long long>(T), first_bad);
  // A divergence must start at a knife edge: an FP8 window-KV flip or a router
  // flip.
  INFO("first diverging layer " << first_bad << " has neither an FP8 flip nor a router flip");
  REQUIRE((first_bad < 0 || first_bad_flips > 0 || first_bad_router > 0));
  // The same numbers through forward() itself (one call), which must equal the
  // manual schedule.
  SequenceState st2 = m.new_sequence();
  const std::vector<float> fwd = m.forward(st2, ids);
  REQUIRE(max_abs_diff(fwd.data(), logits.data(), logits.size()) == 0.0);
  for (float v : logits) REQUIRE(std::isfinite(v));
}

}  // namespace
}  // namespace dsv41::test
