// The sampling chain against hand-computed distributions (docs/sampling.md §Chain): each stage
// alone, the order between stages, greedy, penalties, logit bias, seeded reproducibility and a
// chi-square check that draws follow probabilities().
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "dsv41/sampler.hpp"
#include "sampling/penalties.hpp"
#include "sampling/truncation.hpp"
#include "support/tolerance.hpp"

using dsv41::Sampler;
using dsv41::SamplerParams;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// logits = ln(weights): softmax gives weights / sum(weights).
std::vector<float> log_weights(const std::vector<double>& w) {
  std::vector<float> out;
  for (double x : w) out.push_back(x > 0 ? static_cast<float>(std::log(x)) : kNegInf);
  return out;
}

std::vector<double> normalized(const std::vector<double>& w) {
  double s = 0;
  for (double x : w) s += x;
  std::vector<double> out;
  for (double x : w) out.push_back(x / s);
  return out;
}

Sampler make(const SamplerParams& p, int64_t vocab) {
  auto r = Sampler::create(p, vocab);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

std::vector<float> probs_of(Sampler& s, const std::vector<float>& logits) {
  auto r = s.probabilities(logits);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return r.value();
}

void require_dist(const std::string& what, const std::vector<float>& got,
                  const std::vector<double>& want_weights) {
  const std::vector<double> want = normalized(want_weights);
  REQUIRE(got.size() == want.size());
  dsv41::test::require_close(what, got, want, want.size(), 1e-6);
}

}  // namespace

TEST_CASE("temperature 1 is the plain softmax", "[unit][sampling]") {
  Sampler s = make({}, 4);
  require_dist("softmax", probs_of(s, log_weights({1, 2, 3, 4})), {1, 2, 3, 4});
}

TEST_CASE("temperature divides the logits", "[unit][sampling]") {
  SamplerParams p;
  p.temperature = 0.5f;  // p ∝ w^2
  Sampler s = make(p, 4);
  require_dist("T=0.5", probs_of(s, log_weights({1, 2, 3, 4})), {1, 4, 9, 16});
  p.temperature = 2.0f;  // p ∝ sqrt(w)
  Sampler s2 = make(p, 4);
  require_dist("T=2", probs_of(s2, log_weights({1, 4, 9, 16})), {1, 2, 3, 4});
}

TEST_CASE("top_k keeps the k largest, ties at the boundary included", "[unit][sampling]") {
  SamplerParams p;
  p.top_k = 2;
  Sampler s = make(p, 4);
  require_dist("top_k=2", probs_of(s, log_weights({1, 2, 3, 4})), {0, 0, 3, 4});
  p.top_k = 1;
  Sampler tie = make(p, 4);
  // Two tokens share the largest logit: both survive top_k = 1.
  require_dist("top_k=1 tie", probs_of(tie, log_weights({1, 3, 3, 2})), {0, 3, 3, 0});
  p.top_k = 4;  // == vocab: off
  Sampler all = make(p, 4);
  require_dist("top_k=vocab", probs_of(all, log_weights({1, 2, 3, 4})), {1, 2, 3, 4});
  p.top_k = -1;  // vLLM's old "off"
  Sampler off = make(p, 4);
  require_dist("top_k=-1", probs_of(off, log_weights({1, 2, 3, 4})), {1, 2, 3, 4});
}

TEST_CASE("top_p drops the least likely tail of mass <= 1 - top_p", "[unit][sampling]") {
  // p = [0.1, 0.2, 0.3, 0.4]; tail sums from the least likely: 0.1, 0.3, 0.6, 1.0.
  const auto logits = log_weights({1, 2, 3, 4});
  SamplerParams p;
  p.top_p = 0.5f;  // drop while tail <= 0.5: 0.1, 0.3 dropped; 0.6 stops
  Sampler a = make(p, 4);
  require_dist("top_p=0.5", probs_of(a, logits), {0, 0, 3, 4});
  p.top_p = 0.75f;  // drop while tail <= 0.25: only 0.1
  Sampler b = make(p, 4);
  require_dist("top_p=0.75", probs_of(b, logits), {0, 2, 3, 4});
  p.top_p = 0.05f;  // everything but the most likely token
  Sampler c = make(p, 4);
  require_dist("top_p=0.05", probs_of(c, logits), {0, 0, 0, 1});
  // Equal probabilities: higher ids are dropped first (order = prob desc, id asc).
  p.top_p = 0.5f;  // tail 0.25 (id 3), 0.5 (id 2) <= 0.5 dropped; 0.75 stops
  Sampler d = make(p, 4);
  require_dist("top_p ties", probs_of(d, log_weights({1, 1, 1, 1})), {1, 1, 0, 0});
}

TEST_CASE("min_p drops tokens below min_p times the top probability", "[unit][sampling]") {
  const auto logits = log_weights({1, 2, 3, 4});
  SamplerParams p;
  p.min_p = 0.6f;  // threshold 0.24: 0.1, 0.2 dropped
  Sampler a = make(p, 4);
  require_dist("min_p=0.6", probs_of(a, logits), {0, 0, 3, 4});
  p.min_p = 0.45f;  // threshold 0.18: 0.1 dropped
  Sampler b = make(p, 4);
  require_dist("min_p=0.45", probs_of(b, logits), {0, 2, 3, 4});
  p.min_p = 1.0f;  // only the maximum survives
  Sampler c = make(p, 4);
  require_dist("min_p=1", probs_of(c, logits), {0, 0, 0, 1});
}

TEST_CASE("temperature is applied before min_p", "[unit][sampling]") {
  // T = 0.5: p ∝ [1, 4, 9, 16] / 30; min_p 0.3 -> threshold 0.16 drops 4/30 = 0.133. Applied to
  // the T = 1 distribution instead it would keep id 1 (0.2 > 0.12).
  SamplerParams p;
  p.temperature = 0.5f;
  p.min_p = 0.3f;
  Sampler s = make(p, 4);
  require_dist("T then min_p", probs_of(s, log_weights({1, 2, 3, 4})), {0, 0, 9, 16});
}

TEST_CASE("top_k is applied before top_p, top_p on the renormalized survivors",
          "[unit][sampling]") {
  // top_k = 3 leaves [2, 3, 4] / 9; top_p 0.75 drops tail <= 0.25: 2/9 = 0.222 -> [3, 4] / 7.
  // top_p first on the full distribution would keep ids 1..3 (tail 0.1, then 0.3 > 0.25).
  SamplerParams p;
  p.top_k = 3;
  p.top_p = 0.75f;
  Sampler s = make(p, 4);
  require_dist("top_k then top_p", probs_of(s, log_weights({1, 2, 3, 4})), {0, 0, 3, 4});
}

TEST_CASE("min_p is applied before top_k", "[unit][sampling]") {
  // min_p 0.45 on [1,2,3,4]/10 drops id 0; top_k 2 then keeps ids 2, 3 (either order gives
  // that here), and the renormalization is over the survivors only.
  SamplerParams p;
  p.min_p = 0.45f;
  p.top_k = 2;
  Sampler s = make(p, 4);
  require_dist("min_p then top_k", probs_of(s, log_weights({1, 2, 3, 4})), {0, 0, 3, 4});
}

TEST_CASE("greedy is the argmax with ties to the lowest id", "[unit][sampling]") {
  SamplerParams p;
  p.temperature = 0.0f;
  p.top_k = 1;  // ignored by greedy, like vLLM
  Sampler s = make(p, 4);
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f};
  for (int i = 0; i < 5; ++i) {
    auto t = s.sample(logits);
    REQUIRE(t.is_ok());
    CHECK(t.value() == 1);
  }
  require_dist("greedy one-hot", probs_of(s, logits), {0, 1, 0, 0});
  SamplerParams tiny;
  tiny.temperature = 5e-6f;  // below vLLM's 1e-5: greedy too
  Sampler g = make(tiny, 4);
  CHECK(g.sample(std::vector<float>{-5.0f, -1.0f, -3.0f, -1.0f}).value() == 1);
}

TEST_CASE("repetition penalty divides positive and multiplies negative logits",
          "[unit][sampling]") {
  dsv41::sampling::TokenHistory h(5);
  const std::vector<int32_t> prompt = {0, 0, 3};
  h.set_prompt(prompt);
  h.accept(1);
  h.accept(1);
  std::vector<float> logits = {2.0f, -2.0f, 1.0f, 0.0f, 4.0f};
  dsv41::sampling::apply_penalties(logits, h, 2.0f, 0.0f, 0.0f);
  // id 0 (prompt, twice): 2/2 once; id 1 (generated twice): -2*2 once; id 2 untouched; id 3
  // (prompt, logit 0): 0*2 = 0; id 4 untouched.
  CHECK(logits == std::vector<float>{1.0f, -4.0f, 1.0f, 0.0f, 4.0f});
}

TEST_CASE("frequency and presence penalties count generated tokens only", "[unit][sampling]") {
  dsv41::sampling::TokenHistory h(4);
  const std::vector<int32_t> prompt = {0};
  h.set_prompt(prompt);
  h.accept(1);
  h.accept(1);
  h.accept(2);
  std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  dsv41::sampling::apply_penalties(logits, h, 1.0f, 0.5f, 0.25f);
  // id 1: 1 - 0.5*2 - 0.25 = -0.25; id 2: 1 - 0.5 - 0.25 = 0.25; prompt id 0 untouched.
  CHECK(logits == std::vector<float>{1.0f, -0.25f, 0.25f, 1.0f});
  CHECK(h.num_generated() == 3);
}

TEST_CASE("repetition comes before frequency", "[unit][sampling]") {
  dsv41::sampling::TokenHistory h(2);
  h.accept(0);
  std::vector<float> logits = {2.0f, 0.0f};
  dsv41::sampling::apply_penalties(logits, h, 2.0f, 1.0f, 0.0f);
  CHECK(logits[0] == 0.0f);  // 2/2 - 1; the other order would give (2-1)/2 = 0.5
}

TEST_CASE("logit bias is added before the penalties", "[unit][sampling]") {
  // logit 1, bias +1, repetition 2 on a prompt token: (1 + 1) / 2 = 1 (vLLM order); penalty
  // first would give 1/2 + 1 = 1.5.
  SamplerParams p;
  p.logit_bias = {{0, 1.0f}};
  p.repetition_penalty = 2.0f;
  Sampler s = make(p, 4);
  const std::vector<int32_t> prompt = {0};
  REQUIRE(s.set_prompt(prompt).is_ok());
  const std::vector<float> logits = {1.0f, 0.0f, 0.0f, 0.0f};
  const double e = std::exp(1.0);
  require_dist("bias then penalty", probs_of(s, logits), {e, 1, 1, 1});
}

TEST_CASE("penalties reach sample() through accept()", "[unit][sampling]") {
  SamplerParams p;
  p.temperature = 0.0f;
  p.presence_penalty = 2.0f;
  Sampler s = make(p, 3);
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f};
  CHECK(s.sample(logits).value() == 0);
  REQUIRE(s.accept(0).is_ok());
  CHECK(s.sample(logits).value() == 1);  // 1 - 2 = -1 < 0.5
  REQUIRE(s.accept(1).is_ok());
  CHECK(s.sample(logits).value() == 2);
  CHECK(s.num_generated() == 2);
}

TEST_CASE("logit bias shifts and -inf bans", "[unit][sampling]") {
  SamplerParams p;
  p.logit_bias = {{3, kNegInf}, {0, std::log(2.0f)}};
  Sampler s = make(p, 4);
  require_dist("bias", probs_of(s, log_weights({1, 2, 3, 4})), {2, 2, 3, 0});
  SamplerParams g;
  g.temperature = 0.0f;
  g.logit_bias = {{3, kNegInf}};
  Sampler greedy = make(g, 4);
  CHECK(greedy.sample(log_weights({1, 2, 3, 4})).value() == 2);
  // A banned token is never drawn.
  SamplerParams r;
  r.seed = 5;
  r.logit_bias = {{3, kNegInf}};
  Sampler random = make(r, 4);
  for (int i = 0; i < 2000; ++i) REQUIRE(random.sample(log_weights({1, 1, 1, 1000})).value() != 3);
}

TEST_CASE("same seed and logits give the same tokens", "[unit][sampling]") {
  SamplerParams p;
  p.seed = 1234;
  p.top_p = 0.9f;
  p.temperature = 0.8f;
  Sampler a = make(p, 6), b = make(p, 6);
  p.seed = 1235;
  Sampler c = make(p, 6);
  const auto logits = log_weights({1, 2, 3, 4, 5, 6});
  std::vector<int32_t> ta, tb, tc;
  for (int i = 0; i < 64; ++i) {
    ta.push_back(a.sample(logits).value());
    tb.push_back(b.sample(logits).value());
    tc.push_back(c.sample(logits).value());
  }
  CHECK(ta == tb);
  CHECK(ta != tc);
}

TEST_CASE("seeded draws follow the specified inverse CDF", "[unit][sampling]") {
  // Survivors {0, 2, 3, 5, 7} with weight 1 each: token = survivors[floor(u * 5)], u the 53-bit
  // uniform of xoshiro256** seeded by SplitMix64(seed). Expected values from a Python
  // transcription of docs/sampling.md §RNG (integer arithmetic only).
  std::vector<float> logits(8, kNegInf);
  for (int id : {0, 2, 3, 5, 7}) logits[id] = 0.0f;
  const std::vector<int32_t> want42 = {0, 2, 5, 7, 7, 5, 5, 7, 5, 3, 5, 2, 7, 2, 5, 7, 5, 7, 5, 5};
  const std::vector<int32_t> want_m1 = {3, 5, 3, 5, 3, 5, 2, 5, 5, 5, 2, 0, 3, 3, 0, 5, 0, 5, 3, 3};
  for (const auto& [seed, want] :
       {std::pair{int64_t{42}, want42}, std::pair{int64_t{-1}, want_m1}}) {
    SamplerParams p;
    p.seed = seed;
    Sampler s = make(p, 8);
    std::vector<int32_t> got;
    for (size_t i = 0; i < want.size(); ++i) got.push_back(s.sample(logits).value());
    INFO("seed " << seed);
    CHECK(got == want);
  }
}

TEST_CASE("draw frequencies match probabilities() (chi-square, fixed seed)", "[unit][sampling]") {
  // After T = 0.7: top_k 5 drops id 5; top_p 0.95 then drops id 2 (p = 0.016 <= 0.05, adding
  // id 0's 0.043 passes 0.05). Expected counts come from probabilities(); the test checks that
  // sample() draws from exactly that distribution.
  SamplerParams p;
  p.seed = 20261202;
  p.temperature = 0.7f;
  p.top_k = 5;
  p.top_p = 0.95f;
  const std::vector<float> logits = {0.3f, 1.1f, -0.4f, 2.0f, 1.7f, -2.5f};
  Sampler s = make(p, 6);
  const std::vector<float> probs = probs_of(s, logits);
  CHECK(probs[2] == 0.0f);
  CHECK(probs[5] == 0.0f);
  const int kDraws = 200000;
  std::vector<int64_t> count(6, 0);
  for (int i = 0; i < kDraws; ++i) ++count[s.sample(logits).value()];
  double chi2 = 0;
  int df = -1;
  for (size_t t = 0; t < probs.size(); ++t) {
    if (probs[t] == 0.0f) {
      INFO("token " << t << " has probability 0 but was drawn " << count[t] << " times");
      REQUIRE(count[t] == 0);
      continue;
    }
    const double expected = probs[t] * kDraws;
    chi2 += (count[t] - expected) * (count[t] - expected) / expected;
    ++df;
  }
  REQUIRE(df >= 2);  // the truncation left several tokens, so the check has power
  // 99.9 % quantiles of chi-square with df = 2..4: 13.82, 16.27, 18.47.
  const double critical[] = {0, 0, 13.82, 16.27, 18.47};
  INFO("chi2 = " << chi2 << ", df = " << df);
  CHECK(chi2 < critical[df]);
}

TEST_CASE("top_p on a large vocabulary equals the full-sort definition", "[unit][sampling]") {
  // apply_top_p sorts only a growing top block (256, 1024, 4096, ...); compare it with the
  // definition on a full sort: walk from the least likely end, drop while tail mass <= 1 - p.
  const size_t kVocab = 5000;
  uint64_t lcg = 99;
  auto uniform = [&] {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(lcg >> 11) * 0x1.0p-53;
  };
  for (float scale : {0.3f, 1.0f, 3.0f}) {
    std::vector<float> base(kVocab);
    for (float& v : base) v = scale * static_cast<float>(std::log(uniform() + 1e-9));
    for (float top_p : {0.1f, 0.5f, 0.9f, 0.95f, 0.99f}) {
      std::vector<float> got = base;
      dsv41::sampling::apply_top_p(got, top_p);
      std::vector<int32_t> order(kVocab);
      for (size_t i = 0; i < kVocab; ++i) order[i] = static_cast<int32_t>(i);
      std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return base[a] != base[b] ? base[a] > base[b] : a < b;
      });
      double total = 0;
      for (float v : base) total += std::exp(static_cast<double>(v) - base[order[0]]);
      std::vector<bool> kept(kVocab, true);
      double tail = 0;
      for (size_t r = kVocab - 1; r > 0; --r) {
        tail += std::exp(static_cast<double>(base[order[r]]) - base[order[0]]) / total;
        if (tail > 1.0 - static_cast<double>(top_p)) break;
        kept[order[r]] = false;
      }
      size_t n_kept = 0, mismatches = 0;
      for (size_t i = 0; i < kVocab; ++i) {
        n_kept += kept[i];
        mismatches += kept[i] != (got[i] != kNegInf);
      }
      INFO("scale " << scale << " top_p " << top_p << ": " << n_kept << " kept by the definition");
      CHECK(mismatches == 0);
    }
  }
}
