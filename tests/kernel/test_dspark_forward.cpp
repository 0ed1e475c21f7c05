// DSpark (spec §6) on the CUDA backend vs the CPU reference (model/dspark/dspark_drafter.hpp) on
// tiny8 with the synthetic draft module (tests/golden/speculative/dspark_fixture.hpp): the
// context rows the forward writes (one-shot, chunked, longer than the ring), a round's draft
// tokens, confidences, base logits and hidden rows, after verify rows and a rollback, on a clone
// and at position 0; the refused calls. (The runtime's DSpark path on CUDA: the golden
// test_dspark.cpp cases again with DSV41_BACKEND=cuda, tests/kernel/CMakeLists.txt.)
//
// Tolerances: the forward and the stages differ from the CPU in fp32 summation order only, as the
// backbone does (test_model_forward.cpp: abs 2e-3 on tiny8 logits with the same argmax); the
// draft tokens must be identical and the confidences within 1e-4.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "backend/cuda/forward/cuda_transformer.hpp"
#include "golden/speculative/dspark_fixture.hpp"
#include "kernel_check.hpp"
#include "loader/safetensors.hpp"
#include "logits_check.hpp"
#include "model/dspark/dspark_drafter.hpp"
#include "model/transformer.hpp"
#include "support/fixtures.hpp"

namespace dsv41::test {
namespace {

using Ids = std::vector<int32_t>;
constexpr double kCudaVsCpuTol = 2e-3;  // as test_model_forward.cpp (tiny8 bound)

const std::string& dspark_dir() {
  static const std::string dir = make_tiny8_dspark();
  return dir;
}

Ids golden_ids(const std::string& name) {
  static auto file = SafetensorsFile::open(fixture("golden/tiny8/golden.safetensors"));
  std::vector<float> v = tensor_to_f32(file->view(*file->find_info(name)));
  return Ids(v.begin(), v.end());
}

void require_same_draft(const std::string& what, const DsparkProposal& got,
                        const DsparkProposal& want, int64_t V) {
  INFO(what);
  REQUIRE(got.tokens.size() == want.tokens.size());
  require_logits(what + " base logits", got.base_logits, want.base_logits, V, kCudaVsCpuTol);
  const MaxDiff h = max_abs_diff(got.hidden, want.hidden);
  INFO(what << ": hidden max |diff| " << h.worst << " at " << h.at);
  REQUIRE(h.worst <= kCudaVsCpuTol);
  const MaxDiff c = max_abs_diff(got.confidence, want.confidence);
  INFO(what << ": confidence max |diff| " << c.worst << " at " << c.at);
  REQUIRE(c.worst <= 1e-4);
  INFO(what << ": tokens got " << fmt::format("{}", fmt::join(got.tokens, " ")) << " want "
            << fmt::format("{}", fmt::join(want.tokens, " ")));
  REQUIRE(got.tokens == want.tokens);
}

}  // namespace

TEST_CASE(
    "dspark cuda: drafts match the CPU drafter (prefill, chunks, verify rows, rollback, clone)",
    "[kernel]") {
  if (skip_without_gpu()) return;
  std::unique_ptr<Transformer> cpu = Transformer::load(dspark_dir(), 1, nullptr, "", true);
  DsparkDrafter drafter(*cpu);
  const int64_t V = cpu->config().text.vocab_size;
  const Ids prompt = golden_ids("prompt1.input_ids");  // longer than the ring (window 6 + 5)
  REQUIRE(prompt.size() > 11);
  for (const int chunk : {64, 5}) {
    const std::string run = "max_chunk " + std::to_string(chunk);
    cuda::CudaForwardOptions opts;
    opts.max_chunk = chunk;
    opts.max_context = 256;
    auto gpu = cuda::CudaTransformer::upload(*cpu, opts);
    REQUIRE(gpu->has_dspark());
    StateOptions so;
    so.max_rollback = 5;
    SequenceState st = cpu->new_sequence(so);
    cuda::DeviceSequence seq = gpu->new_sequence(0, 5);
    require_logits(run + " prefill", gpu->forward(seq, prompt), cpu->forward(st, prompt), V,
                   kCudaVsCpuTol);
    const int32_t next = 17;
    require_same_draft(run + " after the prompt", gpu->dspark_draft(seq, next, true),
                       drafter.draft(st, next), V);
    // Verify rows [next, drafts...], then 3 of them rolled back, then another round.
    const DsparkProposal p = drafter.draft(st, next);
    Ids verify{next};
    verify.insert(verify.end(), p.tokens.begin(), p.tokens.begin() + 4);
    require_logits(run + " verify rows", gpu->forward(seq, verify), cpu->forward(st, verify), V,
                   kCudaVsCpuTol);
    gpu->rollback(seq, 3);
    st.rollback(3);
    require_same_draft(run + " after a rollback of 3", gpu->dspark_draft(seq, 9, true),
                       drafter.draft(st, 9), V);
    // A clone drafts as its source.
    cuda::DeviceSequence copy = gpu->clone(seq, 128);
    require_same_draft(run + " on a clone", gpu->dspark_draft(copy, 9, true), drafter.draft(st, 9),
                       V);
    // An empty sequence has no context rows to read: the block attends to itself.
    SequenceState empty_st = cpu->new_sequence();
    cuda::DeviceSequence empty = gpu->new_sequence();
    require_same_draft(run + " at position 0", gpu->dspark_draft(empty, 3, true),
                       drafter.draft(empty_st, 3), V);
    // Refused: next outside the vocabulary (the sequence stays usable).
    REQUIRE_THROWS_WITH(gpu->dspark_draft(seq, static_cast<int32_t>(V)),
                        Catch::Contains("next = 600"));
    REQUIRE(gpu->dspark_draft(seq, 9).tokens == drafter.draft(st, 9).tokens);
  }
  // A draft block is one workspace step: a smaller max_chunk is refused at upload, named.
  cuda::CudaForwardOptions small;
  small.max_chunk = 4;
  REQUIRE_THROWS_WITH(cuda::CudaTransformer::upload(*cpu, small),
                      Catch::Contains("dspark_block_size = 5 exceeds CudaForwardOptions.max_chunk "
                                      "= 4"));
  // A model loaded without the module has none to draft with.
  std::unique_ptr<Transformer> plain = Transformer::load(dspark_dir(), 1);
  auto gpu = cuda::CudaTransformer::upload(*plain);
  REQUIRE_FALSE(gpu->has_dspark());
  cuda::DeviceSequence seq = gpu->new_sequence(64);
  REQUIRE_THROWS_WITH(gpu->dspark_draft(seq, 1), Catch::Contains("without the DSpark module"));
}

}  // namespace dsv41::test
