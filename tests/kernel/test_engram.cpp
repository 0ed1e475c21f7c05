// [kernel] engram_gather / engram_gate vs the CPU reference engram::gather_rows / apply_gate, and
// the chain gather -> fp8_block_gemv -> gate vs the whole engram::apply_engram (spec §5.3).
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "core/thread_pool.hpp"
#include "dsv41k/engram.hpp"
#include "dsv41k/launchers.hpp"
#include "engram/engram_layer.hpp"
#include "kernel/kernel_check.hpp"
#include "quant/dtype.hpp"

namespace dsv41::test {
namespace {

using engram::EngramDims;
using engram::EngramWeights;

// With the same kv, g = fp32(gate) differs from the CPU's only when the fp64 gates (equal up
// to summation order, ~1e-16 relative) straddle an fp32 rounding boundary: |Δg| <= 2^-24
// (g < 1). Then g·V moves by <= 2^-24·|V| plus one flipped product rounding (<= 2^-24·|V|),
// and H + g·V by one flipped sum rounding (<= 2^-24·|H'|): bound 2^-23·|H'| + 2^-22·|V|.
constexpr double kUlp = 0x1p-23;
// fp8_block_gemv's accepted error, per unit of Σ|w·x| (test_fp8_block_gemv, gemv_case.hpp).
constexpr double kKvTolPerAbsDot = 2e-5;

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

ThreadPool& pool() {
  static ThreadPool p;
  return p;
}

template <typename T>
cuda::DeviceBuffer upload(const std::vector<T>& v) {
  cuda::DeviceBuffer b(std::max<size_t>(v.size(), 1) * sizeof(T));
  if (!v.empty()) b.upload(std::span<const T>(v));
  return b;
}

std::vector<float> download(const cuda::DeviceBuffer& b, size_t n) {
  std::vector<float> v(n);
  if (n != 0) b.download(std::span<float>(v));
  return v;
}

std::vector<int64_t> random_ids(size_t n, int64_t rows, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> d(0, rows - 1);
  std::vector<int64_t> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Bit-equal, or both NaN. Names op, the first mismatching index, both values and bits.
void require_bit_equal(const std::string& what, const std::vector<float>& got,
                       const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same = bits(got[i]) == bits(want[i]) || (std::isnan(got[i]) && std::isnan(want[i]));
    if (!same && bad++ == 0) first = i;
  }
  if (bad != 0)
    FAIL(
        fmt::format("{}: {} of {} elements differ; first index {} got {} ({:#010x}) want {} "
                    "({:#010x})",
                    what, bad, got.size(), first, got[first], bits(got[first]), want[first],
                    bits(want[first])));
}

// ---- gather ----

// `mapped`: the table lives in mapped pinned host memory (the contract allows a host table).
void run_gather(int64_t T, int n_cols, int head_dim, int64_t rows, bool mapped = false) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  EngramWeights w;
  w.dims = EngramDims{1, 1, head_dim, n_cols, rows};
  // All 256 codes and all 256 scale bytes: NaN, subnormal products (2^-9 · 2^-127) and
  // overflow (448 · 2^127) round identically on both sides.
  std::vector<uint8_t> table = random_e4m3(static_cast<size_t>(rows * head_dim), rng, true);
  std::uniform_int_distribution<int> any(0, 255);
  std::vector<uint8_t> scale(static_cast<size_t>(rows * head_dim / 32));
  for (auto& b : scale) b = static_cast<uint8_t>(any(rng));
  w.embed = table.data();
  w.embed_scale = scale.data();
  const std::vector<int64_t> ids = random_ids(static_cast<size_t>(T * n_cols), rows, rng);
  const int64_t width = int64_t{n_cols} * head_dim;
  std::vector<float> want(static_cast<size_t>(T * width));
  for (int64_t t = 0; t < T; ++t)
    engram::gather_rows(w, ids.data() + t * n_cols, want.data() + t * width);

  cuda::CudaStream stream;
  cuda::DeviceBuffer dids = upload(ids), dtable = upload(table), dscale = upload(scale);
  cuda::DeviceBuffer dE(std::max<size_t>(want.size(), 1) * 4);
  dE.fill_bytes(0x55);
  const uint8_t* table_ptr = dtable.as<uint8_t>();
  void* host = nullptr;
  if (mapped) {
    DSV41_CUDA_CHECK(cudaHostAlloc(&host, table.size(), cudaHostAllocMapped));
    std::memcpy(host, table.data(), table.size());
    void* dev = nullptr;
    DSV41_CUDA_CHECK(cudaHostGetDevicePointer(&dev, host, 0));
    table_ptr = static_cast<const uint8_t*>(dev);
  }
  DSV41_CUDA_CHECK(kernels::engram_gather(dids.as<int64_t>(), table_ptr, dscale.as<uint8_t>(),
                                          dE.as<float>(), T, n_cols, head_dim, rows, stream.get()));
  stream.synchronize();
  if (host != nullptr) DSV41_CUDA_CHECK(cudaFreeHost(host));
  require_bit_equal(fmt::format("engram_gather T {} n_cols {} head_dim {} rows {}{} seed {:#x}", T,
                                n_cols, head_dim, rows, mapped ? " (mapped host table)" : "", seed),
                    download(dE, want.size()), want);
}

// ---- gate ----

struct GateCase {
  std::vector<float> H, kv, qk;
  std::vector<uint8_t> image;
};

GateCase random_gate_case(int64_t T, int hc, int64_t D, std::mt19937_64& rng) {
  GateCase c;
  c.H = random_normal(static_cast<size_t>(T * hc * D), rng);
  for (auto& v : c.H) v *= 2.5f;  // the gate is scale-free; exercise a non-unit rms
  c.kv = random_normal(static_cast<size_t>(T * (hc + 1) * D), rng);
  c.qk = random_normal(static_cast<size_t>(hc * D), rng);
  for (auto& v : c.qk) v = 1.0f + 0.1f * v;
  c.image.resize(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) c.image[t] = (t % 3 == 1);
  if (T > 2) std::fill_n(c.H.begin() + 2 * hc * D, D, 0.0f);  // a zero stream: dot 0, clamp
  return c;
}

void run_gate(int64_t T, int hc, int64_t D, float eps, bool with_image) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const GateCase c = random_gate_case(T, hc, D, rng);
  std::vector<float> want = c.H;
  for (int64_t t = 0; t < T; ++t)
    engram::apply_gate(want.data() + t * hc * D, c.kv.data() + t * (hc + 1) * D, c.qk.data(), D, hc,
                       with_image && c.image[t] != 0, eps);

  cuda::CudaStream stream;
  cuda::DeviceBuffer dH = upload(c.H), dkv = upload(c.kv), dqk = upload(c.qk),
                     dimg = upload(c.image);
  DSV41_CUDA_CHECK(kernels::engram_gate(dH.as<float>(), dkv.as<float>(), dqk.as<float>(),
                                        with_image ? dimg.as<uint8_t>() : nullptr, T, hc, D, eps,
                                        stream.get()));
  stream.synchronize();
  const std::vector<float> got = download(dH, want.size());
  std::vector<double> tol(want.size());
  size_t equal = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < hc; ++k)
      for (int64_t d = 0; d < D; ++d) {
        const size_t i = static_cast<size_t>((t * hc + k) * D + d);
        tol[i] = kUlp * std::fabs(want[i]) +
                 2 * kUlp * std::fabs(c.kv[(t * (hc + 1) + hc) * D + d]) + 1e-38;
        equal += bits(got[i]) == bits(want[i]);
      }
  const std::string ctx = fmt::format("engram_gate T {} hc {} D {} eps {} image {} seed {:#x}", T,
                                      hc, D, eps, with_image, seed);
  INFO(fmt::format("{}: {} of {} elements bit-equal", ctx, equal, got.size()));
  require_match(ctx, got, want, tol, 1e-14);
  if (with_image)  // gate 0: H + 0·V, bit-equal
    for (int64_t t = 1; t < T; t += 3)
      for (int64_t i = t * hc * D; i < (t + 1) * hc * D; ++i)
        if (bits(got[i]) != bits(want[i]))
          FAIL(fmt::format("{}: image position {} index {} got {} want {}", ctx, t, i, got[i],
                           want[i]));
}

// ---- chain: gather -> fp8_block_gemv -> gate vs apply_engram ----

struct ChainWeights {
  std::vector<uint8_t> table, table_scale, wkv, wkv_scale;
  EngramWeights w;
};

ChainWeights random_chain_weights(const EngramDims& d, std::mt19937_64& rng) {
  ChainWeights c;
  const int64_t in = d.n_cols * d.head_dim, out = (d.hc + 1) * d.hidden;
  c.table = random_e4m3(static_cast<size_t>(d.table_rows * d.head_dim), rng);
  std::uniform_int_distribution<int> row_scale(117, 127);  // 2^-10 .. 1
  c.table_scale.resize(static_cast<size_t>(d.table_rows * d.head_dim / 32));
  for (auto& b : c.table_scale) b = static_cast<uint8_t>(row_scale(rng));
  c.wkv = random_e4m3(static_cast<size_t>(out * in), rng);
  c.wkv_scale = random_e8m0(static_cast<size_t>(((out + 31) / 32) * ((in + 31) / 32)), rng);
  c.w.dims = d;
  c.w.embed = c.table.data();
  c.w.embed_scale = c.table_scale.data();
  c.w.wkv = c.wkv.data();
  c.w.wkv_scale = c.wkv_scale.data();
  c.w.qk = random_normal(static_cast<size_t>(d.hc * d.hidden), rng);
  for (auto& v : c.w.qk) v = 1.0f + 0.1f * v;
  return c;
}

// Per element of H' = H + g·V, the GPU differs from the CPU through kv (fp32 GEMV accumulation,
// |Δkv_o| <= kKvTolPerAbsDot · A_o with A_o = Σ_c |W[o,c]·E[c]|) and the final roundings:
//   Δdot <= Σ_d |H·qk|·ΔK_d / (rms_H·rms_K·√D) + |dot|·‖ΔK‖/‖K‖
//   Δs   <= Δdot / (2√(|dot| - Δdot)) away from the clamp, else 2e-3 + √(2Δdot) (s jumps
//           between ±1e-3 when dot changes sign inside the 1e-6 clamp)
//   Δg   <= Δs / 4 (sigmoid' <= 1/4) + 2^-24 (fp32 rounding of g); 0 at image positions
//   |ΔH'| <= 2·(Δg·|V| + g·ΔV) + 2^-23·|H'| + 2^-22·|V|   (factor 2: first-order margin)
std::vector<double> chain_tolerance(const ChainWeights& c, const std::vector<float>& H,
                                    const std::vector<float>& want, const std::vector<int64_t>& ids,
                                    const std::vector<uint8_t>& image, int64_t T, float eps) {
  const EngramDims& d = c.w.dims;
  const int64_t D = d.hidden, hc = d.hc, in = d.n_cols * d.head_dim, out = (hc + 1) * D;
  const size_t uT = static_cast<size_t>(T);
  std::vector<float> E(uT * in), KV(uT * out);
  pool().parallel_for(uT, [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) {
      engram::gather_rows(c.w, ids.data() + t * d.n_cols, E.data() + t * in);
      engram::project_kv(c.w, E.data() + t * in, KV.data() + t * out);
    }
  });
  // ΔKV[t, o] = kKvTolPerAbsDot · Σ_c |W[o, c]·E[t, c]|, one dequantised weight row at a time.
  float lut[256];
  for (int i = 0; i < 256; ++i) lut[i] = e4m3_to_f32(static_cast<uint8_t>(i));
  std::vector<double> DKV(uT * out);
  pool().parallel_for(static_cast<size_t>(out), [&](size_t b, size_t e) {
    std::vector<float> row(static_cast<size_t>(in));
    for (size_t o = b; o < e; ++o) {
      const uint8_t* srow = c.wkv_scale.data() + (o / 32) * ((in + 31) / 32);
      for (int64_t k = 0; k < in; ++k)
        row[k] = std::fabs(lut[c.wkv[o * in + k]] * e8m0_to_f32(srow[k / 32]));
      for (size_t t = 0; t < uT; ++t) {
        const float* et = E.data() + t * in;
        double a = 0;
        for (int64_t k = 0; k < in; ++k) a += double(row[k]) * std::fabs(et[k]);
        DKV[t * out + o] = kKvTolPerAbsDot * a;
      }
    }
  });
  std::vector<double> tol(want.size());
  pool().parallel_for(uT, [&](size_t b, size_t e_end) {
    for (size_t t = b; t < e_end; ++t) {
      const float* kv = KV.data() + t * out;
      const double* dkv = DKV.data() + t * out;
      const float* v = kv + hc * D;
      for (int64_t k = 0; k < hc; ++k) {
        const float* h = H.data() + (t * hc + k) * D;
        const float* key = kv + k * D;
        double h2 = 0, k2 = 0, dot = 0, num = 0, dk2 = 0;
        for (int64_t i = 0; i < D; ++i) {
          h2 += double(h[i]) * h[i];
          k2 += double(key[i]) * key[i];
          dot += double(h[i]) * c.w.qk[k * D + i] * key[i];
          num += std::fabs(double(h[i]) * c.w.qk[k * D + i]) * dkv[k * D + i];
          dk2 += dkv[k * D + i] * dkv[k * D + i];
        }
        const double norm =
            std::sqrt(h2 / D + eps) * std::sqrt(k2 / D + eps) * std::sqrt(double(D));
        dot /= norm;
        const double ddot = num / norm + std::fabs(dot) * std::sqrt(dk2 / std::max(k2, 1e-300));
        const double ds = std::fabs(dot) - ddot > 1e-6
                              ? ddot / (2 * std::sqrt(std::fabs(dot) - ddot))
                              : 2e-3 + std::sqrt(2 * ddot);
        const bool img = !image.empty() && image[t] != 0;
        const double s = std::copysign(std::sqrt(std::max(std::fabs(dot), 1e-6)), dot);
        const double g = img ? 0.0 : 1.0 / (1.0 + std::exp(-s));
        const double dg = img ? 0.0 : ds / 4 + 0x1p-24;
        for (int64_t i = 0; i < D; ++i) {
          const size_t j = static_cast<size_t>((t * hc + k) * D + i);
          tol[j] = 2 * (dg * std::fabs(v[i]) + g * dkv[hc * D + i]) + kUlp * std::fabs(want[j]) +
                   2 * kUlp * std::fabs(v[i]) + 1e-38;
        }
      }
    }
  });
  return tol;
}

void run_chain(const EngramDims& d, const std::vector<int64_t>& Ts, bool with_image) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const ChainWeights c = random_chain_weights(d, rng);
  const int64_t D = d.hidden, hc = d.hc, in = d.n_cols * d.head_dim, out = (hc + 1) * D;
  const float eps = 1e-20f;  // rms_norm_eps (released)
  cuda::CudaStream stream;
  cuda::DeviceBuffer dtable = upload(c.table), dtscale = upload(c.table_scale),
                     dwkv = upload(c.wkv), dwscale = upload(c.wkv_scale), dqk = upload(c.w.qk);
  for (int64_t T : Ts) {
    const std::vector<int64_t> ids =
        random_ids(static_cast<size_t>(T * d.n_cols), d.table_rows, rng);
    std::vector<uint8_t> image;
    if (with_image) {
      image.resize(static_cast<size_t>(T));
      for (int64_t t = 0; t < T; ++t) image[t] = (t % 3 == 1);
    }
    const std::vector<float> H = random_normal(static_cast<size_t>(T * hc * D), rng);
    std::vector<float> want = H;
    engram::apply_engram(c.w, want, ids, image, T, eps, &pool());

    cuda::DeviceBuffer dids = upload(ids), dimg = upload(image), dH = upload(H);
    cuda::DeviceBuffer dE(static_cast<size_t>(T * in) * 4), dkv(static_cast<size_t>(T * out) * 4);
    DSV41_CUDA_CHECK(kernels::engram_gather(
        dids.as<int64_t>(), dtable.as<uint8_t>(), dtscale.as<uint8_t>(), dE.as<float>(), T,
        static_cast<int>(d.n_cols), static_cast<int>(d.head_dim), d.table_rows, stream.get()));
    for (int64_t r = 0; r < T; r += kernels::kGemvMaxRows) {  // the GEMV takes <= 16 rows
      const int rows = static_cast<int>(std::min<int64_t>(kernels::kGemvMaxRows, T - r));
      DSV41_CUDA_CHECK(kernels::fp8_block_gemv(dE.as<float>() + r * in, dwkv.as<uint8_t>(),
                                               dwscale.as<uint8_t>(), dkv.as<float>() + r * out,
                                               rows, out, in, stream.get()));
    }
    DSV41_CUDA_CHECK(kernels::engram_gate(dH.as<float>(), dkv.as<float>(), dqk.as<float>(),
                                          with_image ? dimg.as<uint8_t>() : nullptr, T,
                                          static_cast<int>(hc), D, eps, stream.get()));
    stream.synchronize();
    const std::vector<float> got = download(dH, want.size());
    const std::vector<double> tol = chain_tolerance(c, H, want, ids, image, T, eps);
    const std::string ctx = fmt::format(
        "engram chain (gather, fp8_block_gemv, gate) T {} D {} hc {} head_dim {} "
        "n_cols {} image {} seed {:#x}",
        T, D, hc, d.head_dim, d.n_cols, with_image, seed);
    require_match(ctx, got, want, tol, 1e-9);
    for (int64_t t = 1; with_image && t < T; t += 3)  // gate 0: H unchanged, bit-equal
      for (int64_t i = t * hc * D; i < (t + 1) * hc * D; ++i)
        if (bits(got[i]) != bits(want[i]))
          FAIL(fmt::format("{}: image position {} index {} got {} want {}", ctx, t, i, got[i],
                           want[i]));
  }
}

}  // namespace

TEST_CASE("engram_gather matches gather_rows bit for bit", "[kernel][engram]") {
  if (skip_without_gpu()) return;
  run_gather(1, 1, 32, 1);
  for (int64_t T : {1, 2, 7, 16, 300}) {
    run_gather(T, 6, 32, 777);     // tiny8: n_cols 6, head_dim 32
    run_gather(T, 24, 256, 4096);  // released: n_cols (4-1)·8 = 24, head_dim 256
  }
  run_gather(3, 5, 96, 10);
  run_gather(7, 24, 256, 4096, true);
}

TEST_CASE("engram_gather writes NaN rows for ids outside the table", "[kernel][engram]") {
  if (skip_without_gpu()) return;
  const std::vector<int64_t> ids = {0, -1, 3, 1};  // [2, 2]: columns 1 and 2 are outside
  const std::vector<uint8_t> table(3 * 32, 0x38), scale(3, 127);  // every value 1.0
  cuda::CudaStream stream;
  cuda::DeviceBuffer dids = upload(ids), dtable = upload(table), dscale = upload(scale);
  cuda::DeviceBuffer dE(4 * 32 * 4);
  DSV41_CUDA_CHECK(kernels::engram_gather(dids.as<int64_t>(), dtable.as<uint8_t>(),
                                          dscale.as<uint8_t>(), dE.as<float>(), 2, 2, 32, 3,
                                          stream.get()));
  stream.synchronize();
  const std::vector<float> E = download(dE, 4 * 32);
  for (size_t i = 0; i < E.size(); ++i) {
    const bool outside = i / 32 == 1 || i / 32 == 2;
    INFO(fmt::format("engram_gather out-of-table ids: index {} got {}", i, E[i]));
    CHECK((outside ? std::isnan(E[i]) : E[i] == 1.0f));
  }
}

TEST_CASE("engram_gate matches apply_gate on the same kv", "[kernel][engram]") {
  if (skip_without_gpu()) return;
  run_gate(1, 1, 1, 1e-20f, false);    // degenerate
  run_gate(4, 2, 37, 1e-6f, true);     // odd D, fewer values than threads
  run_gate(3, 8, 1000, 1e-20f, true);  // the largest hc
  for (int64_t T : {1, 2, 7, 16, 300}) {
    run_gate(T, 4, 96, 1e-20f, true);     // tiny8
    run_gate(T, 4, 5120, 1e-20f, T > 1);  // released: D 5120, hc 4, eps 1e-20
  }
}

TEST_CASE("gather -> fp8_block_gemv -> gate matches apply_engram", "[kernel][engram]") {
  if (skip_without_gpu()) return;
  const std::vector<int64_t> Ts = {1, 2, 7, 16, 300};
  // tiny8: hidden 96, hc 4, head_dim 32, n_cols 6
  run_chain(EngramDims{96, 4, 32, 6, 1000}, Ts, true);
  run_chain(EngramDims{96, 4, 32, 6, 1000}, {7}, false);
  // released (spec §5.3): hidden 5120, hc 4, head_dim 256, n_cols 24 (W_kv [25600, 6144]); the
  // table cut to 4096 rows (the kernels only see the row ids)
  run_chain(EngramDims{5120, 4, 256, 24, 4096}, Ts, true);
}

// Rejected before anything is dereferenced: no device needed.
TEST_CASE("engram_gather rejects unsupported arguments", "[kernel][engram]") {
  int64_t ids[4] = {};
  uint8_t table[64] = {};
  float E[64] = {};
  auto call = [&](const int64_t* i, const uint8_t* w, const uint8_t* s, float* e, int64_t T,
                  int cols, int hd, int64_t rows) {
    return kernels::engram_gather(i, w, s, e, T, cols, hd, rows, nullptr);
  };
  CHECK(call(nullptr, table, table, E, 1, 1, 32, 1) == cudaErrorInvalidValue);
  CHECK(call(ids, nullptr, table, E, 1, 1, 32, 1) == cudaErrorInvalidValue);
  CHECK(call(ids, table, nullptr, E, 1, 1, 32, 1) == cudaErrorInvalidValue);
  CHECK(call(ids, table, table, nullptr, 1, 1, 32, 1) == cudaErrorInvalidValue);
  CHECK(call(ids, table, table, E, -1, 1, 32, 1) == cudaErrorInvalidValue);
  CHECK(call(ids, table, table, E, 1, 0, 32, 1) == cudaErrorInvalidValue);
  CHECK(call(ids, table, table, E, 1, 1, 0, 1) == cudaErrorInvalidValue);
  CHECK(call(ids, table, table, E, 1, 1, 48, 1) == cudaErrorInvalidValue);  // not 32·k
  CHECK(call(ids, table, table, E, 1, 1, -32, 1) == cudaErrorInvalidValue);
  CHECK(call(ids, table, table, E, 1, 1, 32, 0) == cudaErrorInvalidValue);
  CHECK(call(ids, table, table, E, int64_t{1} << 40, 24, 256, 1) == cudaErrorInvalidValue);  // grid
  CHECK(call(ids, table, table, E, 0, 1, 32, 1) == cudaSuccess);  // T == 0 launches nothing
}

TEST_CASE("engram_gate rejects unsupported arguments", "[kernel][engram]") {
  float buf[256] = {};
  float* H = buf;
  const float* kv = buf + 128;  // disjoint from H for T 1, hc 4, D 4 (H 16, kv 20 floats)
  const float* qk = buf + 200;
  auto call = [&](float* h, const float* k, const float* q, int64_t T, int hc, int64_t D) {
    return kernels::engram_gate(h, k, q, nullptr, T, hc, D, 1e-20f, nullptr);
  };
  CHECK(call(nullptr, kv, qk, 1, 4, 4) == cudaErrorInvalidValue);
  CHECK(call(H, nullptr, qk, 1, 4, 4) == cudaErrorInvalidValue);
  CHECK(call(H, kv, nullptr, 1, 4, 4) == cudaErrorInvalidValue);
  CHECK(call(H, kv, qk, -1, 4, 4) == cudaErrorInvalidValue);
  CHECK(call(H, kv, qk, 1, 0, 4) == cudaErrorInvalidValue);
  CHECK(call(H, kv, qk, 1, 9, 4) == cudaErrorInvalidValue);
  CHECK(call(H, kv, qk, 1, 4, 0) == cudaErrorInvalidValue);
  CHECK(call(H, H, qk, 1, 4, 4) == cudaErrorInvalidValue);                  // kv == H
  CHECK(call(H, buf + 8, qk, 1, 4, 4) == cudaErrorInvalidValue);            // kv starts inside H
  CHECK(call(buf + 8, buf, qk, 1, 4, 4) == cudaErrorInvalidValue);          // H starts inside kv
  CHECK(call(H, kv, qk, int64_t{1} << 30, 4, 4) == cudaErrorInvalidValue);  // grid: T·hc > 2^31-1
  CHECK(call(H, kv, qk, 0, 4, 4) == cudaSuccess);  // T == 0 launches nothing
  CHECK(call(H, H, qk, 0, 4, 4) == cudaSuccess);   // empty ranges cannot overlap
}

}  // namespace dsv41::test
