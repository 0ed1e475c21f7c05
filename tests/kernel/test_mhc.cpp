// [kernel] mHC mixes / collapse / expand vs the CPU reference model/mhc.hpp (spec §3).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "dsv41k/mhc.hpp"
#include "kernel/kernel_check.hpp"
#include "model/mhc.hpp"
#include "model/rms_norm.hpp"

namespace dsv41::test {
namespace {

// Mixes: the fp64 sums differ from the reference only in order (~1e-16 relative), so m_r
// rounds to the same fp32 except at a rounding tie; exp through fp64 is within a rounding of
// glibc expf. One ulp of the logit (<= 1.2e-7 · |logit|, logits here |.| < ~8) moves a
// sigmoid by <= 1/4 of that and the Sinkhorn matrix (20 well-conditioned normalisations of
// values in [0, 1]) by a few ulps: 2e-6 absolute is ~16 ulps of 1 with margin.
constexpr double kMixAbsTol = 2e-6;
// Collapse / expand use the reference's exact operation order with unfused products: bit-equal
// when the host compiler does not contract (x86-64 baseline); an FMA-contracting host build
// differs by one rounding per term, < 2^-23 · Σ|terms| per element.
constexpr double kStreamRelTol = 2.4e-7;

std::vector<float> download(const cuda::DeviceBuffer& b, size_t n) {
  std::vector<float> v(n);
  b.download(std::span<float>(v));
  return v;
}

cuda::DeviceBuffer upload(const std::vector<float>& v) {
  cuda::DeviceBuffer b(v.size() * 4);
  b.upload(std::span<const float>(v));
  return b;
}

cuda::DeviceBuffer poisoned(size_t n) {
  cuda::DeviceBuffer b(n * 4);
  b.fill_bytes(0xFF);
  return b;
}

// A site of random streams and weights: H [T, hc, D] ~ 3·N(0, 1) (the statistic is scale-free;
// exercise a non-unit rms), fn ~ N(0, 1/flat) so m = fn · v̂ ~ N(0, 1) and the logits span a
// useful range, base ~ N(0, 1), scales (0.7, 1.3, 2.0).
struct RandomSite {
  HcShape s;
  std::vector<float> H;
  HcSiteWeights w;
};
RandomSite random_site(int64_t T, int hc, int64_t D, int iters, std::mt19937_64& rng) {
  RandomSite r;
  r.s.hc = hc;
  r.s.dim = D;
  r.s.sinkhorn_iters = iters;
  const int mix = r.s.mix_dim();
  const int64_t flat = hc * D;
  r.H = random_normal(static_cast<size_t>(T * flat), rng);
  for (auto& v : r.H) v *= 3.0f;
  r.w.fn = random_normal(static_cast<size_t>(mix * flat), rng);
  const float fs = 1.0f / std::sqrt(static_cast<float>(flat));
  for (auto& v : r.w.fn) v *= fs;
  r.w.base = random_normal(static_cast<size_t>(mix), rng);
  r.w.scale = {0.7f, 1.3f, 2.0f};
  return r;
}

void run_mixes(int64_t T, int hc, int64_t D, int iters) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  auto [s, H, w] = random_site(T, hc, D, iters, rng);
  const HcMixes want = hc_mixes(w, s, H.data(), T, nullptr);

  cuda::CudaStream stream;
  cuda::DeviceBuffer dH = upload(H), dfn = upload(w.fn), dbase = upload(w.base),
                     dscale = upload(w.scale);
  cuda::DeviceBuffer dpre = poisoned(T * hc), dpost = poisoned(T * hc),
                     dcomb = poisoned(T * hc * hc);
  DSV41_CUDA_CHECK(kernels::hc_mixes(
      dH.as<float>(), dfn.as<float>(), dbase.as<float>(), dscale.as<float>(), dpre.as<float>(),
      dpost.as<float>(), dcomb.as<float>(), T, hc, D, iters, s.hc_eps, s.norm_eps, stream.get()));
  stream.synchronize();
  const std::string ctx = fmt::format("T {} hc {} D {} iters {} seed {:#x}", T, hc, D, iters, seed);
  auto check = [&](const char* what, const std::vector<float>& got, const std::vector<float>& ref) {
    require_match(fmt::format("hc_mixes {} {}", what, ctx), got, ref,
                  std::vector<double>(got.size(), kMixAbsTol), 1e-10);
  };
  check("pre", download(dpre, T * hc), want.pre);
  check("post", download(dpost, T * hc), want.post);
  check("comb", download(dcomb, T * hc * hc), want.comb);
}

void run_collapse_expand(int64_t T, int hc, int64_t D) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  HcShape s;
  s.hc = hc;
  s.dim = D;
  const std::vector<float> H = random_normal(static_cast<size_t>(T * hc * D), rng);
  const std::vector<float> y = random_normal(static_cast<size_t>(T * D), rng);
  HcMixes m;
  m.pre = random_normal(static_cast<size_t>(T * hc), rng);
  m.post = random_normal(static_cast<size_t>(T * hc), rng);
  m.comb = random_normal(static_cast<size_t>(T * hc * hc), rng);
  std::vector<float> want_x(T * D), want_h(T * hc * D);
  hc_collapse(H.data(), m.pre.data(), s, T, want_x.data());
  hc_expand(y.data(), H.data(), m, s, T, want_h.data());

  cuda::CudaStream stream;
  cuda::DeviceBuffer dH = upload(H), dy = upload(y), dpre = upload(m.pre), dpost = upload(m.post),
                     dcomb = upload(m.comb);
  cuda::DeviceBuffer dx = poisoned(T * D), dHn = poisoned(T * hc * D);
  DSV41_CUDA_CHECK(kernels::hc_collapse(dH.as<float>(), dpre.as<float>(), dx.as<float>(), T, hc, D,
                                        stream.get()));
  DSV41_CUDA_CHECK(kernels::hc_expand(dy.as<float>(), dH.as<float>(), dpost.as<float>(),
                                      dcomb.as<float>(), dHn.as<float>(), T, hc, D, stream.get()));
  stream.synchronize();
  const std::string ctx = fmt::format("T {} hc {} D {} seed {:#x}", T, hc, D, seed);
  std::vector<double> tol_x(T * D), tol_h(T * hc * D);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t d = 0; d < D; ++d) {
      double sx = 0;
      for (int j = 0; j < hc; ++j) sx += std::fabs(m.pre[t * hc + j] * H[(t * hc + j) * D + d]);
      tol_x[t * D + d] = kStreamRelTol * sx + 1e-38;
      for (int k = 0; k < hc; ++k) {
        double sh = std::fabs(m.post[t * hc + k] * y[t * D + d]);
        for (int j = 0; j < hc; ++j)
          sh += std::fabs(m.comb[(t * hc + j) * hc + k] * H[(t * hc + j) * D + d]);
        tol_h[(t * hc + k) * D + d] = kStreamRelTol * sh + 1e-38;
      }
    }
  }
  const std::vector<float> got_x = download(dx, T * D), got_h = download(dHn, T * hc * D);
  size_t equal = 0;
  for (size_t i = 0; i < got_h.size(); ++i) equal += got_h[i] == want_h[i];
  INFO(fmt::format("hc_expand {}: {} of {} elements bit-equal", ctx, equal, got_h.size()));
  require_match("hc_collapse " + ctx, got_x, want_x, tol_x, 1e-12);
  require_match("hc_expand " + ctx, got_h, want_h, tol_h, 1e-12);
}

}  // namespace

// hc_site = hc_mixes + hc_collapse (with the previous pre) + rms_norm, against the three CPU
// functions. Mixes: kMixAbsTol (same reasoning). xn: the collapse is bit-equal and the fp64 sum of
// squares differs only in order, so inv is equal or one ulp off: <= 2 ulp of xn, 5e-7 relative
// as rms_norm's own bound. Called `calls` times on the same workspace (its counters must reset).
void run_site(int64_t T, int hc, int64_t D, int iters, bool with_norm_w, int calls = 2) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  auto [s, H, w] = random_site(T, hc, D, iters, rng);
  const std::vector<float> pre_prev = random_normal(static_cast<size_t>(T * hc), rng);
  std::vector<float> norm_w = random_normal(static_cast<size_t>(D), rng);
  const HcMixes want = hc_mixes(w, s, H.data(), T, nullptr);
  std::vector<float> x(static_cast<size_t>(T * D)), want_xn(x.size());
  hc_collapse(H.data(), pre_prev.data(), s, T, x.data());
  rms_norm(x.data(), with_norm_w ? norm_w.data() : nullptr, T, D, s.norm_eps, want_xn.data());

  cuda::CudaStream stream;
  cuda::DeviceBuffer dH = upload(H), dfn = upload(w.fn), dbase = upload(w.base),
                     dscale = upload(w.scale), dprev = upload(pre_prev), dw = upload(norm_w);
  const size_t wsb = kernels::hc_site_workspace_bytes(T, hc, D);
  REQUIRE(wsb > 0);
  cuda::DeviceBuffer dws(wsb);
  dws.fill_bytes(0);
  const std::string ctx = fmt::format("T {} hc {} D {} iters {} norm_w {} seed {:#x}", T, hc, D,
                                      iters, with_norm_w, seed);
  for (int call = 0; call < calls; ++call) {
    cuda::DeviceBuffer dpre = poisoned(T * hc), dpost = poisoned(T * hc),
                       dcomb = poisoned(T * hc * hc), dxn = poisoned(T * D);
    DSV41_CUDA_CHECK(
        kernels::hc_site(dH.as<float>(), dfn.as<float>(), dbase.as<float>(), dscale.as<float>(),
                         dprev.as<float>(), with_norm_w ? dw.as<float>() : nullptr,
                         dpre.as<float>(), dpost.as<float>(), dcomb.as<float>(), dxn.as<float>(), T,
                         hc, D, iters, s.hc_eps, s.norm_eps, dws.data(), wsb, stream.get()));
    stream.synchronize();
    const std::string c = fmt::format("{} call {}", ctx, call);
    auto check = [&](const char* what, const std::vector<float>& got,
                     const std::vector<float>& ref) {
      require_match(fmt::format("hc_site {} {}", what, c), got, ref,
                    std::vector<double>(got.size(), kMixAbsTol), 1e-10);
    };
    check("pre", download(dpre, T * hc), want.pre);
    check("post", download(dpost, T * hc), want.post);
    check("comb", download(dcomb, T * hc * hc), want.comb);
    std::vector<double> tol(want_xn.size());
    for (size_t i = 0; i < tol.size(); ++i) tol[i] = 5e-7 * std::fabs(want_xn[i]) + 1e-38;
    require_match("hc_site xn " + c, download(dxn, T * D), want_xn, tol, 1e-12);
  }
}

// The first n floats of a and b agree bit for bit (a: the call under test, b: hc_expand + hc_site).
void same_bytes(const std::string& ctx, const char* what, const cuda::DeviceBuffer& a,
                const cuda::DeviceBuffer& b, size_t n) {
  const std::vector<float> ga = download(a, n), gb = download(b, n);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; ++i)
    if (std::memcmp(&ga[i], &gb[i], 4) != 0 && bad++ == 0) first = i;
  INFO(fmt::format("{} {}: {} of {} differ from hc_expand + hc_site; first at {}: {} vs {}", ctx,
                   what, bad, n, first, bad ? ga[first] : 0.f, bad ? gb[first] : 0.f));
  CHECK(bad == 0);
}

// hc_expand_site = hc_expand then hc_site: every output (H_new, pre, post, comb, xn) must equal
// the two separate launches bit for bit (each validated against the CPU above: the folded site
// computes the same values with the same op sequences), and H_new the CPU hc_expand within
// kStreamRelTol. Called twice on one workspace (counters reset).
void run_expand_site(int64_t T, int hc, int64_t D, int iters) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  auto [s, H_old, w] = random_site(T, hc, D, iters, rng);
  const std::vector<float> y = random_normal(static_cast<size_t>(T * D), rng);
  HcMixes m;  // the previous site's mixes
  m.post = random_normal(static_cast<size_t>(T * hc), rng);
  m.comb = random_normal(static_cast<size_t>(T * hc * hc), rng);
  const std::vector<float> pre_prev = random_normal(static_cast<size_t>(T * hc), rng);
  const std::vector<float> norm_w = random_normal(static_cast<size_t>(D), rng);
  std::vector<float> want_h(static_cast<size_t>(T * hc * D));
  hc_expand(y.data(), H_old.data(), m, s, T, want_h.data());

  cuda::CudaStream stream;
  cuda::DeviceBuffer dH = upload(H_old), dy = upload(y), dpost = upload(m.post),
                     dcomb = upload(m.comb), dfn = upload(w.fn), dbase = upload(w.base),
                     dscale = upload(w.scale), dprev = upload(pre_prev), dw = upload(norm_w);
  const size_t wsb = kernels::hc_site_workspace_bytes(T, hc, D);
  REQUIRE(wsb > 0);
  cuda::DeviceBuffer dws(wsb);
  dws.fill_bytes(0);
  struct Out {
    cuda::DeviceBuffer H, pre, post, comb, xn;
  };
  auto outs = [&] {
    return Out{poisoned(T * hc * D), poisoned(T * hc), poisoned(T * hc), poisoned(T * hc * hc),
               poisoned(T * D)};
  };
  Out sep = outs();
  DSV41_CUDA_CHECK(kernels::hc_expand(dy.as<float>(), dH.as<float>(), dpost.as<float>(),
                                      dcomb.as<float>(), sep.H.as<float>(), T, hc, D,
                                      stream.get()));
  DSV41_CUDA_CHECK(kernels::hc_site(
      sep.H.as<float>(), dfn.as<float>(), dbase.as<float>(), dscale.as<float>(), dprev.as<float>(),
      dw.as<float>(), sep.pre.as<float>(), sep.post.as<float>(), sep.comb.as<float>(),
      sep.xn.as<float>(), T, hc, D, iters, s.hc_eps, s.norm_eps, dws.data(), wsb, stream.get()));
  const kernels::HcExpandIn e{dy.as<float>(), dH.as<float>(), dpost.as<float>(), dcomb.as<float>()};
  for (int call = 0; call < 2; ++call) {
    Out got = outs();
    DSV41_CUDA_CHECK(kernels::hc_expand_site(
        e, got.H.as<float>(), dfn.as<float>(), dbase.as<float>(), dscale.as<float>(),
        dprev.as<float>(), dw.as<float>(), got.pre.as<float>(), got.post.as<float>(),
        got.comb.as<float>(), got.xn.as<float>(), T, hc, D, iters, s.hc_eps, s.norm_eps, dws.data(),
        wsb, stream.get()));
    stream.synchronize();
    const std::string ctx =
        fmt::format("hc_expand_site T {} hc {} D {} seed {:#x} call {}", T, hc, D, seed, call);
    same_bytes(ctx, "H_new", got.H, sep.H, static_cast<size_t>(T * hc * D));
    same_bytes(ctx, "pre", got.pre, sep.pre, static_cast<size_t>(T * hc));
    same_bytes(ctx, "post", got.post, sep.post, static_cast<size_t>(T * hc));
    same_bytes(ctx, "comb", got.comb, sep.comb, static_cast<size_t>(T * hc * hc));
    same_bytes(ctx, "xn", got.xn, sep.xn, static_cast<size_t>(T * D));
    std::vector<double> tol(want_h.size());
    for (int64_t t = 0; t < T; ++t)
      for (int k = 0; k < hc; ++k)
        for (int64_t d = 0; d < D; ++d) {
          double sh = std::fabs(m.post[t * hc + k] * y[t * D + d]);
          for (int j = 0; j < hc; ++j)
            sh += std::fabs(m.comb[(t * hc + j) * hc + k] * H_old[(t * hc + j) * D + d]);
          tol[(t * hc + k) * D + d] = kStreamRelTol * sh + 1e-38;
        }
    require_match(ctx + " H_new vs the CPU", download(got.H, want_h.size()), want_h, tol, 1e-12);
  }
  // The two-stream form (hc_site_collapse on one stream, hc_site_mixes on another after an
  // event): the same bytes, with the expand folded in and without (H read as written above).
  cuda::CudaStream side;
  cudaEvent_t ready = nullptr;
  DSV41_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  for (const bool fold : {true, false}) {
    Out got = outs();
    if (!fold)
      DSV41_CUDA_CHECK(cudaMemcpy(got.H.data(), sep.H.data(), got.H.bytes(), cudaMemcpyDefault));
    DSV41_CUDA_CHECK(kernels::hc_site_collapse(
        fold ? &e : nullptr, got.H.as<float>(), dprev.as<float>(), dw.as<float>(),
        got.xn.as<float>(), T, hc, D, s.norm_eps, dws.data(), wsb, stream.get()));
    DSV41_CUDA_CHECK(cudaEventRecord(ready, stream.get()));
    DSV41_CUDA_CHECK(cudaStreamWaitEvent(side.get(), ready, 0));
    DSV41_CUDA_CHECK(kernels::hc_site_mixes(
        got.H.as<float>(), dfn.as<float>(), dbase.as<float>(), dscale.as<float>(),
        got.pre.as<float>(), got.post.as<float>(), got.comb.as<float>(), T, hc, D, iters, s.hc_eps,
        s.norm_eps, dws.data(), wsb, side.get()));
    side.synchronize();
    stream.synchronize();
    const std::string ctx = fmt::format(
        "hc_site_collapse + hc_site_mixes (fold {}) T {} hc {} D {} "
        "seed {:#x}",
        fold, T, hc, D, seed);
    same_bytes(ctx, "H_new", got.H, sep.H, static_cast<size_t>(T * hc * D));
    same_bytes(ctx, "pre", got.pre, sep.pre, static_cast<size_t>(T * hc));
    same_bytes(ctx, "post", got.post, sep.post, static_cast<size_t>(T * hc));
    same_bytes(ctx, "comb", got.comb, sep.comb, static_cast<size_t>(T * hc * hc));
    same_bytes(ctx, "xn", got.xn, sep.xn, static_cast<size_t>(T * D));
  }
  DSV41_CUDA_CHECK(cudaEventDestroy(ready));
}

TEST_CASE("hc_expand_site and the two-stream site equal hc_expand then hc_site", "[kernel][mhc]") {
  if (skip_without_gpu()) return;
  run_expand_site(1, 1, 1, 1);   // degenerate
  run_expand_site(3, 2, 37, 5);  // odd sizes
  run_expand_site(2, 8, 1000, 20);
  for (int64_t T : {1, 2, 7, 16, 64, 300}) run_expand_site(T, 4, 5120, 20);  // decode, prefill
}

TEST_CASE("hc_expand_site rejects unsupported arguments", "[kernel][mhc]") {
  float* p = reinterpret_cast<float*>(uintptr_t{256});
  float* q = reinterpret_cast<float*>(uintptr_t{512});
  float* h = reinterpret_cast<float*>(uintptr_t{768});
  void* ws = reinterpret_cast<void*>(uintptr_t{1024});
  const size_t wsb = kernels::hc_site_workspace_bytes(4, 4, 64);
  const auto call = [&](const kernels::HcExpandIn& e, float* H_new, int64_t T) {
    return kernels::hc_expand_site(e, H_new, p, p, p, p, nullptr, q, q, q, q, T, 4, 64, 20, 1e-6f,
                                   1e-20f, ws, wsb, nullptr);
  };
  const kernels::HcExpandIn ok{p, p, p, p};
  CHECK(call(ok, h, 0) == cudaSuccess);  // T = 0: nothing to do
  CHECK(call(ok, nullptr, 1) == cudaErrorInvalidValue);
  CHECK(call(ok, p, 1) == cudaErrorInvalidValue);  // H_new aliases H_old
  CHECK(call(kernels::HcExpandIn{nullptr, p, p, p}, h, 1) == cudaErrorInvalidValue);
  CHECK(call(kernels::HcExpandIn{p, nullptr, p, p}, h, 1) == cudaErrorInvalidValue);
  CHECK(call(kernels::HcExpandIn{p, p, nullptr, p}, h, 1) == cudaErrorInvalidValue);
  CHECK(call(kernels::HcExpandIn{p, p, p, nullptr}, h, 1) == cudaErrorInvalidValue);
  CHECK(call(ok, h, -1) == cudaErrorInvalidValue);
}

TEST_CASE("hc_site_collapse and hc_site_mixes reject unsupported arguments", "[kernel][mhc]") {
  float* p = reinterpret_cast<float*>(uintptr_t{256});
  float* q = reinterpret_cast<float*>(uintptr_t{512});
  float* h = reinterpret_cast<float*>(uintptr_t{768});
  void* ws = reinterpret_cast<void*>(uintptr_t{1024});
  const size_t wsb = kernels::hc_site_workspace_bytes(4, 4, 64);
  const auto collapse = [&](const kernels::HcExpandIn* e, float* H, const float* prev, float* xn,
                            int64_t T, int hc, int64_t D, void* w = nullptr, size_t wb = 0) {
    return kernels::hc_site_collapse(e, H, prev, nullptr, xn, T, hc, D, 1e-20f,
                                     w != nullptr ? w : ws, w != nullptr ? wb : wsb, nullptr);
  };
  const kernels::HcExpandIn ok{p, p, p, p};
  CHECK(collapse(nullptr, h, p, q, 0, 4, 64) == cudaSuccess);  // T = 0: nothing to do
  CHECK(collapse(&ok, h, p, q, 0, 4, 64) == cudaSuccess);
  CHECK(collapse(nullptr, nullptr, p, q, 1, 4, 64) == cudaErrorInvalidValue);
  CHECK(collapse(nullptr, h, nullptr, q, 1, 4, 64) == cudaErrorInvalidValue);
  CHECK(collapse(nullptr, h, p, nullptr, 1, 4, 64) == cudaErrorInvalidValue);
  CHECK(collapse(nullptr, h, p, q, -1, 4, 64) == cudaErrorInvalidValue);
  CHECK(collapse(nullptr, h, p, q, 1, 0, 64) == cudaErrorInvalidValue);
  CHECK(collapse(nullptr, h, p, q, 1, kernels::kHcMaxStreams + 1, 64) == cudaErrorInvalidValue);
  CHECK(collapse(nullptr, h, p, q, 1, 4, 0) == cudaErrorInvalidValue);
  CHECK(collapse(&ok, p, p, q, 1, 4, 64) == cudaErrorInvalidValue);  // H aliases e.H_old
  const kernels::HcExpandIn no_y{nullptr, p, p, p};
  CHECK(collapse(&no_y, h, p, q, 1, 4, 64) == cudaErrorInvalidValue);
  CHECK(kernels::hc_site_collapse(nullptr, h, p, nullptr, q, 1, 4, 64, 1e-20f, nullptr, wsb,
                                  nullptr) == cudaErrorInvalidValue);  // no workspace
  CHECK(collapse(nullptr, h, p, q, 1, 4, 64, reinterpret_cast<void*>(uintptr_t{1032}), wsb) ==
        cudaErrorInvalidValue);  // workspace not 16-byte aligned
  CHECK(collapse(nullptr, h, p, q, 1, 4, 64, ws, 256) == cudaErrorInvalidValue);  // too small

  const auto mixes = [&](const float* H, const float* fn, float* pre, void* w, size_t wb, int64_t T,
                         int iters) {
    return kernels::hc_site_mixes(H, fn, p, p, pre, q, q, T, 4, 64, iters, 1e-6f, 1e-20f, w, wb,
                                  nullptr);
  };
  CHECK(mixes(h, p, q, ws, wsb, 0, 20) == cudaSuccess);
  CHECK(mixes(nullptr, p, q, ws, wsb, 1, 20) == cudaErrorInvalidValue);
  CHECK(mixes(h, nullptr, q, ws, wsb, 1, 20) == cudaErrorInvalidValue);
  CHECK(mixes(h, p, nullptr, ws, wsb, 1, 20) == cudaErrorInvalidValue);
  CHECK(mixes(h, p, q, nullptr, wsb, 1, 20) == cudaErrorInvalidValue);
  CHECK(mixes(h, p, q, reinterpret_cast<void*>(uintptr_t{1032}), wsb, 1, 20) ==
        cudaErrorInvalidValue);  // workspace not 16-byte aligned
  CHECK(mixes(h, p, q, ws, wsb, 1, 0) == cudaErrorInvalidValue);
  CHECK(mixes(h, p, q, ws, 0, 1, 20) == cudaErrorInvalidValue);  // workspace too small
}

TEST_CASE("hc_site matches hc_mixes + hc_collapse + rms_norm of the CPU", "[kernel][mhc]") {
  if (skip_without_gpu()) return;
  run_site(1, 1, 1, 1, true);      // degenerate
  run_site(3, 2, 37, 5, false);    // odd sizes, no norm weight
  run_site(2, 8, 1000, 20, true);  // the largest hc: the shared-memory finish
  run_site(5, 4, 300, 20, true);   // flat < 2 splits' worth: one split
  run_site(64, 2, 37, 5, false);   // prefill-sized calls: one split per (token, row)
  run_site(100, 1, 300, 3, true);
  run_site(70, 8, 100, 20, true);
  for (int64_t T : {1, 2, 7, 16, 300, 2048}) run_site(T, 4, 5120, 20, true);  // released dims
  run_site(2, 4, 9000, 20, true);  // 9 slices: the counter kernel instead of a cluster
}

TEST_CASE("hc_site rejects unsupported arguments", "[kernel][mhc]") {
  float* p = reinterpret_cast<float*>(uintptr_t{256});
  float* q = reinterpret_cast<float*>(uintptr_t{512});
  void* ws = reinterpret_cast<void*>(uintptr_t{1024});
  const size_t wsb = kernels::hc_site_workspace_bytes(4, 4, 64);
  REQUIRE(wsb > 0);
  CHECK(kernels::hc_site_workspace_bytes(0, 4, 64) == 0);
  CHECK(kernels::hc_site_workspace_bytes(4, 9, 64) == 0);
  using kernels::hc_site;
  const auto call = [&](const float* H, const float* prev, float* pre, int64_t T, int hc, int64_t D,
                        int iters, void* w, size_t wb) {
    return hc_site(H, p, p, p, prev, nullptr, pre, q, q, q, T, hc, D, iters, 1e-6f, 1e-20f, w, wb,
                   nullptr);
  };
  CHECK(call(p, p, q, 0, 4, 64, 20, ws, wsb) == cudaSuccess);  // T = 0: nothing to do
  CHECK(call(nullptr, p, q, 1, 4, 64, 20, ws, wsb) == cudaErrorInvalidValue);
  CHECK(call(p, q, q, 1, 4, 64, 20, ws, wsb) == cudaErrorInvalidValue);  // pre_prev == pre
  CHECK(call(p, p, q, -1, 4, 64, 20, ws, wsb) == cudaErrorInvalidValue);
  CHECK(call(p, p, q, 1, 0, 64, 20, ws, wsb) == cudaErrorInvalidValue);
  CHECK(call(p, p, q, 1, 9, 64, 20, ws, wsb) == cudaErrorInvalidValue);
  CHECK(call(p, p, q, 1, 4, 0, 20, ws, wsb) == cudaErrorInvalidValue);
  CHECK(call(p, p, q, 1, 4, 64, 0, ws, wsb) == cudaErrorInvalidValue);
  CHECK(call(p, p, q, 1, 4, 64, 20, nullptr, wsb) == cudaErrorInvalidValue);
  CHECK(call(p, p, q, 1, 4, 64, 20, reinterpret_cast<uint8_t*>(ws) + 4, wsb) ==
        cudaErrorInvalidValue);  // alignment
  // Workspace too small: sized for 4 rows, asked for 12 (5 rows fit in the 256-byte alignment
  // slack before the split collapse's region, so 5 is not a sure overflow); and too small for the
  // split collapse's region alone.
  CHECK(call(p, p, q, 12, 4, 64, 20, ws, wsb) == cudaErrorInvalidValue);
  CHECK(call(p, p, q, 1, 4, 64, 20, ws, 256) == cudaErrorInvalidValue);
}

TEST_CASE("hc_mixes matches the CPU reference", "[kernel][mhc]") {
  if (skip_without_gpu()) return;
  run_mixes(1, 1, 1, 1);      // degenerate: one stream, one value, one Sinkhorn step
  run_mixes(3, 2, 37, 5);     // odd sizes, fewer threads than values per block
  run_mixes(2, 8, 1000, 20);  // the largest hc
  for (int64_t T : {1, 2, 7, 16}) run_mixes(T, 4, 5120, 20);  // released: hc 4, D 5120
}

TEST_CASE("hc_collapse and hc_expand match the CPU reference", "[kernel][mhc]") {
  if (skip_without_gpu()) return;
  run_collapse_expand(1, 1, 1);
  run_collapse_expand(3, 3, 257);
  run_collapse_expand(2, 8, 100);
  for (int64_t T : {1, 5, 16}) run_collapse_expand(T, 4, 5120);
}

// The launchers reject these before touching memory, so no device is needed: the pointers are
// never dereferenced.
TEST_CASE("mHC launchers reject unsupported arguments", "[kernel][mhc]") {
  float dummy[64] = {};
  float* p = dummy;
  const float* c = dummy;
  auto mixes = [&](const float* H, int64_t T, int hc, int64_t D, int iters) {
    return kernels::hc_mixes(H, c, c, c, p, p, p, T, hc, D, iters, 1e-6f, 1e-20f, nullptr);
  };
  CHECK(mixes(nullptr, 1, 4, 8, 20) == cudaErrorInvalidValue);
  CHECK(mixes(c, -1, 4, 8, 20) == cudaErrorInvalidValue);
  CHECK(mixes(c, 1, 0, 8, 20) == cudaErrorInvalidValue);
  CHECK(mixes(c, 1, kernels::kHcMaxStreams + 1, 8, 20) == cudaErrorInvalidValue);
  CHECK(mixes(c, 1, 4, 0, 20) == cudaErrorInvalidValue);
  CHECK(mixes(c, 1, 4, 8, 0) == cudaErrorInvalidValue);
  CHECK(mixes(c, int64_t{1} << 40, 4, 8, 20) == cudaErrorInvalidValue);
  CHECK(kernels::hc_mixes(c, c, c, c, nullptr, p, p, 1, 4, 8, 20, 1e-6f, 1e-20f, nullptr) ==
        cudaErrorInvalidValue);
  CHECK(kernels::hc_collapse(nullptr, c, p, 1, 4, 8, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::hc_collapse(c, c, nullptr, 1, 4, 8, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::hc_collapse(c, c, p, -1, 4, 8, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::hc_collapse(c, c, p, 1, 9, 8, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::hc_collapse(c, c, p, 1, 4, 0, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::hc_collapse(c, c, p, int64_t{1} << 40, 4, 8, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::hc_expand(c, c, c, c, p, 1, 4, 0, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::hc_expand(c, p, c, c, p, 1, 4, 8, nullptr) == cudaErrorInvalidValue);  // alias
  CHECK(kernels::hc_expand(nullptr, c, c, c, p, 1, 4, 8, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::hc_expand(c, c, c, c, p, 1, 0, 8, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::hc_expand(c, c, c, c, p, -2, 4, 8, nullptr) == cudaErrorInvalidValue);
  // T == 0 launches nothing.
  CHECK(mixes(c, 0, 4, 8, 20) == cudaSuccess);
  CHECK(kernels::hc_collapse(c, c, p, 0, 4, 8, nullptr) == cudaSuccess);
}

}  // namespace dsv41::test
