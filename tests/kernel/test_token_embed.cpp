// [kernel] embed_rows vs the CPU reference ModelWeights::embed_row + the hc-stream copy of
// Transformer::forward (spec §3). BF16 -> fp32 is exact, so every element must be bit-equal.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "dsv41k/engram.hpp"
#include "kernel/kernel_check.hpp"
#include "model/model_weights.hpp"

namespace dsv41::test {
namespace {

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// Bit-equal, or both NaN (the device writes its own NaN payload). Names the first mismatch as
// [t, k, d] with both values and bit patterns.
void require_rows_equal(const std::string& ctx, const std::vector<float>& got,
                        const std::vector<float>& want, int hc, int64_t D) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same = bits(got[i]) == bits(want[i]) || (std::isnan(got[i]) && std::isnan(want[i]));
    if (!same && bad++ == 0) first = i;
  }
  if (bad != 0) {
    const int64_t d = first % D, k = (first / D) % hc, t = first / (D * hc);
    FAIL(
        fmt::format("embed_rows {}: {} of {} elements differ; first H[{}, {}, {}] (index {}) got "
                    "{} ({:#010x}) want {} ({:#010x})",
                    ctx, bad, got.size(), t, k, d, first, got[first], bits(got[first]), want[first],
                    bits(want[first])));
  }
}

// `bad_ids`: also put ids outside [0, vocab) in, whose rows must come back NaN. `images`: every
// third position is an image-span position whose rows come from a dense [T, D] block of any fp32
// bit patterns (embed_rows_with_images; the CPU reference copies image_embeds unchanged).
void run_embed(int64_t T, int hc, int64_t D, int64_t vocab, bool bad_ids = false,
               bool images = false) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  // Every 16-bit pattern (NaN, inf, subnormals, -0 included): the conversion is a shift.
  std::uniform_int_distribution<int> any_bits(0, 0xFFFF);
  std::vector<uint16_t> table(static_cast<size_t>(vocab * D));
  for (auto& b : table) b = static_cast<uint16_t>(any_bits(rng));
  std::uniform_int_distribution<int32_t> any_id(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> ids(static_cast<size_t>(T));
  for (auto& id : ids) id = any_id(rng);
  if (bad_ids && T >= 2) {
    ids[0] = -1;
    ids[T - 1] = static_cast<int32_t>(vocab);
  }

  TensorInfo info;
  info.name = "embed.weight";
  info.dtype = DType::kBF16;
  info.shape = {vocab, D};
  ModelWeights mw;
  mw.embed.info = &info;
  mw.embed.data = reinterpret_cast<const uint8_t*>(table.data());  // little-endian host
  std::vector<uint8_t> flags(static_cast<size_t>(T), 0);
  std::vector<float> image_rows(static_cast<size_t>(T * D));
  if (images) {
    for (int64_t t = 0; t < T; ++t) flags[t] = (t % 3 == 1) ? 1 : 0;
    std::uniform_int_distribution<uint32_t> any_word;
    for (float& v : image_rows) {
      const uint32_t u = any_word(rng);
      std::memcpy(&v, &u, 4);
    }
  }
  std::vector<float> want(static_cast<size_t>(T * hc * D), std::nanf(""));
  for (int64_t t = 0; t < T; ++t) {
    float* h = want.data() + t * hc * D;
    if (flags[t] != 0) {
      std::copy_n(image_rows.data() + t * D, D, h);
    } else {
      if (ids[t] < 0 || ids[t] >= vocab) continue;  // the contract: NaN rows
      mw.embed_row(ids[t], h);
    }
    for (int k = 1; k < hc; ++k) std::copy_n(h, D, h + k * D);
  }

  cuda::CudaStream stream;
  cuda::DeviceBuffer dids(ids.size() * 4), dtable(table.size() * 2), dH(want.size() * 4);
  dids.upload(std::span<const int32_t>(ids));
  dtable.upload(std::span<const uint16_t>(table));
  dH.fill_bytes(0x55);  // a finite pattern: an unwritten element fails the bit comparison
  if (images) {
    cuda::DeviceBuffer dflags(flags.size()), drows(image_rows.size() * 4);
    dflags.upload(std::span<const uint8_t>(flags));
    drows.upload(std::span<const float>(image_rows));
    DSV41_CUDA_CHECK(kernels::embed_rows_with_images(
        dids.as<int32_t>(), dtable.as<uint16_t>(), dflags.as<uint8_t>(), drows.as<float>(),
        dH.as<float>(), T, hc, D, vocab, stream.get()));
    stream.synchronize();
  } else {
    DSV41_CUDA_CHECK(kernels::embed_rows(dids.as<int32_t>(), dtable.as<uint16_t>(), dH.as<float>(),
                                         T, hc, D, vocab, stream.get()));
    stream.synchronize();
  }
  std::vector<float> got(want.size());
  dH.download(std::span<float>(got));
  require_rows_equal(
      fmt::format("T {} hc {} D {} vocab {} images {} seed {:#x}", T, hc, D, vocab, images, seed),
      got, want, hc, D);
}

}  // namespace

TEST_CASE("embed_rows matches embed_row replicated to the streams", "[kernel][token]") {
  if (skip_without_gpu()) return;
  run_embed(1, 1, 1, 1);       // degenerate
  run_embed(5, 4, 96, 300);    // tiny8: hidden 96, hc 4
  run_embed(3, 8, 257, 1000);  // the largest hc, D not a multiple of the block
  for (int64_t T : {1, 2, 7, 16, 300}) run_embed(T, 4, 5120, 2048);  // released D 5120, hc 4
}

TEST_CASE("embed_rows writes NaN rows for ids outside the vocabulary", "[kernel][token]") {
  if (skip_without_gpu()) return;
  run_embed(4, 4, 96, 50, true);
}

TEST_CASE("embed_rows_with_images copies image rows at flagged positions bit-exactly",
          "[kernel][token]") {
  if (skip_without_gpu()) return;
  run_embed(7, 4, 96, 300, false, true);      // tiny8 widths
  run_embed(5, 4, 96, 50, true, true);        // ids outside the vocabulary beside image rows
  run_embed(40, 4, 5120, 2048, false, true);  // released D
}

// Rejected before anything is dereferenced: no device needed.
TEST_CASE("embed_rows rejects unsupported arguments", "[kernel][token]") {
  int32_t ids[4] = {};
  uint16_t table[16] = {};
  float H[64] = {};
  auto call = [&](const int32_t* i, const uint16_t* w, float* h, int64_t T, int hc, int64_t D,
                  int64_t vocab) { return kernels::embed_rows(i, w, h, T, hc, D, vocab, nullptr); };
  CHECK(call(nullptr, table, H, 1, 4, 4, 4) == cudaErrorInvalidValue);
  CHECK(call(ids, nullptr, H, 1, 4, 4, 4) == cudaErrorInvalidValue);
  CHECK(call(ids, table, nullptr, 1, 4, 4, 4) == cudaErrorInvalidValue);
  CHECK(call(ids, table, H, -1, 4, 4, 4) == cudaErrorInvalidValue);
  CHECK(call(ids, table, H, 1, 0, 4, 4) == cudaErrorInvalidValue);
  CHECK(call(ids, table, H, 1, 9, 4, 4) == cudaErrorInvalidValue);
  CHECK(call(ids, table, H, 1, 4, 0, 4) == cudaErrorInvalidValue);
  CHECK(call(ids, table, H, 1, 4, 4, 0) == cudaErrorInvalidValue);
  CHECK(call(ids, table, H, int64_t{1} << 40, 4, 4096, 4) == cudaErrorInvalidValue);  // grid
  CHECK(call(ids, table, H, 0, 4, 4, 4) == cudaSuccess);  // T == 0 launches nothing
  uint8_t flags[4] = {};
  float rows[16] = {};
  CHECK(kernels::embed_rows_with_images(ids, table, nullptr, rows, H, 1, 4, 4, 4, nullptr) ==
        cudaErrorInvalidValue);
  CHECK(kernels::embed_rows_with_images(ids, table, flags, nullptr, H, 1, 4, 4, 4, nullptr) ==
        cudaErrorInvalidValue);
  CHECK(kernels::embed_rows_with_images(ids, table, flags, rows, H, 1, 0, 4, 4, nullptr) ==
        cudaErrorInvalidValue);
  CHECK(kernels::embed_rows_with_images(ids, table, flags, rows, H, 0, 4, 4, 4, nullptr) ==
        cudaSuccess);
}

}  // namespace dsv41::test
