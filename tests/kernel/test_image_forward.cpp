// [kernel] Image-span positions (spec §7.4) through the CUDA forward: CudaTransformer::forward
// with image_embeds against the CPU reference Transformer::forward fed the same span, on the tiny
// vision fixture (tests/golden/vision/vision_fixture.hpp: tiny8 text model + a seeded tower).
// The span comes from the CPU tower (VisionTower::span); what is under test is the embedding
// substitution, its split over chunks and the rest of the forward with those rows. Tolerance as
// test_model_forward.cpp (kCudaVsCpuTol 2e-3 with argmax equal on every row).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "backend/cuda/forward/cuda_transformer.hpp"
#include "core/check.hpp"
#include "golden/vision/vision_fixture.hpp"
#include "kernel_check.hpp"
#include "logits_check.hpp"
#include "model/transformer.hpp"
#include "vision/image_patches.hpp"
#include "vision/vision_tower.hpp"

namespace dsv41::test {
namespace {

constexpr double kCudaVsCpuTol = 2e-3;
constexpr int32_t kImageId = 599;  // tiny8's image_token_id

struct ImageCase {
  std::unique_ptr<Transformer> cpu;
  std::vector<float> span;  // [positions, hidden]
  int64_t positions = 0;
};

ImageCase image_case(uint32_t seed) {
  ImageCase c;
  c.cpu = Transformer::load(make_tiny8_vision(), 2);
  vision::VisionTower tower(c.cpu->checkpoint(), c.cpu->config(), c.cpu->pool());
  std::mt19937 rng(seed);
  std::vector<uint8_t> rgb(size_t{3} * 20 * 14);
  for (uint8_t& b : rgb) b = static_cast<uint8_t>(rng() & 0xFF);
  Result<vision::ImagePatches> p =
      vision::make_patches(vision::RgbImage{20, 14, rgb}, tower.config());
  REQUIRE(p.is_ok());
  c.span = tower.span(*p);
  c.positions = static_cast<int64_t>(c.span.size()) / c.cpu->config().text.hidden_size;
  REQUIRE(c.positions == 17);
  return c;
}

// [0, 5, 6] + the span (token 599) + [7, 8], and its flags.
std::vector<int32_t> span_ids(const ImageCase& c) {
  std::vector<int32_t> ids(static_cast<size_t>(c.positions + 5), kImageId);
  ids[0] = 0, ids[1] = 5, ids[2] = 6;
  ids[ids.size() - 2] = 7, ids[ids.size() - 1] = 8;
  return ids;
}

std::vector<uint8_t> span_flags(const ImageCase& c) {
  std::vector<uint8_t> flags(static_cast<size_t>(c.positions + 5), 1);
  flags[0] = flags[1] = flags[2] = 0;
  flags[flags.size() - 2] = flags[flags.size() - 1] = 0;
  return flags;
}

std::unique_ptr<cuda::CudaTransformer> upload(const Transformer& cpu, int max_chunk) {
  cuda::CudaForwardOptions opts;
  opts.max_chunk = max_chunk;
  opts.max_context = 256;
  return cuda::CudaTransformer::upload(cpu, opts);
}

// Logits [rows, V] of one sequence against the CPU's: every row within kCudaVsCpuTol except at
// most one run of < `window` consecutive rows, each within kFlipTol and with the same argmax. One
// window K/V value crossing an FP8 rounding boundary moves exactly the rows whose window holds it
// (inputs differing from the CPU's by ~1e-6 can do that on this image: see the one-chunk case);
// a lost or misplaced image row moves every later row by ~8. Prints each row's max |diff|.
constexpr double kFlipTol = 5e-2;
void require_logits_one_flip(const std::string& what, const std::vector<float>& got,
                             const std::vector<float>& want, int64_t V, int64_t window) {
  REQUIRE(got.size() == want.size());
  int64_t first_off = -1, last_off = -1;
  std::string diffs;
  for (int64_t r = 0; r < static_cast<int64_t>(got.size()) / V; ++r) {
    double w = 0;
    for (int64_t v = 0; v < V; ++v)
      w = std::max(w, std::fabs(static_cast<double>(got[r * V + v]) - want[r * V + v]));
    diffs += fmt::format(" {:.1e}", w);
    INFO(what << ", row " << r << ": max |diff| " << w);
    CHECK(w <= kFlipTol);
    CHECK(argmax_row(got.data() + r * V, V) == argmax_row(want.data() + r * V, V));
    if (w > kCudaVsCpuTol) {
      if (first_off < 0) first_off = r;
      last_off = r;
    }
  }
  std::printf("%s, max |logits diff| per row:%s\n", what.c_str(), diffs.c_str());
  INFO(what << ": rows " << first_off << ".." << last_off << " beyond " << kCudaVsCpuTol << ":"
            << diffs);
  CHECK((first_off < 0 || last_off - first_off < window));
}

}  // namespace

TEST_CASE("cuda forward: image-span rows match the CPU reference, the span split over chunks",
          "[kernel][model][vision]") {
  if (skip_without_gpu()) return;
  const ImageCase c = image_case(21);
  const int64_t V = c.cpu->config().text.vocab_size;
  // Text, the span and text again in one call: with max_chunk 5 the span starts mid-chunk and
  // crosses four chunk edges, so each chunk takes its own slice of the image rows; 16 is the
  // largest chunk of the GEMV path (one edge inside the span). The token after the span is the
  // last row (it attends to the span, and Engram hashes saw the flags). Since the 16-key
  // attention tiles (stop 30) the max_chunk 5 run moves rows 17..21 as the one-chunk case below
  // does (row 20 by 1.1e-2, H100), hence the same one-flip rule (docs/testing.md).
  const int64_t window = c.cpu->config().text.sliding_window;
  const std::vector<int32_t> ids = span_ids(c);
  const std::vector<uint8_t> flags = span_flags(c);
  SequenceState st = c.cpu->new_sequence();
  std::vector<float> want = c.cpu->forward(st, ids, flags, c.span);
  const std::vector<float> want_next = c.cpu->forward(st, std::vector<int32_t>{9});
  want.insert(want.end(), want_next.begin(), want_next.end());
  for (int chunk : {5, 16}) {
    std::unique_ptr<cuda::CudaTransformer> gpu = upload(*c.cpu, chunk);
    cuda::DeviceSequence seq = gpu->new_sequence();
    std::vector<float> got =
        gpu->forward(seq, ids, flags, cuda::CudaTransformer::LogitRows::kAll, c.span);
    const std::vector<float> got_next = gpu->forward(seq, std::vector<int32_t>{9});
    got.insert(got.end(), got_next.begin(), got_next.end());
    require_logits_one_flip(fmt::format("image span and the token after it, max_chunk {}", chunk),
                            got, want, V, window);
    CHECK(seq.pos() == static_cast<int64_t>(ids.size()) + 1);
  }
}

TEST_CASE("cuda forward: image-span rows in one tensor-core prefill chunk match the CPU reference",
          "[kernel][model][vision]") {
  if (skip_without_gpu()) return;
  // 22 rows in one chunk run the tensor-core GEMM path, whose inputs differ from the CPU's by
  // ~5e-6. On this image that moves one window K/V value of position 17 across an FP8 rounding
  // boundary: rows 17..21 (the positions whose 6-entry window holds it) differ by 3.4e-3..1.1e-2,
  // every other row by <= 1e-5 (H100; image seed 2 does the same at rows 10..15, seeds 1, 3-6 not
  // at all; the text prompts of test_model_forward never cross one). So: rows beyond
  // kCudaVsCpuTol must be one run of at most sliding_window rows, each within kFlipTol and with
  // the same argmax. A lost or misplaced image row moves every later row by ~8 (the next case).
  const ImageCase c = image_case(21);
  const int64_t V = c.cpu->config().text.vocab_size;
  const int64_t window = c.cpu->config().text.sliding_window;
  const std::vector<int32_t> ids = span_ids(c);
  const std::vector<uint8_t> flags = span_flags(c);
  SequenceState st = c.cpu->new_sequence();
  const std::vector<float> want = c.cpu->forward(st, ids, flags, c.span);
  std::unique_ptr<cuda::CudaTransformer> gpu = upload(*c.cpu, 32);
  cuda::DeviceSequence seq = gpu->new_sequence();
  const std::vector<float> got =
      gpu->forward(seq, ids, flags, cuda::CudaTransformer::LogitRows::kAll, c.span);
  require_logits_one_flip("one 22-row chunk", got, want, V, window);
}

TEST_CASE("cuda forward: image rows are not the token rows", "[kernel][model][vision]") {
  if (skip_without_gpu()) return;
  // Without image_embeds the span positions embed token 599; the logits must differ from the
  // run with the image (else the rows were dropped on the way to the device).
  const ImageCase c = image_case(5);
  std::unique_ptr<cuda::CudaTransformer> gpu = cuda::CudaTransformer::upload(*c.cpu, {});
  const std::vector<int32_t> ids(static_cast<size_t>(c.positions), kImageId);
  const std::vector<uint8_t> flags(static_cast<size_t>(c.positions), 1);
  cuda::DeviceSequence a = gpu->new_sequence(), b = gpu->new_sequence();
  using Rows = cuda::CudaTransformer::LogitRows;
  const std::vector<float> with = gpu->forward(a, ids, flags, Rows::kLast, c.span);
  const std::vector<float> without = gpu->forward(b, ids, flags, Rows::kLast);
  double diff = 0;
  for (size_t i = 0; i < with.size(); ++i)
    diff = std::max(diff, std::fabs(double{with[i]} - without[i]));
  INFO("max |logits(with image) - logits(token rows)| = " << diff);
  CHECK(diff > 1e-2);
}

TEST_CASE("cuda forward: a wrong number of image values is refused, the sequence unchanged",
          "[kernel][model][vision]") {
  if (skip_without_gpu()) return;
  const ImageCase c = image_case(7);
  std::unique_ptr<cuda::CudaTransformer> gpu = cuda::CudaTransformer::upload(*c.cpu, {});
  cuda::DeviceSequence seq = gpu->new_sequence();
  const std::vector<int32_t> ids(static_cast<size_t>(c.positions), kImageId);
  const std::vector<uint8_t> flags(static_cast<size_t>(c.positions), 1);
  const std::span<const float> short_rows(c.span.data(), c.span.size() - 96);
  try {
    (void)gpu->forward(seq, ids, flags, cuda::CudaTransformer::LogitRows::kAll, short_rows);
    FAIL("16 rows for 17 image positions were accepted");
  } catch (const detail::Failure& f) {
    CHECK(f.code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(f.message(),
               Catch::Contains("1536 image embedding values for 17 image positions of width 96"));
  }
  CHECK(seq.pos() == 0);
  // Still usable: the right rows go through.
  (void)gpu->forward(seq, ids, flags, cuda::CudaTransformer::LogitRows::kLast, c.span);
  CHECK(seq.pos() == c.positions);
}

}  // namespace dsv41::test
