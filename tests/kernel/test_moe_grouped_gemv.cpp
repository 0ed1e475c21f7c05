// [kernel] moe_expert_descriptors + moe_grouped_fp4_gemv vs Linear (packed E2M1 + E8M0 per row
// per 32, the release routed-expert format) per descriptor: buckets of 0..16 rows (empty
// buckets, rows 1, 2, 7, 8, 16 and a 40-row bucket cut into 16 + 16 + 8), tiny and real expert
// shapes, gate+up in one launch via y_row_shift.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "dsv41k/moe.hpp"
#include "kernel/fp4_expert_sets.hpp"
#include "kernel/gemv_case.hpp"

namespace dsv41::test {
namespace {

// counts per local expert; weights: expert e uses weight set e % kSets (fewer uploads).
constexpr int kSets = 3;

// gemm: 64-row tiles (moe_expert_tiles) through moe_grouped_fp4_gemm with x as `xp` (the
// reference runs on the same rounded x), else 16-row tiles through moe_grouped_fp4_gemv.
// tc: 16-row tiles through moe_grouped_fp4_gemv_tc (x split into a workspace first).
void run_grouped(const std::vector<int32_t>& counts, int64_t out, int64_t in, uint64_t seed,
                 bool gemm = false, kernels::GemmX xp = kernels::GemmX::kFp32, bool tc = false) {
  const int tile = gemm ? kernels::kMoeGemmTileRows : kernels::kMoeGemvMaxRows;
  std::mt19937_64 rng(seed);
  const int n_local = static_cast<int>(counts.size());
  std::vector<int32_t> offsets(n_local + 1, 0);
  for (int e = 0; e < n_local; ++e) offsets[e + 1] = offsets[e] + counts[e];
  const int32_t slots = offsets[n_local];
  const Fp4ExpertSets sets(kSets, n_local, out, in, rng);
  const std::vector<const uint8_t*>& wt = sets.wt;
  const std::vector<const uint8_t*>& st = sets.st;
  const std::vector<float> x = random_normal(size_t(std::max(slots, 1)) * in, rng);
  const int64_t cap = kernels::moe_tile_capacity(std::max(slots, 1), 1, n_local, tile);
  cuda::CudaStream stream;
  cuda::DeviceBuffer dc(counts.size() * 4), doff(offsets.size() * 4), dwt(n_local * 8),
      dst(n_local * 8), ddesc(size_t(cap) * sizeof(kernels::MoeGemvDesc)), dx(x.size() * 4),
      dy(size_t(std::max(slots, 1)) * out * 4);
  dc.upload(std::span<const int32_t>(counts));
  doff.upload(std::span<const int32_t>(offsets));
  dwt.upload(wt.data(), wt.size() * 8);
  dst.upload(st.data(), st.size() * 8);
  dx.upload(std::span<const float>(x));
  dy.fill_bytes(0xFF);  // NaN: an unwritten row fails
  ddesc.fill_bytes(0xFF);
  DSV41_CUDA_CHECK(kernels::moe_expert_tiles(
      dc.as<int32_t>(), doff.as<int32_t>(), n_local, dwt.as<const uint8_t*>(),
      dst.as<const uint8_t*>(), 0, tile, ddesc.as<kernels::MoeGemvDesc>(), cap, stream.get()));
  if (tc) {
    const int max_rows = std::min(16, std::max(1, *std::max_element(counts.begin(), counts.end())));
    const int64_t x_rows = std::max(slots, 1);
    const size_t ws_bytes = kernels::moe_grouped_fp4_gemv_tc_workspace_bytes(x_rows, in);
    cuda::DeviceBuffer dws(ws_bytes);
    dws.fill_bytes(0xFF);  // the split must write every byte the product reads
    DSV41_CUDA_CHECK(kernels::moe_grouped_fp4_gemv_tc(
        ddesc.as<kernels::MoeGemvDesc>(), static_cast<int>(cap), max_rows, dx.as<float>(), x_rows,
        dy.as<float>(), out, in, dws.data(), ws_bytes, stream.get()));
    stream.synchronize();
  } else if (gemm) {
    DSV41_CUDA_CHECK(kernels::moe_grouped_fp4_gemm(ddesc.as<kernels::MoeGemvDesc>(),
                                                   static_cast<int>(cap), dx.as<float>(),
                                                   dy.as<float>(), out, in, xp, stream.get()));
  } else {
    const int max_rows = std::min(16, std::max(1, *std::max_element(counts.begin(), counts.end())));
    DSV41_CUDA_CHECK(kernels::moe_grouped_fp4_gemv(ddesc.as<kernels::MoeGemvDesc>(),
                                                   static_cast<int>(cap), max_rows, dx.as<float>(),
                                                   dy.as<float>(), out, in, stream.get()));
  }
  stream.synchronize();
  // Descriptors: every bucket in expert order, tiles of <= `tile` rows, then rows = 0.
  std::vector<kernels::MoeGemvDesc> desc(static_cast<size_t>(cap));
  ddesc.download(desc.data(), desc.size() * sizeof(kernels::MoeGemvDesc));
  size_t used = 0;
  for (int e = 0; e < n_local; ++e)
    for (int r0 = 0; r0 < counts[e]; r0 += tile, ++used) {
      REQUIRE(used < desc.size());
      const auto& d = desc[used];
      if (d.w != wt[e] || d.scale != st[e] || d.x_row != offsets[e] + r0 || d.y_row != d.x_row ||
          d.rows != std::min(tile, counts[e] - r0))
        FAIL(fmt::format("descriptor {} (expert {}, row {}): x_row {} y_row {} rows {}", used, e,
                         r0, d.x_row, d.y_row, d.rows));
    }
  for (size_t i = used; i < desc.size(); ++i) REQUIRE(desc[i].rows == 0);
  if (slots == 0) return;
  std::vector<float> y(size_t(slots) * out);
  dy.download(y.data(), y.size() * 4);
  for (int e = 0; e < n_local; ++e) {
    if (counts[e] == 0) continue;
    const std::vector<float> xe =
        bf16_parts(std::vector<float>(x.begin() + size_t(offsets[e]) * in,
                                      x.begin() + size_t(offsets[e + 1]) * in),
                   gemm ? static_cast<int>(xp) : 3);
    const GemvReference ref =
        gemv_reference(true, sets.weights(e), sets.scales(e), xe, counts[e], out, in);
    const std::vector<float> got(y.begin() + size_t(offsets[e]) * out,
                                 y.begin() + size_t(offsets[e + 1]) * out);
    std::vector<double> tol(ref.abs_dot.size());
    // Same bound as fp4_expert_gemv (gemv_case.hpp): both sides round once per term.
    for (size_t i = 0; i < tol.size(); ++i) tol[i] = kGemvTolPerAbsDot * ref.abs_dot[i] + 1e-30;
    require_match(fmt::format("grouped fp4 {} out {} in {} expert {} of {} rows {} x parts {} "
                              "seed {:#x}",
                              tc     ? "gemv_tc"
                              : gemm ? "gemm"
                                     : "gemv",
                              out, in, e, n_local, counts[e], static_cast<int>(xp), seed),
                  got, ref.y, tol, kGemvMaxNmse);
  }
}

// Bucket counts over the released 384 experts: one decode token (k = 6: six buckets of one row)
// and a 16-row verify batch spread unevenly.
std::vector<int32_t> decode_counts() {
  std::vector<int32_t> c(384, 0);
  for (int e : {3, 77, 150, 201, 333, 383}) c[e] = 1;
  return c;
}
std::vector<int32_t> verify_counts() {
  std::vector<int32_t> c(384, 0);
  c[5] = 16;
  c[9] = 2;
  c[100] = 7;
  c[101] = 8;
  c[383] = 1;
  return c;
}

// moe_grouped_fp4_gemv_gathered (x rows through slot_token while staged) against
// moe_grouped_fp4_gemv on the host-gathered copy xs[s] = x[slot_token[s]]: every output byte equal.
// Slots are drawn over `tokens` tokens; counts give the buckets (max_rows = the largest).
void run_gathered(const std::vector<int32_t>& counts, int tokens, int64_t out, int64_t in,
                  uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int n_local = static_cast<int>(counts.size());
  std::vector<int32_t> offsets(n_local + 1, 0);
  for (int e = 0; e < n_local; ++e) offsets[e + 1] = offsets[e] + counts[e];
  const int32_t slots = offsets[n_local];
  const int max_rows = std::max(1, *std::max_element(counts.begin(), counts.end()));
  REQUIRE(kernels::moe_grouped_fp4_gemv_gathered_supported(max_rows, in));
  std::uniform_int_distribution<int> byte(0, 255), token(0, tokens - 1);
  std::vector<uint8_t> w(size_t(out * in / 2));
  for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
  const std::vector<uint8_t> sc = random_e8m0(size_t(out * (in / 32)), rng);
  const std::vector<float> x = random_normal(size_t(tokens) * in, rng);
  std::vector<int32_t> slot_token(slots);
  for (auto& t : slot_token) t = token(rng);
  std::vector<float> xs(size_t(slots) * in);
  for (int32_t s = 0; s < slots; ++s)
    std::copy(x.begin() + size_t(slot_token[s]) * in, x.begin() + size_t(slot_token[s] + 1) * in,
              xs.begin() + size_t(s) * in);
  const int64_t cap = kernels::moe_tile_capacity(slots, 1, n_local, kernels::kMoeGemvMaxRows);
  std::vector<const uint8_t*> wt(n_local), st(n_local);
  cuda::CudaStream stream;
  cuda::DeviceBuffer dw(w.size()), ds(sc.size()), dc(counts.size() * 4), doff(offsets.size() * 4),
      dwt(n_local * 8), dst(n_local * 8), ddesc(size_t(cap) * sizeof(kernels::MoeGemvDesc)),
      dx(x.size() * 4), dxs(xs.size() * 4), dmap(slot_token.size() * 4),
      dy0(size_t(slots) * out * 4), dy1(size_t(slots) * out * 4);
  dw.upload(std::span<const uint8_t>(w));
  ds.upload(std::span<const uint8_t>(sc));
  for (int e = 0; e < n_local; ++e) wt[e] = dw.as<uint8_t>(), st[e] = ds.as<uint8_t>();
  dc.upload(std::span<const int32_t>(counts));
  doff.upload(std::span<const int32_t>(offsets));
  dwt.upload(wt.data(), wt.size() * 8);
  dst.upload(st.data(), st.size() * 8);
  dx.upload(std::span<const float>(x));
  dxs.upload(std::span<const float>(xs));
  dmap.upload(std::span<const int32_t>(slot_token));
  dy0.fill_bytes(0xFF);
  dy1.fill_bytes(0xA5);  // another poison: an unwritten row differs from the plain launch's
  DSV41_CUDA_CHECK(kernels::moe_expert_tiles(dc.as<int32_t>(), doff.as<int32_t>(), n_local,
                                             dwt.as<const uint8_t*>(), dst.as<const uint8_t*>(), 0,
                                             kernels::kMoeGemvMaxRows,
                                             ddesc.as<kernels::MoeGemvDesc>(), cap, stream.get()));
  const auto* D = ddesc.as<kernels::MoeGemvDesc>();
  DSV41_CUDA_CHECK(kernels::moe_grouped_fp4_gemv(
      D, static_cast<int>(cap), max_rows, dxs.as<float>(), dy0.as<float>(), out, in, stream.get()));
  DSV41_CUDA_CHECK(kernels::moe_grouped_fp4_gemv_gathered(D, static_cast<int>(cap), max_rows,
                                                          dx.as<float>(), dmap.as<int32_t>(),
                                                          dy1.as<float>(), out, in, stream.get()));
  stream.synchronize();
  std::vector<float> y0(size_t(slots) * out), y1(y0.size());
  dy0.download(y0.data(), y0.size() * 4);
  dy1.download(y1.data(), y1.size() * 4);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < y0.size(); ++i)
    if (std::memcmp(&y0[i], &y1[i], 4) != 0 && bad++ == 0) first = i;
  INFO(
      fmt::format("gathered out {} in {} tokens {} slots {} max_rows {} seed {:#x}: {} of {} "
                  "outputs differ from gather + moe_grouped_fp4_gemv; first {} ({} vs {})",
                  out, in, tokens, slots, max_rows, seed, bad, y0.size(), first,
                  bad ? y1[first] : 0.f, bad ? y0[first] : 0.f));
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("moe_grouped_fp4_gemv matches Linear per expert at tiny shapes", "[kernel][moe]") {
  if (skip_without_gpu()) return;
  const uint64_t seed = fresh_seed();
  run_grouped({1}, 1, 32, seed);
  run_grouped({0, 2, 0, 7}, 33, 96, seed + 1);
  run_grouped({8, 0, 16, 1, 3}, 100, 320, seed + 2);
  run_grouped({40, 0, 5}, 64, 128, seed + 3);  // a bucket cut into 16 + 16 + 8
  run_grouped({0, 0, 0}, 8, 64, seed + 4);     // all empty: nothing to write
}

TEST_CASE("moe_grouped_fp4_gemv matches Linear per expert at routed-expert shapes",
          "[kernel][moe]") {
  if (skip_without_gpu()) return;
  const uint64_t seed = fresh_seed();
  run_grouped(decode_counts(), 2304, 5120, seed);      // w1 / w3
  run_grouped(verify_counts(), 5120, 2304, seed + 1);  // w2
}

TEST_CASE("moe_grouped_fp4_gemv_tc matches Linear per expert", "[kernel][moe]") {
  if (skip_without_gpu()) return;
  const uint64_t seed = fresh_seed();
  const auto F = kernels::GemmX::kFp32;
  run_grouped({1}, 1, 128, seed, false, F, true);
  run_grouped({0, 2, 0, 7}, 33, 128, seed + 1, false, F, true);
  run_grouped({8, 0, 16, 1, 3}, 100, 384, seed + 2, false, F, true);
  run_grouped({40, 0, 5}, 64, 128, seed + 3, false, F, true);          // 16 + 16 + 8
  run_grouped({0, 0, 0}, 8, 128, seed + 4, false, F, true);            // all empty
  run_grouped(decode_counts(), 2304, 5120, seed + 5, false, F, true);  // w1 / w3
  run_grouped(verify_counts(), 5120, 2304, seed + 6, false, F, true);  // w2
  std::vector<int32_t> six(32, 0);  // a 6-row verify batch, k = 6
  for (int e = 0; e < 32; e += 3) six[e] = 1 + e % 6;
  run_grouped(six, 2304, 5120, seed + 7, false, F, true);
}

TEST_CASE("moe_grouped_fp4_gemv_tc rejects unsupported arguments", "[kernel][moe]") {
  if (skip_without_gpu()) return;
  cuda::DeviceBuffer d(4096), x(128 * 4 * 17), y(128 * 4 * 17);
  const size_t need = kernels::moe_grouped_fp4_gemv_tc_workspace_bytes(4, 128);
  cuda::DeviceBuffer ws(need + 16);
  const auto* D = d.as<kernels::MoeGemvDesc>();
  d.fill_bytes(0);  // rows 0: a valid launch computes nothing
  const auto call = [&](int n, int max_rows, int64_t x_rows, int64_t out, int64_t in, void* wsp,
                        size_t bytes) {
    return kernels::moe_grouped_fp4_gemv_tc(D, n, max_rows, x.as<float>(), x_rows, y.as<float>(),
                                            out, in, wsp, bytes, nullptr);
  };
  CHECK(call(4, 1, 4, 64, 128, ws.data(), need) == cudaSuccess);
  CHECK(call(0, 1, 4, 64, 128, ws.data(), need) == cudaErrorInvalidValue);      // no descriptors
  CHECK(call(4, 0, 4, 64, 128, ws.data(), need) == cudaErrorInvalidValue);      // max_rows
  CHECK(call(4, 17, 4, 64, 128, ws.data(), need) == cudaErrorInvalidValue);     // max_rows > 16
  CHECK(call(4, 1, 0, 64, 128, ws.data(), need) == cudaErrorInvalidValue);      // x_rows
  CHECK(call(4, 1, 4, 64, 96, ws.data(), need) == cudaErrorInvalidValue);       // in % 128
  CHECK(call(4, 1, 4, 0, 128, ws.data(), need) == cudaErrorInvalidValue);       // out
  CHECK(call(4, 1, 4, 64, 128, ws.data(), need - 1) == cudaErrorInvalidValue);  // too small
  CHECK(call(4, 1, 4, 64, 128, nullptr, need) == cudaErrorInvalidValue);        // no workspace
  CHECK(call(4, 1, 4, 64, 128, ws.as<uint8_t>() + 4, need) == cudaErrorInvalidValue);  // align
  CHECK(kernels::moe_grouped_fp4_gemv_tc(D, 4, 1, x.as<float>(), 4, x.as<float>(), 64, 128,
                                         ws.data(), need, nullptr) == cudaErrorInvalidValue);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("moe_grouped_fp4_gemm matches Linear per expert", "[kernel][moe][gemm]") {
  if (skip_without_gpu()) return;
  const uint64_t seed = fresh_seed();
  run_grouped({1}, 1, 32, seed, true);
  run_grouped({0, 2, 0, 70}, 33, 96, seed + 1, true);         // 70 = 64 + 6
  run_grouped({64, 0, 129, 1, 3}, 130, 320, seed + 2, true);  // full tile, 64 + 64 + 1
  run_grouped({0, 0, 0}, 8, 64, seed + 3, true);              // all empty
  std::vector<int32_t> prefill(32, 0);  // a prefill chunk's uneven buckets at expert shapes
  prefill[0] = 100;
  prefill[7] = 64;
  prefill[8] = 1;
  prefill[31] = 37;
  run_grouped(prefill, 2304, 5120, seed + 4, true);  // w1 / w3
  run_grouped(prefill, 5120, 2304, seed + 5, true);  // w2
  for (kernels::GemmX xp : {kernels::GemmX::kBf16, kernels::GemmX::kBf16x2}) {
    run_grouped({0, 2, 0, 70}, 33, 96, seed + 6, true, xp);
    run_grouped(prefill, 2304, 5120, seed + 7, true, xp);
  }
}

TEST_CASE("moe_grouped_fp4_gemv_gathered equals gather + moe_grouped_fp4_gemv", "[kernel][moe]") {
  if (skip_without_gpu()) return;
  // Decode (six one-row buckets of one token) and a 2-token step at the routed-expert gate/up
  // shape (in 5120: max_rows <= 2 stage), tiny shapes up to 8-row buckets.
  run_gathered(decode_counts(), 1, 2304, 5120, fresh_seed());
  std::vector<int32_t> two = decode_counts();
  two[77] = 2, two[201] = 2, two[5] = 1, two[6] = 1;
  run_gathered(two, 2, 2304, 5120, fresh_seed());
  run_gathered({3, 0, 1, 4, 2}, 5, 40, 64, fresh_seed());
  run_gathered({8, 0, 5, 7}, 9, 33, 96, fresh_seed());
  CHECK(kernels::moe_grouped_fp4_gemv_gathered_supported(1, 5120));
  CHECK(kernels::moe_grouped_fp4_gemv_gathered_supported(2, 5120));
  CHECK_FALSE(kernels::moe_grouped_fp4_gemv_gathered_supported(4, 5120));  // 4 rows not staged
  CHECK_FALSE(kernels::moe_grouped_fp4_gemv_gathered_supported(16, 64));   // never staged
  CHECK_FALSE(kernels::moe_grouped_fp4_gemv_gathered_supported(0, 64));
  CHECK_FALSE(kernels::moe_grouped_fp4_gemv_gathered_supported(1, 48));
  cuda::DeviceBuffer d(4096), x(5120 * 4 * 4), y(5120 * 4 * 4), m(64);
  d.fill_bytes(0);  // rows 0: a valid launch computes nothing
  m.fill_bytes(0);
  const auto* Dd = d.as<kernels::MoeGemvDesc>();
  const int32_t* M = m.as<int32_t>();
  using kernels::moe_grouped_fp4_gemv_gathered;
  CHECK(moe_grouped_fp4_gemv_gathered(Dd, 4, 2, x.as<float>(), M, y.as<float>(), 64, 5120,
                                      nullptr) == cudaSuccess);
  CHECK(moe_grouped_fp4_gemv_gathered(Dd, 4, 2, x.as<float>(), nullptr, y.as<float>(), 64, 5120,
                                      nullptr) == cudaErrorInvalidValue);  // no slot map
  CHECK(moe_grouped_fp4_gemv_gathered(Dd, 4, 4, x.as<float>(), M, y.as<float>(), 64, 5120,
                                      nullptr) == cudaErrorInvalidValue);  // 4 rows not staged
  CHECK(moe_grouped_fp4_gemv_gathered(nullptr, 4, 1, x.as<float>(), M, y.as<float>(), 64, 64,
                                      nullptr) == cudaErrorInvalidValue);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("moe_grouped_fp4_gemv rejects unsupported arguments", "[kernel][moe]") {
  if (skip_without_gpu()) return;
  cuda::DeviceBuffer d(4096), x(64 * 4 * 17), y(64 * 4 * 17);
  const auto* D = d.as<kernels::MoeGemvDesc>();
  const float* X = x.as<float>();
  float* Y = y.as<float>();
  using kernels::moe_grouped_fp4_gemv;
  d.fill_bytes(0);  // rows 0: a valid launch computes nothing
  CHECK(moe_grouped_fp4_gemv(D, 4, 1, X, Y, 64, 64, nullptr) == cudaSuccess);
  CHECK(moe_grouped_fp4_gemv(nullptr, 4, 1, X, Y, 64, 64, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemv(D, 0, 1, X, Y, 64, 64, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemv(D, 65536, 1, X, Y, 64, 64, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemv(D, 4, 0, X, Y, 64, 64, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemv(D, 4, 17, X, Y, 64, 64, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemv(D, 4, 1, nullptr, Y, 64, 64, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemv(D, 4, 1, X, nullptr, 64, 64, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemv(D, 4, 1, X, x.as<float>(), 64, 64, nullptr) ==
        cudaErrorInvalidValue);  // y aliases x
  CHECK(moe_grouped_fp4_gemv(D, 4, 1, X + 2, Y, 64, 64, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemv(D, 4, 1, X, Y + 1, 64, 64, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemv(D, 4, 1, X, Y, 0, 64, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemv(D, 4, 1, X, Y, 64, 48, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemv(D, 4, 1, X, Y, 64, 0, nullptr) == cudaErrorInvalidValue);
  using kernels::moe_grouped_fp4_gemm;
  constexpr kernels::GemmX F = kernels::GemmX::kFp32;
  CHECK(moe_grouped_fp4_gemm(D, 4, X, Y, 64, 64, F, nullptr) == cudaSuccess);
  CHECK(moe_grouped_fp4_gemm(nullptr, 4, X, Y, 64, 64, F, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemm(D, 0, X, Y, 64, 64, F, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemm(D, 65536, X, Y, 64, 64, F, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemm(D, 4, nullptr, Y, 64, 64, F, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemm(D, 4, X, nullptr, 64, 64, F, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemm(D, 4, X, x.as<float>(), 64, 64, F, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemm(D, 4, X + 2, Y, 64, 64, F, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemm(D, 4, X, Y, 0, 64, F, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemm(D, 4, X, Y, 64, 48, F, nullptr) == cudaErrorInvalidValue);
  CHECK(moe_grouped_fp4_gemm(D, 4, X, Y, 64, 64, static_cast<kernels::GemmX>(5), nullptr) ==
        cudaErrorInvalidValue);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("moe_expert_tiles rejects unsupported arguments", "[kernel][moe]") {
  const uint8_t* const* tab = reinterpret_cast<const uint8_t* const*>(16);
  const int32_t* c = reinterpret_cast<const int32_t*>(16);
  auto* desc = reinterpret_cast<kernels::MoeGemvDesc*>(16);
  CHECK(kernels::moe_expert_tiles(c, c, 4, tab, tab, 0, 0, desc, 4, nullptr) ==
        cudaErrorInvalidValue);  // tile_rows
  CHECK(kernels::moe_tile_capacity(2048, 6, 32, 64) == 32 + 192);
  CHECK(kernels::moe_tile_capacity(1, 6, 384, 64) == 6);
  CHECK(kernels::moe_tile_capacity(1, 6, 384, 0) == 0);
}

}  // namespace dsv41::test
