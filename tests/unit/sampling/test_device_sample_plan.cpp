// DeviceSampling (the host half of the CUDA sampling path): the sparse adjustment list equals
// the CPU's logit_bias + penalties bit for bit, the uniform handed to the device is the one
// Sampler::sample consumes, finish() consumes it exactly when sample() would, and device
// statuses turn into sample()'s error messages.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "dsv41/sampler.hpp"
#include "sampling/device_sample_plan.hpp"
#include "sampling/penalties.hpp"
#include "support/sample_reference.hpp"

using dsv41::Sampler;
using dsv41::SamplerParams;
using dsv41::sampling::DeviceSampleOutcome;
using dsv41::sampling::DeviceSampling;
using dsv41::sampling::SamplePlan;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<float> random_logits(std::mt19937_64& rng, int64_t V, float sigma) {
  std::normal_distribution<float> n(0.0f, sigma);
  std::vector<float> l(static_cast<size_t>(V));
  for (float& v : l) v = n(rng);
  l[0] = 0.0f;
  l[1 % V] = -0.0f;
  return l;
}

Sampler make(const SamplerParams& p, int64_t V) {
  auto s = Sampler::create(p, V);
  REQUIRE(s.is_ok());
  return std::move(s).value();
}

}  // namespace

TEST_CASE("device plan: adjustments equal logit_bias + penalties bit for bit", "[unit][sampling]") {
  std::mt19937_64 rng(7);
  const int64_t V = 300;
  for (int trial = 0; trial < 50; ++trial) {
    SamplerParams p;
    p.repetition_penalty = trial % 3 == 0 ? 1.0f : 0.3f + 0.1f * static_cast<float>(trial % 17);
    p.frequency_penalty = trial % 4 == 1 ? 0.0f : -2.0f + 0.13f * static_cast<float>(trial % 31);
    p.presence_penalty = trial % 5 == 2 ? 0.0f : 1.7f - 0.11f * static_cast<float>(trial % 29);
    std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(V - 1));
    for (int b = 0; b < 20; ++b) p.logit_bias[id(rng)] = b % 7 == 0 ? kNegInf : 0.37f * (b - 9);
    Sampler s = make(p, V);
    dsv41::sampling::TokenHistory h(V);
    std::vector<int32_t> prompt;
    for (int i = 0; i < 60; ++i) prompt.push_back(id(rng) % 40);  // repeated ids
    REQUIRE(s.set_prompt(prompt).is_ok());
    h.set_prompt(prompt);
    for (int i = 0; i < 80; ++i) {
      const int32_t t = id(rng) % 70;  // overlaps the prompt, repeats
      REQUIRE(s.accept(t).is_ok());
      h.accept(t);
    }
    std::vector<float> logits = random_logits(rng, V, 4.0f);
    logits[5] = kNegInf;
    logits[6] = 3e38f;  // bias can overflow it
    std::vector<float> cpu = logits;
    for (const auto& [i, bias] : p.logit_bias) cpu[i] += bias;
    dsv41::sampling::apply_penalties(cpu, h, p.repetition_penalty, p.frequency_penalty,
                                     p.presence_penalty);
    const SamplePlan plan = DeviceSampling::plan(s);
    for (size_t i = 1; i < plan.adjustments.size(); ++i)
      REQUIRE(plan.adjustments[i - 1].id < plan.adjustments[i].id);
    std::vector<float> dev = logits;
    DeviceSampling::apply_adjustments(dev, plan);
    for (int64_t i = 0; i < V; ++i) {
      INFO("trial " << trial << " token " << i << ": cpu " << cpu[i] << " plan " << dev[i]);
      REQUIRE(std::memcmp(&cpu[i], &dev[i], 4) == 0);
    }
  }
}

TEST_CASE("ban_until: banned ids are -inf until enough tokens were accepted, plan included",
          "[unit][sampling]") {
  const int64_t V = 50;
  SamplerParams p;
  p.temperature = 0.0f;
  p.logit_bias[4] = 2.0f;
  p.frequency_penalty = 0.5f;
  Sampler s = make(p, V);
  std::vector<float> logits(V, 0.0f);
  logits[3] = 9.0f;  // the greedy choice, banned
  logits[4] = 1.0f;
  const int32_t banned[] = {3, 4};
  REQUIRE(s.ban_until(banned, 2).is_ok());
  auto expect_plan_equal = [&] {
    std::vector<float> cpu = logits;
    for (const auto& [i, bias] : p.logit_bias) cpu[i] += bias;
    if (s.num_generated() < 2) cpu[3] = cpu[4] = kNegInf;
    const SamplePlan plan = DeviceSampling::plan(s);
    std::vector<float> dev = logits;
    DeviceSampling::apply_adjustments(dev, plan);
    for (int64_t i = 0; i < V; ++i) {
      if (i == 3 || i == 4 || std::isinf(cpu[i])) {
        INFO("token " << i);
        CHECK(dev[i] == cpu[i]);
      }
    }
  };
  for (int step = 0; step < 2; ++step) {
    INFO("step " << step);
    expect_plan_equal();
    auto t = s.sample(logits);
    REQUIRE(t.is_ok());
    CHECK(*t != 3);
    CHECK(*t != 4);
    REQUIRE(s.accept(*t).is_ok());
  }
  expect_plan_equal();
  auto t = s.sample(logits);  // two tokens accepted: the ban is over
  REQUIRE(t.is_ok());
  CHECK(*t == 3);
  const int32_t outside[] = {50};
  CHECK_THAT(s.ban_until(outside, 1).message(),
             Catch::Contains("ids[0] = 50 is outside the vocabulary [0, 50)"));
  CHECK_THAT(s.ban_until(banned, -1).message(), Catch::Contains("generated = -1 is negative"));
  // Banning every live token is the chain's named error.
  std::vector<int32_t> all;
  for (int32_t i = 0; i < V; ++i) all.push_back(i);
  Sampler fresh = make(SamplerParams{}, V);
  REQUIRE(fresh.ban_until(all, 1).is_ok());
  CHECK_THAT(fresh.sample(logits).status().message(), Catch::Contains("no token left"));
}

TEST_CASE("device plan: the uniform is the one sample() consumes, once per non-greedy call",
          "[unit][sampling]") {
  const int64_t V = 50;
  for (float temperature : {0.0f, 0.7f, 1.3f}) {
    SamplerParams p;
    p.temperature = temperature;
    p.top_k = 20;
    p.top_p = 0.9f;
    p.min_p = 0.01f;
    p.repetition_penalty = 1.2f;
    p.frequency_penalty = 0.3f;
    p.seed = 1234;
    Sampler cpu = make(p, V), dev = make(p, V);
    std::mt19937_64 rng(99);
    for (int step = 0; step < 400; ++step) {
      INFO("temperature " << temperature << " step " << step);
      std::vector<float> logits = random_logits(rng, V, 2.0f);
      if (step % 37 == 5) logits[3] = std::numeric_limits<float>::quiet_NaN();  // fails
      const auto want = cpu.sample(logits);
      const SamplePlan plan = DeviceSampling::plan(dev);
      REQUIRE(plan.greedy == (temperature == 0.0f));
      const dsv41::test::ReferenceSample ref = dsv41::test::reference_sample(plan, logits);
      DeviceSampleOutcome o;
      if (ref.valid) {
        o.token = ref.token;
      } else {
        o.status = 1;  // the only failure injected here
        o.count = 1;
        o.first = 3;
      }
      const auto got = DeviceSampling::finish(dev, plan, o);
      REQUIRE(got.is_ok() == want.is_ok());
      if (!want.is_ok()) {
        REQUIRE(got.status().message() == want.status().message());
        continue;
      }
      REQUIRE(*got == *want);
      REQUIRE(cpu.accept(*want).is_ok());
      REQUIRE(dev.accept(*got).is_ok());
    }
  }
}

TEST_CASE("device plan: statuses give sample()'s messages and consume nothing",
          "[unit][sampling]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  SamplerParams p;
  p.seed = 5;
  p.logit_bias[2] = 3e38f;
  struct Case {
    std::vector<float> logits;
    DeviceSampleOutcome o;
  };
  const std::vector<Case> cases = {
      {{nan, 1, nan, 2}, {-1, 1, 2, 0}},
      {{1, INFINITY, 2, INFINITY}, {-1, 2, 2, 1}},
      {{kNegInf, kNegInf, kNegInf, kNegInf}, {-1, 3, 4, -1}},
      {{1, 2, 3e38f, 0}, {-1, 5, 1, 2}},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    INFO("case " << c);
    Sampler cpu = make(p, 4), dev = make(p, 4);
    const auto want = cpu.sample(cases[c].logits);
    REQUIRE_FALSE(want.is_ok());
    const SamplePlan plan = DeviceSampling::plan(dev);
    const auto got = DeviceSampling::finish(dev, plan, cases[c].o);
    REQUIRE_FALSE(got.is_ok());
    CHECK(got.status().code() == want.status().code());
    CHECK(got.status().message() == want.status().message());
    // Nothing consumed: the next plan's uniform is the same.
    CHECK(DeviceSampling::plan(dev).uniform == plan.uniform);
  }
  SamplerParams ban;
  ban.logit_bias = {{0, kNegInf}, {1, kNegInf}};
  Sampler cpu = make(ban, 2), dev = make(ban, 2);
  const auto want = cpu.sample(std::vector<float>{1.0f, 2.0f});
  const auto got = DeviceSampling::finish(dev, DeviceSampling::plan(dev), {-1, 4, 0, -1});
  REQUIRE_FALSE(want.is_ok());
  REQUIRE_FALSE(got.is_ok());
  CHECK(got.status().message() == want.status().message());
}

TEST_CASE("device plan: a stale plan and a bad token are internal errors", "[unit][sampling]") {
  SamplerParams p;
  p.seed = 11;
  Sampler s = make(p, 8);
  const SamplePlan plan = DeviceSampling::plan(s);
  REQUIRE(DeviceSampling::finish(s, plan, {3, 0, 0, -1}).is_ok());
  const auto again = DeviceSampling::finish(s, plan, {3, 0, 0, -1});
  REQUIRE_FALSE(again.is_ok());
  CHECK(again.status().code() == dsv41::ErrorCode::kInternal);
  const auto bad = DeviceSampling::finish(s, DeviceSampling::plan(s), {8, 0, 0, -1});
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == dsv41::ErrorCode::kInternal);
}
