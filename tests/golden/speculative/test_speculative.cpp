// SpeculativeDecoder on tiny8 (dsv41/speculative.hpp, docs/speculative.md): greedy rounds with
// right, wrong, partly right and prompt-lookup drafts all give plain greedy decoding's tokens (and
// the oracle's greedy continuation); the session after the rounds equals one decoded token by
// token; sampled rounds draw from the Sampler's distribution; bad drafts and arguments are refused
// with the session unchanged.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <map>

#include "decode_loop.hpp"
#include "dsv41/sampler.hpp"
#include "dsv41/session.hpp"
#include "dsv41/speculative.hpp"
#include "loader/safetensors.hpp"
#include "support/fixtures.hpp"
#include "support/tiny8_model.hpp"
#include "support/tolerance.hpp"

using namespace dsv41;
using dsv41::test::fixture;
using dsv41::test::require_close;
using Ids = std::vector<int32_t>;

namespace {

constexpr double kLogitTol = 2e-3;  // tiny8 end to end (tiny8/README.md)

const Model& tiny8() { return test::tiny8_model(); }

Ids golden_ids(const std::string& name) {
  static auto file = SafetensorsFile::open(fixture("golden/tiny8/golden.safetensors"));
  std::vector<float> v = tensor_to_f32(file->view(*file->find_info(name)));
  return Ids(v.begin(), v.end());
}

Session session(int64_t max_context = 262144) {
  SessionParams sp;
  sp.max_context = max_context;
  auto s = Session::create(tiny8(), sp);
  REQUIRE(s.is_ok());
  return std::move(s).value();
}

Sampler sampler(SamplerParams p = {}) {
  auto s = Sampler::create(p, tiny8().info().vocab_size);
  REQUIRE(s.is_ok());
  return std::move(s).value();
}

SamplerParams greedy_params() {
  SamplerParams p;
  p.temperature = 0;
  return p;
}

// Drafts from a callback of (context, max_tokens).
class ScriptedDrafter final : public Drafter {
 public:
  using Fn = std::function<Result<Draft>(std::span<const int32_t>, int)>;
  explicit ScriptedDrafter(Fn fn) : fn_(std::move(fn)) {}
  Result<Draft> propose(std::span<const int32_t> ctx, int max_tokens) override {
    return fn_(ctx, max_tokens);
  }

 private:
  Fn fn_;
};

SpeculativeDecoder decoder(ScriptedDrafter::Fn fn, int max_draft = 5) {
  SpeculativeParams p;
  p.max_draft_tokens = max_draft;
  p.seed = 1234;
  auto d = SpeculativeDecoder::create(tiny8(), std::make_unique<ScriptedDrafter>(std::move(fn)), p);
  REQUIRE(d.is_ok());
  return std::move(d).value();
}

// Plain greedy decoding: n tokens after `prompt`, and the logits of the last position.
Ids plain_greedy(const Ids& prompt, int n, std::vector<float>* last_logits = nullptr,
                 SamplerParams sp = greedy_params()) {
  Session s = session();
  Sampler smp = sampler(sp);
  const Ids out = test::decode_tokens(s, smp, prompt, n, nullptr);
  auto r = s.append(Ids{out.back()});
  REQUIRE(r.is_ok());
  if (last_logits) *last_logits = std::move(r).value();
  return out;
}

// Speculative greedy decoding of n tokens after `prompt` on s.
Ids spec_greedy(SpeculativeDecoder& dec, const Ids& prompt, int n, Session& s,
                SamplerParams sp = greedy_params()) {
  Sampler smp = sampler(sp);
  return test::decode_tokens(s, smp, prompt, n, &dec);
}

}  // namespace

TEST_CASE("speculative: greedy rounds give plain greedy tokens whatever the drafter proposes",
          "[golden][speculative]") {
  const Ids prompt = golden_ids("prompt1.input_ids");
  constexpr int kN = 40;
  std::vector<float> want_logits;
  const Ids want = plain_greedy(prompt, kN, &want_logits);
  const Ids oracle = golden_ids("greedy.tokens");  // the HF port's 12 greedy tokens
  REQUIRE(Ids(want.begin(), want.begin() + 12) == oracle);

  // The continuation after context ctx (prompt + decoded + next), shifted by `wrong_from`.
  auto truth = [&](std::span<const int32_t> ctx, int m, int wrong_from) {
    Draft d;
    const size_t done = ctx.size() - prompt.size();  // tokens of `want` already in ctx
    for (int k = 0; k < m && done + k < want.size(); ++k) {
      const int32_t t = want[done + k];
      d.tokens.push_back(k >= wrong_from ? (t + 1) % 600 : t);
    }
    return Result<Draft>(d);
  };
  struct Case {
    const char* name;
    ScriptedDrafter::Fn fn;
    bool all_accepted, none_accepted;
  };
  const std::vector<Case> cases = {
      {"right drafts", [&](auto c, int m) { return truth(c, m, 99); }, true, false},
      {"wrong drafts", [&](auto c, int m) { return truth(c, m, 0); }, false, true},
      {"two right then wrong", [&](auto c, int m) { return truth(c, m, 2); }, false, false},
      {"no drafts", [](auto, int) { return Result<Draft>(Draft{}); }, true, true},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      SpeculativeDecoder dec = decoder(c.fn);
      Session s = session();
      const Ids got = spec_greedy(dec, prompt, kN, s);
      REQUIRE(got == want);
      const SpeculativeStats& st = dec.stats();
      INFO("rounds " << st.rounds << " drafted " << st.drafted << " accepted " << st.accepted);
      if (c.all_accepted) REQUIRE(st.accepted == st.drafted);
      if (c.none_accepted) REQUIRE(st.accepted == 0);
      if (!c.all_accepted && !c.none_accepted) {
        REQUIRE(st.accepted > 0);
        REQUIRE(st.accepted < st.drafted);
      }
      if (std::string(c.name) == "right drafts") REQUIRE(st.rounds <= (kN + 5) / 6);
      REQUIRE(st.emitted == kN - 1);
      // The session after the rounds: the prompt and the tokens, with the logits of a session
      // decoded token by token (rejected rows were rolled back).
      auto last = s.append(Ids{got.back()});
      REQUIRE(last.is_ok());
      REQUIRE(s.tokens().size() == prompt.size() + kN);
      REQUIRE(Ids(s.tokens().end() - kN, s.tokens().end()) == want);
      require_close(std::string(c.name) + ": logits after the rounds", last->data(),
                    want_logits.data(), want_logits.size(), kLogitTol);
    }
  }
}

TEST_CASE("speculative: prompt lookup drafts from a repetitive context and keeps greedy tokens",
          "[golden][speculative]") {
  // prompt1, its greedy continuation G, prompt1 again: tiny8 attends to a window of 6 tokens,
  // so the continuation of the second copy meets n-grams of G (541 356), which prompt lookup
  // drafts from.
  const Ids p1 = golden_ids("prompt1.input_ids");
  Ids prompt = p1;
  const Ids g = plain_greedy(p1, 24);
  prompt.insert(prompt.end(), g.begin(), g.end());
  prompt.insert(prompt.end(), p1.begin(), p1.end());
  constexpr int kN = 32;
  const Ids want = plain_greedy(prompt, kN);
  auto drafter = make_ngram_drafter();
  REQUIRE(drafter.is_ok());
  SpeculativeParams sp;
  sp.max_draft_tokens = 7;
  auto dec = SpeculativeDecoder::create(tiny8(), std::move(drafter).value(), sp);
  REQUIRE(dec.is_ok());
  Session s = session();
  REQUIRE(spec_greedy(*dec, prompt, kN, s) == want);
  const SpeculativeStats& st = dec->stats();
  INFO("rounds " << st.rounds << " drafted " << st.drafted << " accepted " << st.accepted);
  REQUIRE(st.drafted > 0);
  REQUIRE(st.emitted == kN - 1);
  // Output that cycles (bias on three tokens, a frequency penalty): drafts are accepted too, and
  // the penalties see every accepted draft in order.
  SamplerParams cyc = greedy_params();
  cyc.logit_bias = {{10, 50.0f}, {20, 50.0f}, {30, 50.0f}};
  cyc.frequency_penalty = 2.0f;
  const Ids want_cyc = plain_greedy(p1, kN, nullptr, cyc);
  auto dec2 = SpeculativeDecoder::create(tiny8(), std::move(make_ngram_drafter()).value(), sp);
  Session s2 = session();
  REQUIRE(spec_greedy(*dec2, p1, kN, s2, cyc) == want_cyc);
  INFO("cycling: drafted " << dec2->stats().drafted << " accepted " << dec2->stats().accepted);
  REQUIRE(dec2->stats().accepted > 0);
  REQUIRE(dec2->stats().accepted < dec2->stats().drafted);
}

TEST_CASE("speculative: sampled rounds draw from the sampler's distribution",
          "[golden][speculative]") {
  // One round with one drafted token d after `next`: the first returned token is d (accepted)
  // or the residual sample; either way it must follow p = the sampler's distribution.
  const Ids prompt = golden_ids("prompt1.input_ids");
  SamplerParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 4;  // four tokens of real mass, so the counts are informative
  sp.seed = 99;
  Session s = session();
  Sampler smp = sampler(sp);
  REQUIRE(s.append(prompt).is_ok());
  const int32_t next = 17;
  std::vector<float> p;
  {
    Session f = std::move(s.fork()).value();
    auto r = f.append(Ids{next});
    REQUIRE(r.is_ok());
    p = *smp.probabilities(*r);
  }
  int32_t top = 0, second = -1;
  for (int32_t v = 0; v < 600; ++v) top = p[v] > p[top] ? v : top;
  for (int32_t v = 0; v < 600; ++v)
    if (v != top && (second < 0 || p[v] > p[second])) second = v;
  INFO("p(top " << top << ") = " << p[top] << ", p(second " << second << ") = " << p[second]);
  REQUIRE(p[second] > 0.01);  // a distribution worth testing, not one-hot
  const int32_t draft = second;
  SpeculativeDecoder dec = decoder([&](auto, int) {
    Draft d;
    d.tokens = {draft};
    return Result<Draft>(d);
  });
  constexpr int kN = 3000;
  std::map<int32_t, int> counts;
  for (int i = 0; i < kN; ++i) {
    auto round = dec.step(s, smp, next, 2);
    REQUIRE(round.is_ok());
    counts[round->tokens[0]]++;
    // Undo the round: next (+ the kept draft) was appended.
    REQUIRE(s.rollback(static_cast<int64_t>(round->tokens.size())).is_ok());
    REQUIRE(s.position() == static_cast<int64_t>(prompt.size()));
  }
  for (int32_t v = 0; v < 600; ++v) {
    const double n = counts.count(v) ? counts[v] : 0;
    const double sigma = std::sqrt(kN * p[v] * (1 - p[v]));
    INFO("token " << v << ": " << n << " draws, expected " << kN * p[v] << " +- " << 5 * sigma);
    REQUIRE(std::abs(n - kN * p[v]) <= 5 * sigma + 1e-9);
  }
  const double rate = dec.stats().acceptance_rate();
  INFO("acceptance " << rate << " vs p(draft) " << p[draft]);
  REQUIRE(std::abs(rate - p[draft]) <= 5 * std::sqrt(p[draft] * (1 - p[draft]) / kN));
}

TEST_CASE("speculative: an accepted EOS ends the round", "[golden][speculative]") {
  const int32_t eos = tiny8().info().eos_token_id;
  SamplerParams sp = greedy_params();
  sp.logit_bias[eos] = 1000;  // the target's argmax is EOS everywhere
  Session s = session();
  Sampler smp = sampler(sp);
  REQUIRE(s.append(golden_ids("prompt1.input_ids")).is_ok());
  const int64_t pos = s.position();
  SpeculativeDecoder dec = decoder([&](auto, int) {
    Draft d;
    d.tokens = {eos, 5, 6};
    return Result<Draft>(d);
  });
  auto round = dec.step(s, smp, 9);
  REQUIRE(round.is_ok());
  REQUIRE(round->tokens == Ids{eos});
  REQUIRE(round->accepted == 1);
  REQUIRE(s.position() == pos + 1);  // next only: EOS is the following round's `next`
  REQUIRE(smp.num_generated() == 1);
}

TEST_CASE("speculative: drafts are cut by max_tokens and by the context", "[golden][speculative]") {
  const Ids prompt = golden_ids("prompt1.input_ids");
  int asked = -1;
  SpeculativeDecoder dec = decoder([&](std::span<const int32_t> ctx, int m) {
    asked = m;
    Draft d;
    for (int k = 0; k < m; ++k) d.tokens.push_back(ctx.back());
    return Result<Draft>(d);
  });
  Session s = session(static_cast<int64_t>(prompt.size()) + 3);
  Sampler smp = sampler(greedy_params());
  REQUIRE(s.append(prompt).is_ok());
  auto r = dec.step(s, smp, 4, 2);
  REQUIRE(r.is_ok());
  REQUIRE(asked == 1);  // max_tokens 2: one draft
  REQUIRE(r->tokens.size() <= 2);
  REQUIRE(s.rollback(static_cast<int64_t>(r->tokens.size())).is_ok());
  r = dec.step(s, smp, 4);
  REQUIRE(r.is_ok());
  REQUIRE(asked == 2);  // 3 positions left: next + 2 drafts
  // Fill the context to the last position: no room for a draft, then none for `next`.
  Session full = session(static_cast<int64_t>(prompt.size()) + 1);
  REQUIRE(full.append(prompt).is_ok());
  asked = -1;
  r = dec.step(full, smp, 4);
  REQUIRE(r.is_ok());
  REQUIRE(asked == -1);  // the drafter was not asked
  REQUIRE(r->tokens.size() == 1);
  r = dec.step(full, smp, r->tokens[0]);
  REQUIRE(r.status().code() == ErrorCode::kContextOverflow);
  REQUIRE_THAT(r.status().message(), Catch::Contains("no room for the next token"));
}

TEST_CASE("speculative: bad arguments and bad drafts are refused, the session unchanged",
          "[golden][speculative]") {
  const Ids prompt = golden_ids("prompt1.input_ids");
  Draft bad;
  Status drafter_status = Status::ok();
  SpeculativeDecoder dec = decoder([&](auto, int) {
    if (!drafter_status.is_ok()) return Result<Draft>(drafter_status);
    return Result<Draft>(bad);
  });
  Session s = session();
  Sampler smp = sampler(greedy_params());
  REQUIRE(s.append(prompt).is_ok());
  const Ids before = s.tokens();
  auto refused = [&](Result<SpeculativeRound> r, const std::string& what) {
    REQUIRE_FALSE(r.is_ok());
    REQUIRE_THAT(r.status().message(), Catch::Contains(what));
    REQUIRE(s.tokens() == before);
    REQUIRE(s.position() == static_cast<int64_t>(before.size()));
  };
  refused(dec.step(s, smp, 600), "next = 600 is outside the vocabulary [0, 600)");
  refused(dec.step(s, smp, -1), "next = -1");
  refused(dec.step(s, smp, 3, 0), "max_tokens = 0 must be >= 1");
  Sampler other = std::move(Sampler::create(greedy_params(), 601)).value();
  refused(dec.step(s, other, 3), "the sampler's vocab_size 601 differs from the model's 600");
  bad.tokens = {1, 2, 3, 4, 5, 6};
  refused(dec.step(s, smp, 3), "the drafter proposed 6 tokens, at most 5 were asked");
  bad.tokens = {1, 600};
  refused(dec.step(s, smp, 3), "draft token [1] = 600 is outside the vocabulary");
  bad.tokens = {1, 2};
  bad.probs.assign(600, 1.0f / 600);
  refused(dec.step(s, smp, 3), "Draft.probs has 600 entries, expected 2 tokens x vocab 600");
  bad.probs.assign(1200, 0.0f);
  bad.probs[1] = 1.0f;
  bad.probs[600 + 3] = 1.0f;
  refused(dec.step(s, smp, 3), "Draft.probs[1] gives its own token 2 probability 0");
  bad.probs[600 + 3] = 0.5f;
  bad.probs[600 + 2] = 0.2f;
  refused(dec.step(s, smp, 3), "Draft.probs row 1 sums to 0.7");
  bad.probs[600 + 2] = NAN;
  refused(dec.step(s, smp, 3), "Draft.probs[1][2] = nan is not a probability");
  drafter_status = Status(ErrorCode::kIo, "draft model gone");
  refused(dec.step(s, smp, 3), "draft model gone");
  {  // A session of another model (tiny40: the same 600-token vocabulary, another checkpoint).
    ModelParams mp;
    mp.model_dir = fixture("golden/tiny40");
    auto other_model = Model::load(mp);
    REQUIRE(other_model.is_ok());
    auto foreign = Session::create(*other_model, SessionParams{});
    REQUIRE(foreign.is_ok());
    REQUIRE(foreign->append(prompt).is_ok());
    auto r = dec.step(*foreign, smp, 3);
    REQUIRE_FALSE(r.is_ok());
    REQUIRE(r.status().code() == ErrorCode::kInvalidArgument);
    REQUIRE_THAT(r.status().message(), Catch::Contains("the session belongs to another model"));
    REQUIRE(foreign->position() == static_cast<int64_t>(prompt.size()));
  }
  REQUIRE(dec.stats().rounds == 0);
  REQUIRE(smp.num_generated() == 0);
  // Creation.
  REQUIRE_THAT(SpeculativeDecoder::create(tiny8(), nullptr).status().message(),
               Catch::Contains("drafter is null"));
  SpeculativeParams p;
  p.max_draft_tokens = 16;
  REQUIRE_THAT(SpeculativeDecoder::create(tiny8(), std::move(make_ngram_drafter()).value(), p)
                   .status()
                   .message(),
               Catch::Contains("max_draft_tokens = 16"));
}
