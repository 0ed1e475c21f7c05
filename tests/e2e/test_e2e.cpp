// Real weights (DSV41_MODEL_DIR; backend from DSV41_BACKEND): the model knows a fact, speculative
// decoding keeps greedy output, and — when the checkpoint has the DSpark module — DSpark drafts
// are accepted often enough to be the model's own draft head (no public DSpark oracle exists:
// this acceptance rate is the check of docs/speculative.md's open points), and — when the
// checkpoint has the vision tower — the model names the two colours of an image.
#include <catch2/catch.hpp>
#include <cctype>
#include <cstdlib>
#include <string>

#include "dsv41/sampler.hpp"
#include "dsv41/session.hpp"
#include "dsv41/speculative.hpp"

using namespace dsv41;
using Ids = std::vector<int32_t>;

namespace {

std::string model_dir() { return std::getenv("DSV41_MODEL_DIR"); }

Model load() {
  ModelParams p;
  p.model_dir = model_dir();
  auto m = Model::load(p);
  INFO(m.status().to_string());
  REQUIRE(m.is_ok());
  return std::move(m).value();
}

const Model& model() {
  static Model m = load();
  return m;
}

Sampler greedy(const Model& m) {
  SamplerParams p;
  p.temperature = 0;
  return std::move(Sampler::create(p, m.info().vocab_size)).value();
}

Ids prompt(const Model& m, const std::string& text) {
  auto ids = m.tokenize("<｜begin▁of▁sentence｜>" + text);
  REQUIRE(ids.is_ok());
  return *ids;
}

// n greedy tokens after `p`, plainly or through `dec`.
Ids decode(const Model& m, const Ids& p, int n, SpeculativeDecoder* dec) {
  Session s = std::move(Session::create(m)).value();
  Sampler smp = greedy(m);
  auto r = s.append(p);
  REQUIRE(r.is_ok());
  Ids out = {*smp.sample(*r)};
  REQUIRE(smp.accept(out.back()).is_ok());
  while (static_cast<int>(out.size()) < n) {
    if (dec) {
      auto round = dec->step(s, smp, out.back(), n - static_cast<int64_t>(out.size()));
      INFO(round.status().to_string());
      REQUIRE(round.is_ok());
      out.insert(out.end(), round->tokens.begin(), round->tokens.end());
    } else {
      r = s.append(Ids{out.back()});
      REQUIRE(r.is_ok());
      out.push_back(*smp.sample(*r));
      REQUIRE(smp.accept(out.back()).is_ok());
    }
  }
  return out;
}

}  // namespace

TEST_CASE("e2e: the released model completes a fact", "[e2e]") {
  const Model& m = model();
  const Ids out = decode(m, prompt(m, "The capital of France is"), 8, nullptr);
  const std::string text = *m.detokenize(out);
  INFO("continuation: " << text);
  REQUIRE(text.find("Paris") != std::string::npos);
}

TEST_CASE("e2e: prompt-lookup speculative decoding keeps greedy output", "[e2e]") {
  const Model& m = model();
  const Ids p = prompt(m,
                       "Repeat this line exactly three times:\n"
                       "int add(int a, int b) { return a + b; }\n");
  const Ids want = decode(m, p, 48, nullptr);
  auto dec = SpeculativeDecoder::create(m, std::move(make_ngram_drafter()).value());
  REQUIRE(decode(m, p, 48, &*dec) == want);
  WARN("prompt lookup: " << dec->stats().accepted << " of " << dec->stats().drafted
                         << " drafts accepted in " << dec->stats().rounds << " rounds");
  REQUIRE(dec->stats().accepted > 0);
}

// Hidden ([.dspark]: run with `test_e2e "[dspark]"`): the DSpark drafter runs on the fp32 CPU
// reference only, hours for the released model on a CPU; skipped with the reason when the
// checkpoint has no draft module.
TEST_CASE("e2e: DSpark drafts keep greedy output and are mostly accepted", "[e2e][.dspark]") {
  ModelParams mp;
  mp.model_dir = model_dir();
  mp.dspark = true;
  mp.backend = "cpu";
  auto loaded = Model::load(mp);
  if (!loaded.is_ok() && loaded.status().code() == ErrorCode::kUnsupported) {
    WARN("skipped: " << loaded.status().message());
    return;
  }
  INFO(loaded.status().to_string());
  REQUIRE(loaded.is_ok());
  const Model& m = *loaded;
  const Ids p = prompt(m, "Write a short paragraph about the history of the printing press.");
  const Ids want = decode(m, p, 64, nullptr);
  auto dec = SpeculativeDecoder::create(m, std::move(make_dspark_drafter(m)).value());
  REQUIRE(decode(m, p, 64, &*dec) == want);
  const SpeculativeStats& st = dec->stats();
  WARN("DSpark: " << st.accepted << " of " << st.drafted << " drafts accepted ("
                  << st.acceptance_rate() << "), " << st.emitted << " tokens in " << st.rounds
                  << " rounds");
  // A floor, not a target: the synthetic (untrained) module of the golden tests gets ~0. It
  // catches wiring errors; settling spec §10 items 2-3 (tap at layer inputs vs outputs, slot 0
  // alignment) needs the rate of each convention measured side by side (WARN above).
  REQUIRE(st.acceptance_rate() > 0.2);
}

// A 544x544 image, left half red, right half blue, asked about in a non-thinking chat turn: the
// answer names both colours. Skipped with the reason when the checkpoint or backend cannot use
// images (docs/vision.md).
TEST_CASE("e2e: the model sees the colours of an image", "[e2e]") {
  const Model& m = model();
  if (Status st = m.image_support(); !st.is_ok()) {
    WARN("skipped: " << st.message());
    return;
  }
  const int w = 544, h = 544;
  std::vector<uint8_t> rgb(size_t{3} * w * h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &rgb[(size_t(y) * w + x) * 3];
      p[0] = x < w / 2 ? 255 : 0;
      p[2] = x < w / 2 ? 0 : 255;
    }
  auto image = m.encode_image({w, h, rgb});
  INFO(image.status().to_string());
  REQUIRE(image.is_ok());
  Session s = std::move(Session::create(m)).value();
  REQUIRE(s.append(prompt(m,
                          "<｜User｜>Which two colours does this image show? Answer in a few "
                          "words.\n\n"))
              .is_ok());
  REQUIRE(s.append_image(*image).is_ok());
  auto ids = m.tokenize("<｜Assistant｜></think>");
  REQUIRE(ids.is_ok());
  auto r = s.append(*ids);
  REQUIRE(r.is_ok());
  Sampler smp = greedy(m);
  Ids out;
  for (int i = 0; i < 16; ++i) {
    out.push_back(*smp.sample(*r));
    REQUIRE(smp.accept(out.back()).is_ok());
    r = s.append(Ids{out.back()});
    REQUIRE(r.is_ok());
  }
  std::string text = *m.detokenize(out);
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  INFO("answer: " << text);
  CHECK(text.find("red") != std::string::npos);
  CHECK(text.find("blue") != std::string::npos);
}
