// position_logprobs (sampling/logprobs.hpp): log-softmax of one position's raw logits, the chosen
// token's value and the top alternatives in order, stable for large logits, and the non-finite
// cases.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "sampling/logprobs.hpp"

using dsv41::sampling::position_logprobs;

TEST_CASE("logprobs: log-softmax of the raw logits, top alternatives descending",
          "[unit][sampling]") {
  const std::vector<float> logits{1.0f, 2.0f, 3.0f, -1.0f};
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(-1.0));
  auto lp = position_logprobs(logits, 1, 2);
  CHECK(lp.chosen.token == 1);
  CHECK(lp.chosen.logprob == Approx(2.0 - lse).epsilon(1e-6));
  REQUIRE(lp.top.size() == 2);
  CHECK(lp.top[0].token == 2);
  CHECK(lp.top[0].logprob == Approx(3.0 - lse).epsilon(1e-6));
  CHECK(lp.top[1].token == 1);
  // Probabilities of all four sum to 1.
  auto all = position_logprobs(logits, 0, 10);  // clamped to the 4 tokens
  REQUIRE(all.top.size() == 4);
  double sum = 0;
  for (const auto& t : all.top) sum += std::exp(static_cast<double>(t.logprob));
  CHECK(sum == Approx(1.0).epsilon(1e-6));
  CHECK(all.top[3].token == 3);
  CHECK(position_logprobs(logits, 0, 0).top.empty());
}

TEST_CASE("logprobs: ties go to the lower id, large logits stay finite", "[unit][sampling]") {
  std::vector<float> logits(1000, 40000.0f);  // exp(40000) overflows without the max shift
  auto lp = position_logprobs(logits, 999, 3);
  CHECK(lp.chosen.logprob == Approx(-std::log(1000.0)).epsilon(1e-6));
  REQUIRE(lp.top.size() == 3);
  CHECK(lp.top[0].token == 0);
  CHECK(lp.top[1].token == 1);
  CHECK(lp.top[2].token == 2);
}

TEST_CASE("logprobs: a ruled-out token is -inf, a non-finite row is NaN", "[unit][sampling]") {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> logits{0.0f, -inf, 0.0f};
  auto lp = position_logprobs(logits, 1, 3);
  CHECK(std::isinf(lp.chosen.logprob));
  CHECK(lp.chosen.logprob < 0);
  REQUIRE(lp.top.size() == 3);
  CHECK(lp.top[0].logprob == Approx(-std::log(2.0)).epsilon(1e-6));
  CHECK(lp.top[2].token == 1);
  logits[1] = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(position_logprobs(logits, 0, 0).chosen.logprob));
  logits[1] = inf;
  CHECK(std::isnan(position_logprobs(logits, 0, 0).chosen.logprob));
  // A chosen id outside the row (never from the engine) is NaN, not a read past the end.
  CHECK(std::isnan(position_logprobs(std::vector<float>{0.0f, 0.0f}, 5, 0).chosen.logprob));
}
