// SamplerParams::validate / Sampler::create / bad logits and history: every rejection names
// the field or the problem (project rule: bad input -> named error, never a crash).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dsv41/sampler.hpp"

using dsv41::ErrorCode;
using dsv41::Sampler;
using dsv41::SamplerParams;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::nanf("");

void require_rejected(const SamplerParams& p, const std::string& needle) {
  const dsv41::Status st = p.validate();
  INFO("validate(): " << st.to_string());
  REQUIRE(!st.is_ok());
  CHECK(st.code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(st.message(), Catch::Contains(needle));
  // create() reports the same error.
  auto r = Sampler::create(p, 8);
  REQUIRE(!r.is_ok());
  CHECK(r.status().message() == st.message());
}

template <typename T>
void require_error(const dsv41::Result<T>& r, const std::string& needle) {
  INFO(r.status().to_string());
  REQUIRE(!r.is_ok());
  CHECK(r.status().code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(r.status().message(), Catch::Contains(needle));
}

Sampler make(const SamplerParams& p, int64_t vocab) {
  auto r = Sampler::create(p, vocab);
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

}  // namespace

TEST_CASE("default SamplerParams are valid", "[unit][sampling]") {
  CHECK(SamplerParams{}.validate().is_ok());
}

TEST_CASE("every out-of-range SamplerParams field is named", "[unit][sampling]") {
  auto with = [](auto edit) {
    SamplerParams p;
    edit(p);
    return p;
  };
  require_rejected(with([](auto& p) { p.temperature = -0.1f; }),
                   "SamplerParams.temperature = -0.1");
  require_rejected(with([&](auto& p) { p.temperature = kNaN; }), "SamplerParams.temperature = nan");
  require_rejected(with([&](auto& p) { p.temperature = kInf; }), "SamplerParams.temperature = inf");
  require_rejected(with([](auto& p) { p.top_k = -2; }), "SamplerParams.top_k = -2");
  require_rejected(with([](auto& p) { p.top_p = 1.5f; }),
                   "SamplerParams.top_p = 1.5 must be in (0, 1]");
  require_rejected(with([](auto& p) { p.top_p = 0.0f; }), "SamplerParams.top_p = 0");
  require_rejected(with([&](auto& p) { p.top_p = kNaN; }), "SamplerParams.top_p = nan");
  require_rejected(with([](auto& p) { p.min_p = -0.5f; }), "SamplerParams.min_p = -0.5");
  require_rejected(with([](auto& p) { p.min_p = 1.5f; }), "SamplerParams.min_p = 1.5");
  require_rejected(with([](auto& p) { p.repetition_penalty = 0.0f; }),
                   "SamplerParams.repetition_penalty = 0");
  require_rejected(with([&](auto& p) { p.repetition_penalty = kInf; }),
                   "SamplerParams.repetition_penalty = inf");
  require_rejected(with([](auto& p) { p.presence_penalty = 2.5f; }),
                   "SamplerParams.presence_penalty = 2.5");
  require_rejected(with([](auto& p) { p.frequency_penalty = -3.0f; }),
                   "SamplerParams.frequency_penalty = -3");
  auto with_bias = [](int32_t id, float bias) {
    SamplerParams p;
    p.logit_bias[id] = bias;
    return p;
  };
  require_rejected(with_bias(-4, 1.0f), "SamplerParams.logit_bias has token id -4");
  require_rejected(with_bias(2, kNaN), "SamplerParams.logit_bias[2] = nan");
  require_rejected(with_bias(2, kInf), "SamplerParams.logit_bias[2] = inf");
}

TEST_CASE("boundary values are accepted", "[unit][sampling]") {
  SamplerParams p;
  p.temperature = 0.0f;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.logit_bias = {{0, -kInf}};
  CHECK(p.validate().is_ok());
}

TEST_CASE("create checks the vocabulary", "[unit][sampling]") {
  SamplerParams p;
  p.logit_bias = {{8, 1.0f}};
  require_error(Sampler::create(p, 8),
                "SamplerParams.logit_bias has token id 8 outside the "
                "vocabulary [0, 8)");
  require_error(Sampler::create(SamplerParams{}, 0), "vocab_size = 0");
  require_error(Sampler::create(SamplerParams{}, int64_t{1} << 31), "vocab_size = 2147483648");
}

TEST_CASE("bad logits are named", "[unit][sampling]") {
  Sampler s = make({}, 4);
  require_error(s.sample(std::vector<float>{0, 0, 0}),
                "logits have 3 entries, expected "
                "vocab_size 4");
  require_error(s.probabilities(std::vector<float>{0, 0, 0, 0, 0}), "5 entries");
  require_error(s.sample(std::vector<float>{0, kNaN, 0, kNaN}),
                "logits contain 2 NaN value(s), the first at token 1");
  require_error(s.sample(std::vector<float>{kNaN, kNaN, kNaN, kNaN}), "4 NaN");
  require_error(s.sample(std::vector<float>{0, 0, kInf, 0}), "+inf value(s), the first at token 2");
  require_error(s.sample(std::vector<float>{-kInf, -kInf, -kInf, -kInf}), "all 4 logits are -inf");
  require_error(s.probabilities(std::vector<float>{-kInf, -kInf, -kInf, -kInf}),
                "all 4 logits are -inf");
}

TEST_CASE("a logit bias that bans every live token is an error", "[unit][sampling]") {
  SamplerParams p;
  p.logit_bias = {{0, -kInf}, {1, -kInf}};
  Sampler s = make(p, 3);
  require_error(s.sample(std::vector<float>{1, 2, -kInf}),
                "no token left after logit_bias and penalties");
  CHECK(s.sample(std::vector<float>{1, 2, 0}).value() == 2);
}

TEST_CASE("a bias overflowing a logit to +inf is an error", "[unit][sampling]") {
  SamplerParams p;
  p.logit_bias = {{1, 3e38f}};
  Sampler s = make(p, 2);
  require_error(s.sample(std::vector<float>{0, 3e38f}), "logit of token 1 overflowed to +inf");
}

TEST_CASE("history ids outside the vocabulary are refused", "[unit][sampling]") {
  Sampler s = make({}, 4);
  const dsv41::Status a = s.accept(4);
  REQUIRE(!a.is_ok());
  CHECK_THAT(a.message(), Catch::Contains("accepted token 4 is outside the vocabulary [0, 4)"));
  CHECK(!s.accept(-1).is_ok());
  CHECK(s.num_generated() == 0);
  const std::vector<int32_t> prompt = {1, 2, 9};
  const dsv41::Status b = s.set_prompt(prompt);
  REQUIRE(!b.is_ok());
  CHECK_THAT(b.message(), Catch::Contains("prompt token [2] = 9 is outside the vocabulary"));
}

TEST_CASE("a moved-from Sampler reports an error instead of crashing", "[unit][sampling]") {
  Sampler a = make({}, 4);
  Sampler b = std::move(a);
  require_error(a.sample(std::vector<float>{0, 0, 0, 0}), "moved from");  // NOLINT: on purpose
  CHECK(!a.accept(0).is_ok());                                            // NOLINT
  CHECK(a.vocab_size() == 0);                                             // NOLINT
  CHECK(b.sample(std::vector<float>{0, 0, 0, 0}).is_ok());
  CHECK(b.vocab_size() == 4);
}

TEST_CASE("an unseeded Sampler still samples valid tokens", "[unit][sampling]") {
  Sampler s = make({}, 5);
  for (int i = 0; i < 100; ++i) {
    auto t = s.sample(std::vector<float>{0, 0, -kInf, 0, 0});
    REQUIRE(t.is_ok());
    REQUIRE(t.value() != 2);
    REQUIRE(t.value() >= 0);
    REQUIRE(t.value() < 5);
  }
}
