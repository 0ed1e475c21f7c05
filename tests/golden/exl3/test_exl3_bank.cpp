// golden/exl3/bank_example: plan + bank resolution (first root wins, plain before .part, decoys),
// the dense weights of every resolved (layer, expert, projection), and the ExpertStore entry point.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <random>

#include "exl3/exl3_linear.hpp"
#include "exl3/expert_bank.hpp"
#include "exl3/expert_store.hpp"
#include "golden_io.hpp"
#include "support/tolerance.hpp"

using namespace dsv41;
using namespace dsv41::exl3;
using dsv41::test::exl3_fixture;

namespace {

std::unique_ptr<ExpertBank> open_example(int world = 1, int rank = 0) {
  const std::string dir = exl3_fixture("bank_example");
  ExpertBank::Options opt;
  opt.n_experts = 8;
  opt.world = world;
  opt.rank = rank;
  return ExpertBank::open(dir, AllocationPlan::load(dir + "/exl3/plan/plan.json"), opt);
}

}  // namespace

TEST_CASE("exl3 golden: bank example resolves to expected_resolution.json", "[golden][exl3]") {
  const auto bank = open_example();
  REQUIRE(bank->hidden() == 256);
  REQUIRE(bank->inter() == 128);
  simdjson::dom::parser parser;
  simdjson::dom::element want = parser.load(exl3_fixture("bank_example/expected_resolution.json"));
  const std::string dir = exl3_fixture("bank_example") + "/";
  size_t checked = 0;
  for (auto [layer_key, experts] : want["resolution"].get_object()) {
    const int layer = std::stoi(std::string(layer_key));
    for (auto [expert_key, r] : experts.get_object()) {
      const int expert = std::stoi(std::string(expert_key));
      INFO("layer " << layer << " expert " << expert);
      const BankExpert* e = bank->find(layer, expert);
      REQUIRE(e != nullptr);
      REQUIRE(e->K == r["K"].get_int64().value());
      REQUIRE(bank->plan().state(layer, expert) == r["state"].get_string().value());
      REQUIRE(e->file == dir + std::string(r["file"].get_string().value()));
      ++checked;
    }
  }
  REQUIRE(checked == 16);
  REQUIRE(bank->expert_count() == 16);
  const auto by_k0 = bank->experts_by_k(0);
  REQUIRE(by_k0.at(2) == std::vector<int>{0, 1, 2, 4, 6, 7});
  REQUIRE(by_k0.at(3) == std::vector<int>{3, 5});
  const auto by_k1 = bank->experts_by_k(1);
  REQUIRE(by_k1.at(3) == std::vector<int>{2, 6});
  REQUIRE(by_k1.at(5) == std::vector<int>{0, 1, 3, 4, 5, 7});
}

TEST_CASE("exl3 golden: bank example dense weights and expert store", "[golden][exl3]") {
  const auto bank = open_example();
  auto dense = SafetensorsFile::open(exl3_fixture("bank_example/expected_dense.safetensors"));
  ExpertStore store(bank.get(), nullptr);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  size_t checked = 0;
  for (int layer = 0; layer < 2; ++layer) {
    for (int expert = 0; expert < 8; ++expert) {
      for (ExpertProj p : {ExpertProj::kGate, ExpertProj::kUp, ExpertProj::kDown}) {
        const std::string name =
            fmt::format("layers.{}.ffn.experts.{}.{}.weight", layer, expert, proj_key(p));
        INFO(name);
        const Exl3Tensor& t = bank->find(layer, expert)->proj[static_cast<int>(p)];
        // expected_dense is nn.Linear [out, in]; EXL3's W is [in, out].
        const std::vector<float> want = test::f32_of(*dense, name);
        REQUIRE(test::tensor(*dense, name).shape() == std::vector<int64_t>{t.n, t.k});
        const std::vector<float> w = reconstruct_weight(t);
        std::vector<float> w_t(w.size());
        for (int64_t i = 0; i < t.k; ++i)
          for (int64_t o = 0; o < t.n; ++o) w_t[o * t.k + i] = w[i * t.n + o];
        test::require_rel_ulps(name, w_t, want, 1.0);

        // The provider's y = x·W_modelᵀ against the dense oracle weight.
        const ExpertShape s = store.shape(layer, expert, p);
        REQUIRE(s.in == t.k);
        REQUIRE(s.out == t.n);
        const size_t rows = 3;
        std::vector<float> x(rows * s.in), y(rows * s.out);
        for (float& v : x) v = normal(rng);
        store.linear(layer, expert, p, x.data(), rows, y.data());
        std::vector<double> y_ref(y.size(), 0.0);
        double y_max = 0;
        for (size_t r = 0; r < rows; ++r)
          for (int64_t o = 0; o < s.out; ++o) {
            double acc = 0;
            for (int64_t i = 0; i < s.in; ++i) acc += double(x[r * s.in + i]) * want[o * s.in + i];
            y_ref[r * s.out + o] = acc;
            y_max = std::max(y_max, std::fabs(acc));
          }
        test::require_close(name + " provider y", y, y_ref, y.size(), 3e-6 * y_max);
        ++checked;
      }
    }
  }
  REQUIRE(checked == 48);
}

TEST_CASE("exl3 golden: bank example split over two ranks", "[golden][exl3]") {
  const auto full = open_example();
  uint64_t sum = 0;
  for (int rank = 0; rank < 2; ++rank) {
    const auto bank = open_example(2, rank);
    REQUIRE(bank->range().first == 4 * rank);
    REQUIRE(bank->range().last == 4 * rank + 4);
    REQUIRE(bank->expert_count() == 8);
    REQUIRE(bank->bytes_in(bank->range()) == full->bytes_in(bank->range()));
    ExpertStore store(bank.get(), nullptr);
    for (int e = 0; e < 8; ++e) REQUIRE(store.has(0, e) == bank->range().contains(e));
    sum += bank->bytes_in(bank->range());
  }
  REQUIRE(sum == full->bytes_in({0, 8}));
  REQUIRE(sum > 0);
}
