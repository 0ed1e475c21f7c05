// [kernel] moe_grouped_fp4_gemv_tc_decode vs Linear per descriptor (packed E2M1 + E8M0 per row per
// 32, the release routed-expert format): buckets of 0..8 rows at tiny and routed-expert shapes,
// x staged whole or in chunks, rows direct or through slot_token, E8M0 0x00 / 0xFF scales (exact
// path), rejected arguments.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "dsv41k/moe.hpp"
#include "kernel/fp4_expert_sets.hpp"
#include "kernel/gemv_case.hpp"

namespace dsv41::test {
namespace {

struct DecodeCase {
  std::vector<int32_t> counts;  // rows per local expert (max_rows = the largest)
  int64_t out = 0, in = 0;
  int tokens = 0;  // > 0: descriptor rows read x [tokens, in] through a random slot_token
  // Scale bytes forced into every expert's scales: (index, byte).
  std::vector<std::pair<size_t, uint8_t>> scale_bytes;
};

// Outputs of rows whose reference is NaN (an 0xFF scale) must be NaN; the rest within the
// fp4_expert_gemv bound (gemv_case.hpp).
void check_expert(const std::string& what, const std::vector<float>& got,
                  const GemvReference& ref) {
  std::vector<float> g, w;
  std::vector<double> tol;
  size_t nan_missed = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(ref.y[i])) {
      nan_missed += !std::isnan(got[i]);
      continue;
    }
    g.push_back(got[i]);
    w.push_back(ref.y[i]);
    tol.push_back(kGemvTolPerAbsDot * ref.abs_dot[i] + 1e-30);
  }
  INFO(what << ": " << nan_missed << " outputs with a NaN reference are not NaN");
  REQUIRE(nan_missed == 0);
  require_match(what, g, w, tol, kGemvMaxNmse);
}

void run_decode(const DecodeCase& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int n_local = static_cast<int>(c.counts.size());
  std::vector<int32_t> offsets(n_local + 1, 0);
  for (int e = 0; e < n_local; ++e) offsets[e + 1] = offsets[e] + c.counts[e];
  const int32_t slots = offsets[n_local];
  const int max_rows = std::max(1, *std::max_element(c.counts.begin(), c.counts.end()));
  REQUIRE(kernels::moe_grouped_fp4_gemv_tc_decode_supported(max_rows, c.in));
  const Fp4ExpertSets sets(3, n_local, c.out, c.in, rng, c.scale_bytes);
  const std::vector<const uint8_t*>& wt = sets.wt;
  const std::vector<const uint8_t*>& st = sets.st;
  // x rows of the slots: direct (x [slots, in]) or x [tokens, in] through slot_token.
  const int64_t x_rows = c.tokens > 0 ? c.tokens : std::max(slots, 1);
  const std::vector<float> x = random_normal(size_t(x_rows) * c.in, rng);
  std::vector<int32_t> slot_token(std::max(slots, 1), 0);
  std::uniform_int_distribution<int> token(0, std::max(c.tokens, 1) - 1);
  for (auto& t : slot_token) t = c.tokens > 0 ? token(rng) : 0;
  const int64_t cap =
      kernels::moe_tile_capacity(std::max(slots, 1), 1, n_local, kernels::kMoeGemvMaxRows);
  cuda::CudaStream stream;
  cuda::DeviceBuffer dc(c.counts.size() * 4), doff(offsets.size() * 4), dwt(n_local * 8),
      dst(n_local * 8), ddesc(size_t(cap) * sizeof(kernels::MoeGemvDesc)), dx(x.size() * 4),
      dmap(slot_token.size() * 4), dy(size_t(std::max(slots, 1)) * c.out * 4);
  dc.upload(std::span<const int32_t>(c.counts));
  doff.upload(std::span<const int32_t>(offsets));
  dwt.upload(wt.data(), wt.size() * 8);
  dst.upload(st.data(), st.size() * 8);
  dx.upload(std::span<const float>(x));
  dmap.upload(std::span<const int32_t>(slot_token));
  dy.fill_bytes(0xFF);  // NaN: an unwritten row fails
  DSV41_CUDA_CHECK(kernels::moe_expert_tiles(dc.as<int32_t>(), doff.as<int32_t>(), n_local,
                                             dwt.as<const uint8_t*>(), dst.as<const uint8_t*>(), 0,
                                             kernels::kMoeGemvMaxRows,
                                             ddesc.as<kernels::MoeGemvDesc>(), cap, stream.get()));
  DSV41_CUDA_CHECK(kernels::moe_grouped_fp4_gemv_tc_decode(
      ddesc.as<kernels::MoeGemvDesc>(), static_cast<int>(cap), max_rows, dx.as<float>(),
      c.tokens > 0 ? dmap.as<int32_t>() : nullptr, dy.as<float>(), c.out, c.in, stream.get()));
  stream.synchronize();
  if (slots == 0) return;
  std::vector<float> y(size_t(slots) * c.out);
  dy.download(y.data(), y.size() * 4);
  for (int e = 0; e < n_local; ++e) {
    if (c.counts[e] == 0) continue;
    std::vector<float> xe(size_t(c.counts[e]) * c.in);
    for (int r = 0; r < c.counts[e]; ++r) {
      const int32_t slot = offsets[e] + r;
      const size_t src = c.tokens > 0 ? size_t(slot_token[slot]) : size_t(slot);
      std::copy_n(x.begin() + src * c.in, c.in, xe.begin() + size_t(r) * c.in);
    }
    const GemvReference ref =
        gemv_reference(true, sets.weights(e), sets.scales(e), xe, c.counts[e], c.out, c.in);
    const std::vector<float> got(y.begin() + size_t(offsets[e]) * c.out,
                                 y.begin() + size_t(offsets[e + 1]) * c.out);
    check_expert(fmt::format("tc_decode out {} in {} expert {} of {} rows {} tokens {} seed {:#x}",
                             c.out, c.in, e, n_local, c.counts[e], c.tokens, seed),
                 got, ref);
  }
}

// One decode token over the released 384 experts (k = 6: six buckets of one row).
std::vector<int32_t> one_token() {
  std::vector<int32_t> c(384, 0);
  for (int e : {3, 77, 150, 201, 333, 383}) c[e] = 1;
  return c;
}

}  // namespace

TEST_CASE("moe_grouped_fp4_gemv_tc_decode matches Linear per expert at tiny shapes",
          "[kernel][moe]") {
  if (skip_without_gpu()) return;
  const uint64_t seed = fresh_seed();
  run_decode({{1}, 1, 128}, seed);
  run_decode({{0, 2, 0, 7}, 33, 128}, seed + 1);      // a partial 32-row tile, 7 rows
  run_decode({{8, 0, 3, 1, 5}, 100, 384}, seed + 2);  // 8 rows (B's 8 columns), in % 256 != 0
  run_decode({{0, 0, 0}, 8, 128}, seed + 3);          // all empty
  run_decode({{2, 1, 0, 2}, 64, 512, 3}, seed + 4);   // through slot_token
  run_decode({{1, 1}, 40, 1024, 1}, seed + 5);        // k slices (S > 1), partial tile
  // x staged in chunks of rounds (8 rows x 4096: 197 KB whole; 14 rounds of 32 at a time), with
  // k slices (S = 8 here) that each chunk holds part of.
  run_decode({{8, 3, 0, 5}, 40, 4096, 6}, seed + 6);
  std::vector<int32_t> ramp(32);  // 1..8 rows, 41 descriptors x 32 tiles: S = 2
  for (int e = 0; e < 32; ++e) ramp[e] = 1 + e % 8;
  run_decode({ramp, 1024, 4096}, seed + 7);
}

TEST_CASE("moe_grouped_fp4_gemv_tc_decode matches Linear per expert at routed-expert shapes",
          "[kernel][moe]") {
  if (skip_without_gpu()) return;
  const uint64_t seed = fresh_seed();
  run_decode({one_token(), 2304, 5120, 1}, seed);   // w1 / w3 through slot_token
  run_decode({one_token(), 5120, 2304}, seed + 1);  // w2
  std::vector<int32_t> two = one_token();           // a 2-token step: shared experts
  two[3] = two[150] = 2;
  run_decode({two, 2304, 5120, 2}, seed + 2);
  std::vector<int32_t> six(64, 0);  // a 6-row verify batch on w2 (6 staged rows at 2304)
  for (int e = 0; e < 64; e += 5) six[e] = 1 + e % 6;
  run_decode({six, 5120, 2304}, seed + 3);
  // Prefill-chunk descriptors of up to 8 rows: staged in chunks on w1 / w3 (3+ rows at 5120) and
  // on w2 (7+ rows at 2304).
  std::vector<int32_t> eight(96, 0);
  for (int e = 0; e < 96; e += 3) eight[e] = 1 + e % 8;
  run_decode({eight, 2304, 5120, 200}, seed + 4);
  run_decode({eight, 5120, 2304}, seed + 5);
}

TEST_CASE("moe_grouped_fp4_gemv_tc_decode reads E8M0 0x00 and 0xFF exactly", "[kernel][moe]") {
  if (skip_without_gpu()) return;
  // Row 0 block 0: 0x00 (2^-127); row 3 block 5: 0xFF (NaN: the whole output row is NaN); row 40
  // block 2 (another warp's round): 0x00.
  run_decode({{1, 2}, 64, 256, 0, {{0, 0x00}, {3 * 8 + 5, 0xFF}, {40 * 8 + 2, 0x00}}},
             fresh_seed());
}

TEST_CASE("moe_grouped_fp4_gemv_tc_decode rejects unsupported arguments", "[kernel][moe]") {
  if (skip_without_gpu()) return;
  using kernels::moe_grouped_fp4_gemv_tc_decode;
  using kernels::moe_grouped_fp4_gemv_tc_decode_supported;
  CHECK(moe_grouped_fp4_gemv_tc_decode_supported(1, 5120));
  CHECK(moe_grouped_fp4_gemv_tc_decode_supported(2, 5120));
  CHECK(moe_grouped_fp4_gemv_tc_decode_supported(3, 5120));  // staged in chunks
  CHECK(moe_grouped_fp4_gemv_tc_decode_supported(8, 5120));
  CHECK(moe_grouped_fp4_gemv_tc_decode_supported(6, 2304));
  CHECK_FALSE(moe_grouped_fp4_gemv_tc_decode_supported(9, 128));  // B has 8 columns
  CHECK_FALSE(moe_grouped_fp4_gemv_tc_decode_supported(0, 128));
  CHECK_FALSE(moe_grouped_fp4_gemv_tc_decode_supported(1, 96));  // in % 128
  cuda::DeviceBuffer d(4096), x(128 * 4 * 8 + 16), y(128 * 4 * 8);
  d.fill_bytes(0);  // rows 0: a valid launch computes nothing
  const auto* D = d.as<kernels::MoeGemvDesc>();
  const auto call = [&](const kernels::MoeGemvDesc* desc, int n, int max_rows, const float* xp,
                        float* yp, int64_t out, int64_t in) {
    return moe_grouped_fp4_gemv_tc_decode(desc, n, max_rows, xp, nullptr, yp, out, in, nullptr);
  };
  float* X = x.as<float>();
  float* Y = y.as<float>();
  CHECK(call(D, 4, 1, X, Y, 64, 128) == cudaSuccess);
  CHECK(call(nullptr, 4, 1, X, Y, 64, 128) == cudaErrorInvalidValue);  // no descriptors
  CHECK(call(D, 0, 1, X, Y, 64, 128) == cudaErrorInvalidValue);        // n_desc
  CHECK(call(D, 4, 0, X, Y, 64, 128) == cudaErrorInvalidValue);        // max_rows
  CHECK(call(D, 4, 9, X, Y, 64, 128) == cudaErrorInvalidValue);        // max_rows > 8
  CHECK(call(D, 4, 1, X, Y, 0, 128) == cudaErrorInvalidValue);         // out
  CHECK(call(D, 4, 1, X, Y, 64, 96) == cudaErrorInvalidValue);         // in % 128
  CHECK(call(D, 4, 1, X + 1, Y, 64, 128) == cudaErrorInvalidValue);    // x alignment
  CHECK(call(D, 4, 1, X, X, 64, 128) == cudaErrorInvalidValue);        // x aliases y
  CHECK(call(D, 4, 1, nullptr, Y, 64, 128) == cudaErrorInvalidValue);  // no x
  CHECK(call(D, 4, 1, X, nullptr, 64, 128) == cudaErrorInvalidValue);  // no y
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

}  // namespace dsv41::test
