// One speculative round (speculative/round.hpp) on a fake sequence: the rows kept and rolled back
// in every path, and the acceptance stream independent of a Sampler seeded with the same value.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "dsv41/sampler.hpp"
#include "speculative/round.hpp"

using namespace dsv41;
using Ids = std::vector<int32_t>;

namespace {

// A target over vocabulary V whose greedy token after any row is `truth[position]`; records
// what is appended and rolled back.
struct FakeTarget {
  int64_t V = 8;
  Ids truth;     // token the target predicts after position p (p = index)
  Ids appended;  // every token appended, in order
  int64_t pos = 0;
  std::vector<int64_t> rollbacks;
  speculative::RoundTarget target() {
    speculative::RoundTarget t;
    t.tokens = appended;
    t.room = 100;
    t.append_all = [this](std::span<const int32_t> ids) {
      std::vector<float> logits(ids.size() * V, 0.0f);
      for (size_t i = 0; i < ids.size(); ++i) {
        appended.push_back(ids[i]);
        logits[i * V + truth[pos++]] = 10.0f;
      }
      return logits;
    };
    t.rollback = [this](int64_t n) {
      rollbacks.push_back(n);
      pos -= n;
      appended.resize(appended.size() - n);
    };
    return t;
  }
};

class FixedDrafter final : public Drafter {
 public:
  explicit FixedDrafter(Ids d) : d_(std::move(d)) {}
  Result<Draft> propose(std::span<const int32_t>, int max_tokens) override {
    Draft d;
    d.tokens.assign(d_.begin(), d_.begin() + std::min<size_t>(d_.size(), max_tokens));
    return d;
  }

 private:
  Ids d_;
};

Sampler sampler(int64_t V, float temperature, int64_t seed) {
  SamplerParams p;
  p.temperature = temperature;
  p.seed = seed;
  return std::move(Sampler::create(p, V)).value();
}

}  // namespace

TEST_CASE("round: kept and rolled-back rows in every path", "[unit][speculative]") {
  // The target continues 1 2 3 4 5 6 after `next` = 0 at position 0.
  struct Case {
    const char* name;
    Ids draft;
    int64_t max_tokens;
    int32_t eos;
    Ids want;  // returned tokens
  };
  const std::vector<Case> cases = {
      {"all accepted + bonus", {1, 2, 3}, 100, 99, {1, 2, 3, 4}},
      {"rejected at 2", {1, 2, 7}, 100, 99, {1, 2, 3}},
      {"rejected at 0", {7, 2, 3}, 100, 99, {1}},
      {"no drafts", {}, 100, 99, {1}},
      {"accepted EOS ends the round", {1, 2, 3}, 100, 2, {1, 2}},
      {"max_tokens 2 cuts the drafts", {1, 2, 3}, 2, 99, {1, 2}},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      FakeTarget f;
      f.truth = {1, 2, 3, 4, 5, 6, 7, 7};
      Sampler smp = sampler(f.V, 0, 1);
      FixedDrafter d(c.draft);
      sampling::Xoshiro256StarStar rng(1);
      speculative::RoundTarget t = f.target();
      Ids ctx;
      const SpeculativeRound r =
          speculative::run_round(t, smp, d, rng, {5, f.V, c.eos}, 0, c.max_tokens, ctx);
      REQUIRE(r.tokens == c.want);
      // The sequence holds `next` and every returned token but the last.
      Ids held = {0};
      held.insert(held.end(), c.want.begin(), c.want.end() - 1);
      REQUIRE(f.appended == held);
      REQUIRE(smp.num_generated() == static_cast<int64_t>(c.want.size()));
      const bool rolled = static_cast<int64_t>(r.drafted) + 1 > static_cast<int64_t>(held.size());
      REQUIRE(f.rollbacks.size() == (rolled ? 1u : 0u));
    }
  }
}

TEST_CASE("round: the acceptance stream is independent of a Sampler with the same seed",
          "[unit][speculative]") {
  // Uniform p over 2 tokens; the Sampler draws `next`, the round checks the draft 0. With the
  // two streams equal (the Engine seeded both from the request seed) the acceptance uniform was
  // the one that drew `next`, and the token after it always equalled it (reproduced in review).
  constexpr int64_t V = 2;
  constexpr int kN = 20000;
  int same = 0;
  for (int s = 1; s <= kN; ++s) {
    Sampler smp = sampler(V, 1.0f, s);
    const std::vector<float> flat(V, 0.0f);
    const int32_t next = *smp.sample(flat);
    REQUIRE(smp.accept(next).is_ok());
    sampling::Xoshiro256StarStar rng(speculative::acceptance_seed(s));
    speculative::RoundTarget t;
    t.room = 10;
    t.append_all = [&](std::span<const int32_t> ids) {
      return std::vector<float>(ids.size() * V, 0.0f);
    };
    t.rollback = [](int64_t) {};
    FixedDrafter d({0});
    Ids ctx;
    const SpeculativeRound r = speculative::run_round(t, smp, d, rng, {5, V, -1}, next, 2, ctx);
    same += r.tokens[0] == next;
  }
  const double sigma = std::sqrt(kN * 0.25);
  INFO("the token after next equalled next " << same << " times of " << kN);
  REQUIRE(std::abs(same - kN * 0.5) <= 5 * sigma);
  REQUIRE(speculative::acceptance_seed(7) != 7u);
}
