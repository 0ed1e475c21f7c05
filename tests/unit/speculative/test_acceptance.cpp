// Speculative rejection sampling (speculative/acceptance.hpp): the emitted token is distributed as
// the target p whatever the draft distribution q, and the acceptance rate is sum min(p, q).
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "speculative/acceptance.hpp"

using namespace dsv41;
using dsv41::speculative::sample_weights;
using dsv41::speculative::verify_draft;

namespace {

struct Counts {
  std::vector<double> emitted;
  double accepted = 0;
};

// Draws d ~ q (or the fixed draft when q is empty), runs verify_draft, counts the outcome.
Counts run(const std::vector<float>& p, const std::vector<float>& q, int32_t fixed_draft, int n,
           uint64_t seed) {
  sampling::Xoshiro256StarStar rng(seed);
  Counts c;
  c.emitted.assign(p.size(), 0);
  std::vector<double> qd(q.begin(), q.end());
  for (int i = 0; i < n; ++i) {
    const int32_t d = q.empty() ? fixed_draft : sample_weights(qd, rng.uniform());
    const speculative::Verdict v = verify_draft(p, q, d, rng);
    if (v.accepted) {
      REQUIRE(v.token == d);
      c.accepted += 1;
    }
    c.emitted[v.token] += 1;
  }
  return c;
}

// Every frequency within 5 binomial standard deviations of its probability (seeded, so the
// outcome is fixed; 5 sigma keeps a correct implementation far from the edge).
void require_distribution(const std::vector<double>& counts, const std::vector<float>& p, int n) {
  for (size_t i = 0; i < p.size(); ++i) {
    const double sigma = std::sqrt(n * p[i] * (1 - p[i])) + 1e-9;
    INFO("token " << i << ": emitted " << counts[i] << " times, expected " << n * p[i] << " +- "
                  << 5 * sigma);
    REQUIRE(std::abs(counts[i] - n * p[i]) <= 5 * sigma);
  }
}

}  // namespace

TEST_CASE("acceptance: sampled drafts leave the target distribution unchanged",
          "[unit][speculative]") {
  const std::vector<float> p = {0.40f, 0.25f, 0.15f, 0.10f, 0.06f, 0.04f, 0.0f};
  const std::vector<float> q = {0.05f, 0.05f, 0.50f, 0.10f,
                                0.10f, 0.10f, 0.10f};  // q(6) > p(6) = 0
  constexpr int kN = 200000;
  const Counts c = run(p, q, -1, kN, 7);
  require_distribution(c.emitted, p, kN);
  REQUIRE(c.emitted[6] == 0);  // never a token the target excludes
  double overlap = 0;
  for (size_t i = 0; i < p.size(); ++i) overlap += std::min(p[i], q[i]);
  const double sigma = std::sqrt(kN * overlap * (1 - overlap));
  INFO("accepted " << c.accepted << ", expected " << kN * overlap);
  REQUIRE(std::abs(c.accepted - kN * overlap) <= 5 * sigma);
}

TEST_CASE("acceptance: a deterministic draft is kept with probability p(draft)",
          "[unit][speculative]") {
  const std::vector<float> p = {0.1f, 0.6f, 0.3f};
  constexpr int kN = 100000;
  for (int32_t d : {0, 1, 2}) {
    const Counts c = run(p, {}, d, kN, 11 + d);
    require_distribution(c.emitted, p, kN);
    const double sigma = std::sqrt(kN * p[d] * (1 - p[d]));
    INFO("draft " << d << " accepted " << c.accepted << " times, expected " << kN * p[d]);
    REQUIRE(std::abs(c.accepted - kN * p[d]) <= 5 * sigma);
  }
}

TEST_CASE("acceptance: one-hot targets (greedy) keep exactly the argmax", "[unit][speculative]") {
  const std::vector<float> p = {0, 0, 1, 0};
  sampling::Xoshiro256StarStar rng(3);
  for (int i = 0; i < 100; ++i) {
    REQUIRE(verify_draft(p, {}, 2, rng).accepted);
    const speculative::Verdict v = verify_draft(p, {}, 1, rng);
    REQUIRE_FALSE(v.accepted);
    REQUIRE(v.token == 2);
  }
}

TEST_CASE("acceptance: p equal to q is always accepted", "[unit][speculative]") {
  const std::vector<float> p = {0.2f, 0.3f, 0.5f};
  const Counts c = run(p, p, -1, 10000, 5);
  REQUIRE(c.accepted == 10000);
}

TEST_CASE("acceptance: sample_weights never returns a zero-weight index", "[unit][speculative]") {
  const std::vector<double> w = {0, 2, 0, 1, 0};
  REQUIRE(sample_weights(w, 0.0) == 1);
  REQUIRE(sample_weights(w, 0.66) == 1);
  REQUIRE(sample_weights(w, 0.67) == 3);
  REQUIRE(sample_weights(w, 0.9999999999999999) == 3);
  const std::vector<double> none = {0, 0};
  REQUIRE_THROWS_WITH(sample_weights(none, 0.5), Catch::Contains("no mass"));
}

TEST_CASE("acceptance: malformed inputs are refused by name", "[unit][speculative]") {
  sampling::Xoshiro256StarStar rng(1);
  const std::vector<float> p = {0.5f, 0.5f};
  REQUIRE_THROWS_WITH(verify_draft(p, {}, 2, rng), Catch::Contains("draft token 2 outside"));
  const std::vector<float> q = {1.0f};
  REQUIRE_THROWS_WITH(verify_draft(p, q, 0, rng), Catch::Contains("1 entries, not 2"));
}
