// [kernel] fp8_block_gemv_multi (several FP8 weights on one x, one launch) vs one Linear per job,
// and bit-identical to fp8_block_gemv for a single job (same k split by construction).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <memory>

#include "backend/cuda/forward/device_linear.hpp"
#include "dsv41k/attention.hpp"
#include "kernel/gemv_case.hpp"

namespace dsv41::test {
namespace {

struct Weight {
  int64_t out;
  std::vector<uint8_t> w, s;
  std::unique_ptr<cuda::DeviceBuffer> dw, ds, dy;
};

// Jobs of the given output widths on one x [rows, in]; each job's y against gemv_reference of
// its own weight. The outputs live in one buffer, back to back, poisoned with NaN first.
void run_multi(const std::vector<int64_t>& outs, int64_t in, const std::vector<int>& row_counts) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  cuda::CudaStream stream;
  std::vector<Weight> ws;
  for (int64_t out : outs) {
    Weight w;
    w.out = out;
    w.w = random_e4m3(static_cast<size_t>(out * in), rng);
    w.s = random_e8m0(static_cast<size_t>(((out + 31) / 32) * ((in + 31) / 32)), rng);
    w.dw = std::make_unique<cuda::DeviceBuffer>(w.w.size());
    w.ds = std::make_unique<cuda::DeviceBuffer>(w.s.size());
    w.dw->upload(std::span<const uint8_t>(w.w));
    w.ds->upload(std::span<const uint8_t>(w.s));
    w.dy =
        std::make_unique<cuda::DeviceBuffer>(static_cast<size_t>(kernels::kGemvMaxRows) * out * 4);
    ws.push_back(std::move(w));
  }
  for (int rows : row_counts) {
    const std::vector<float> x = random_normal(static_cast<size_t>(rows) * in, rng);
    cuda::DeviceBuffer dx(x.size() * 4);
    dx.upload(std::span<const float>(x));
    std::vector<kernels::Fp8GemvJob> jobs;
    for (Weight& w : ws) {
      w.dy->fill_bytes(0xFF);
      jobs.push_back({w.dw->as<uint8_t>(), w.ds->as<uint8_t>(), w.dy->as<float>(), w.out});
    }
    DSV41_CUDA_CHECK(kernels::fp8_block_gemv_multi(
        dx.as<float>(), jobs.data(), static_cast<int>(jobs.size()), rows, in, stream.get()));
    stream.synchronize();
    for (size_t j = 0; j < ws.size(); ++j) {
      const Weight& w = ws[j];
      std::vector<float> got(static_cast<size_t>(rows) * w.out);
      DSV41_CUDA_CHECK(cudaMemcpy(got.data(), w.dy->data(), got.size() * 4, cudaMemcpyDefault));
      const GemvReference ref = gemv_reference(false, w.w, w.s, x, rows, w.out, in);
      std::vector<double> tol(ref.abs_dot.size());
      for (size_t i = 0; i < tol.size(); ++i) tol[i] = kGemvTolPerAbsDot * ref.abs_dot[i] + 1e-30;
      require_match(fmt::format("fp8 multi: job {} of {}, out {} in {} rows {} seed {:#x}", j,
                                ws.size(), w.out, in, rows, seed),
                    got, ref.y, tol, kGemvMaxNmse);
    }
  }
}

}  // namespace

TEST_CASE("fp8_block_gemv_multi matches one Linear per job", "[kernel][linear]") {
  if (skip_without_gpu()) return;
  const std::vector<int> rows = {1, 2, 3, 7, 8, 16};
  run_multi({37}, 96, rows);                                     // one job
  run_multi({1, 3, 40, 64, 130}, 272, rows);                     // widths off the 2/4-row warp step
  run_multi({5, 2048, 7, 33, 1, 96, 64, 12}, 2048, {1, 2, 16});  // 8 jobs, k split > 1
  // The attention site's inputs at the released dims: wq_a, wkv, compressor wkv + wgate, the
  // indexer's weights_proj width.
  run_multi({1536, 512, 512, 512, 64}, 4096, {1, 2, 3});
  run_multi({1024, 512, 1024, 1024}, 5120, {1, 2});
}

TEST_CASE("fp8_block_gemv_multi with one job is bit-identical to fp8_block_gemv",
          "[kernel][linear]") {
  if (skip_without_gpu()) return;
  std::mt19937_64 rng(fresh_seed());
  cuda::CudaStream stream;
  for (auto [out, in] : std::vector<std::pair<int64_t, int64_t>>{{37, 96}, {1280, 5120}}) {
    const auto w = random_e4m3(static_cast<size_t>(out * in), rng);
    const auto s = random_e8m0(static_cast<size_t>(((out + 31) / 32) * ((in + 31) / 32)), rng);
    cuda::DeviceBuffer dw(w.size()), ds(s.size()), dy1(16 * out * 4), dy2(16 * out * 4);
    dw.upload(std::span<const uint8_t>(w));
    ds.upload(std::span<const uint8_t>(s));
    for (int rows : {1, 2, 5, 16}) {
      const std::vector<float> x = random_normal(static_cast<size_t>(rows) * in, rng);
      cuda::DeviceBuffer dx(x.size() * 4);
      dx.upload(std::span<const float>(x));
      const kernels::Fp8GemvJob job{dw.as<uint8_t>(), ds.as<uint8_t>(), dy2.as<float>(), out};
      DSV41_CUDA_CHECK(kernels::fp8_block_gemv(dx.as<float>(), dw.as<uint8_t>(), ds.as<uint8_t>(),
                                               dy1.as<float>(), rows, out, in, stream.get()));
      DSV41_CUDA_CHECK(
          kernels::fp8_block_gemv_multi(dx.as<float>(), &job, 1, rows, in, stream.get()));
      stream.synchronize();
      std::vector<float> a(rows * out), b(rows * out);
      dy1.download(std::span<float>(a));
      dy2.download(std::span<float>(b));
      INFO("out " << out << " in " << in << " rows " << rows);
      CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
    }
  }
}

// Job 0 with a rope: the launch's epilogue must give exactly the multi launch without it followed
// by rope_rotate (the query RoPE of wq_b), at the released wq_b + indexer wq_b shape (k split 1,
// R = 2 or 4) and at small widths (k split > 1: the pairs rotate in the split reduction).
void run_rope(int64_t out0, int64_t out1, int64_t in, int head_dim, int rope_dim, int64_t pos0) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  cuda::CudaStream stream;
  std::vector<float> inv(static_cast<size_t>(rope_dim / 2));
  for (size_t i = 0; i < inv.size(); ++i)
    inv[i] = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(i) / rope_dim));
  cuda::DeviceBuffer dinv(inv.size() * 4);
  dinv.upload(std::span<const float>(inv));
  std::vector<cuda::DeviceBuffer> dw, ds;
  for (int64_t out : {out0, out1}) {
    const auto w = random_e4m3(static_cast<size_t>(out * in), rng);
    const auto sc = random_e8m0(static_cast<size_t>(((out + 31) / 32) * ((in + 31) / 32)), rng);
    dw.emplace_back(w.size());
    ds.emplace_back(sc.size());
    dw.back().upload(std::span<const uint8_t>(w));
    ds.back().upload(std::span<const uint8_t>(sc));
  }
  for (int rows : {1, 2, 3, 4, 7, 8, 16}) {
    const std::vector<float> x = random_normal(static_cast<size_t>(rows) * in, rng);
    cuda::DeviceBuffer dx(x.size() * 4), a0(rows * out0 * 4), a1(rows * out1 * 4),
        b0(rows * out0 * 4), b1(rows * out1 * 4);
    dx.upload(std::span<const float>(x));
    kernels::Fp8GemvJob plain[2] = {
        {dw[0].as<uint8_t>(), ds[0].as<uint8_t>(), a0.as<float>(), out0},
        {dw[1].as<uint8_t>(), ds[1].as<uint8_t>(), a1.as<float>(), out1}};
    kernels::Fp8GemvJob roped[2] = {plain[0], plain[1]};
    roped[0].y = b0.as<float>(), roped[1].y = b1.as<float>();
    roped[0].rope = {dinv.as<float>(), head_dim, rope_dim, pos0};
    DSV41_CUDA_CHECK(
        kernels::fp8_block_gemv_multi(dx.as<float>(), plain, 2, rows, in, stream.get()));
    DSV41_CUDA_CHECK(kernels::rope_rotate(a0.as<float>(), dinv.as<float>(), rows,
                                          static_cast<int>(out0 / head_dim), head_dim, rope_dim,
                                          pos0, 1, false, stream.get()));
    DSV41_CUDA_CHECK(
        kernels::fp8_block_gemv_multi(dx.as<float>(), roped, 2, rows, in, stream.get()));
    stream.synchronize();
    for (int j = 0; j < 2; ++j) {
      const int64_t n = rows * (j == 0 ? out0 : out1);
      std::vector<float> want(n), got(n);
      (j == 0 ? a0 : a1).download(std::span<float>(want));
      (j == 0 ? b0 : b1).download(std::span<float>(got));
      int64_t bad = 0, first = 0;
      for (int64_t i = 0; i < n; ++i)
        if (std::memcmp(&want[i], &got[i], 4) != 0 && bad++ == 0) first = i;
      INFO(
          fmt::format("rope job {}: out {} / {} in {} head_dim {} rope {} pos0 {} rows {} seed "
                      "{:#x}: {} of {} differ from multi + rope_rotate, first at {}: {} vs {}",
                      j, out0, out1, in, head_dim, rope_dim, pos0, rows, seed, bad, n, first,
                      bad ? got[first] : 0.f, bad ? want[first] : 0.f));
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("fp8_block_gemv_multi rotates job 0 like rope_rotate after it", "[kernel][linear]") {
  if (skip_without_gpu()) return;
  run_rope(32768, 8192, 1024, 512, 64, 4093);  // wq_b + indexer wq_b (q_lora 1024 here)
  run_rope(64, 32, 4096, 16, 8, 7);            // k split > 1
  run_rope(96, 32, 2048, 32, 32, 100000);      // the whole head rotates
}

TEST_CASE("fp8_block_gemv_multi rejects unsupported arguments", "[kernel][linear]") {
  if (skip_without_gpu()) return;
  cuda::DeviceBuffer x(16 * 128 * 4), w(128 * 128), s(64), y(16 * 256 * 4);
  float* y0 = y.as<float>();
  const auto job = [&](float* out_ptr, int64_t out = 32) {
    return kernels::Fp8GemvJob{w.as<uint8_t>(), s.as<uint8_t>(), out_ptr, out};
  };
  const auto call = [&](std::vector<kernels::Fp8GemvJob> jobs, int rows = 1, int64_t in = 64,
                        int n = -1) {
    return kernels::fp8_block_gemv_multi(
        x.as<float>(), jobs.data(), n < 0 ? static_cast<int>(jobs.size()) : n, rows, in, nullptr);
  };
  CHECK(call({job(y0)}, 1, 64, 0) == cudaErrorInvalidValue);                           // no jobs
  CHECK(call(std::vector<kernels::Fp8GemvJob>(9, job(y0))) == cudaErrorInvalidValue);  // > 8
  CHECK(kernels::fp8_block_gemv_multi(x.as<float>(), nullptr, 1, 1, 64, nullptr) ==
        cudaErrorInvalidValue);
  CHECK(call({job(y0)}, 0) == cudaErrorInvalidValue);              // rows
  CHECK(call({job(y0)}, 17) == cudaErrorInvalidValue);             // rows > 16
  CHECK(call({job(y0)}, 1, 48 + 8) == cudaErrorInvalidValue);      // in % 16
  CHECK(call({job(y0, 0)}) == cudaErrorInvalidValue);              // out
  CHECK(call({job(nullptr)}) == cudaErrorInvalidValue);            // y
  CHECK(call({job(y0), job(y0 + 16)}) == cudaErrorInvalidValue);   // outputs overlap
  CHECK(call({job(x.as<float>() + 8)}) == cudaErrorInvalidValue);  // y inside x
  CHECK(call({job(y0), job(y0 + 32), job(y0 + 64, 40)}, 2) == cudaErrorInvalidValue);  // 2 rows
  CHECK(call({job(y0), job(y0 + 64), job(y0 + 128, 40)}, 2) == cudaSuccess);
  // Rope epilogue: job 0 only, out a multiple of head_dim, even rope_dim <= head_dim, pos0 >= 0.
  const float* inv = x.as<float>();
  const auto roped = [&](kernels::Fp8GemvRope r, int64_t out = 32) {
    kernels::Fp8GemvJob j = job(y0, out);
    j.rope = r;
    return j;
  };
  CHECK(call({roped({inv, 16, 8, 0})}) == cudaSuccess);
  CHECK(call({job(y0), roped({inv, 16, 8, 0}, 32)}) == cudaErrorInvalidValue);  // not job 0
  CHECK(call({roped({inv, 24, 8, 0})}) == cudaErrorInvalidValue);               // 32 % 24
  CHECK(call({roped({inv, 16, 7, 0})}) == cudaErrorInvalidValue);               // odd rope
  CHECK(call({roped({inv, 16, 32, 0})}) == cudaErrorInvalidValue);              // rope > head
  CHECK(call({roped({inv, 16, 0, 0})}) == cudaErrorInvalidValue);
  CHECK(call({roped({inv, 16, 8, -1})}) == cudaErrorInvalidValue);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("DeviceLinear::gemv_shared_x equals each weight's own gemv", "[kernel][linear]") {
  if (skip_without_gpu()) return;
  // Nine FP8 weights (one more than a launch takes), a BF16 and an F32 weight and a null entry
  // on one x; rows 1-3 (CUDA-core: the FP8 ones share launches) and 5, 16 (the tensor-core rows:
  // each FP8 weight runs alone). Every output against the same weight's gemv() on the same x.
  // A weight of another input width in the list is refused naming it.
  std::mt19937_64 rng(fresh_seed());
  const int64_t in = 512, in_other = 256;
  std::vector<cuda::DeviceLinear> lins;
  std::vector<int64_t> ins;
  const std::vector<int64_t> outs = {64, 1, 37, 512, 96, 33, 128, 7, 256};
  for (size_t j = 0; j < outs.size(); ++j) {
    const auto w = random_e4m3(static_cast<size_t>(outs[j] * in), rng);
    const auto sc = random_e8m0(static_cast<size_t>(((outs[j] + 31) / 32) * (in / 32)), rng);
    lins.push_back(
        cuda::DeviceLinear::from_fp8(w.data(), sc.data(), outs[j], in, fmt::format("fp8.{}", j)));
    ins.push_back(in);
  }
  {
    const auto w = random_e4m3(static_cast<size_t>(40 * in_other), rng);
    const auto sc = random_e8m0(static_cast<size_t>(2 * (in_other / 32)), rng);
    lins.push_back(cuda::DeviceLinear::from_fp8(w.data(), sc.data(), 40, in_other, "fp8.other"));
    ins.push_back(in_other);
  }
  std::vector<float> wb = random_normal(static_cast<size_t>(24 * in), rng);
  for (float& v : wb) v = bf16_round(v);  // exactly bf16: stored as BF16
  lins.push_back(cuda::DeviceLinear::from_f32(wb, 24, in, "bf16"));
  lins.push_back(
      cuda::DeviceLinear::from_f32(random_normal(static_cast<size_t>(9 * in), rng), 9, in, "f32"));
  ins.push_back(in);
  ins.push_back(in);
  CHECK(lins[lins.size() - 2].format() == WeightFormat::kBF16);
  CHECK(lins.back().format() == WeightFormat::kF32);
  cuda::DeviceBuffer scratch(kernels::fp8_gemv_tc_workspace_bytes(in));
  for (cuda::DeviceLinear& l : lins) l.set_gemv_scratch(scratch.data(), scratch.bytes());
  cuda::CudaStream stream;
  for (int rows : {1, 2, 3, 5, 16}) {
    // x of width `in`; the other-width weight gets x's first in_other columns per row via its
    // own buffer, so it joins as a lone entry of the list with the same x pointer only when
    // the widths agree: here it is passed with its own call below.
    const std::vector<float> x = random_normal(static_cast<size_t>(rows) * in, rng);
    cuda::DeviceBuffer dx(x.size() * 4);
    dx.upload(std::span<const float>(x));
    std::vector<std::unique_ptr<cuda::DeviceBuffer>> got, want;
    std::vector<const cuda::DeviceLinear*> list;
    std::vector<float*> ys;
    for (size_t j = 0; j < lins.size(); ++j) {
      if (ins[j] != in) continue;
      const size_t n = static_cast<size_t>(rows) * lins[j].out_features();
      got.push_back(std::make_unique<cuda::DeviceBuffer>(n * 4));
      want.push_back(std::make_unique<cuda::DeviceBuffer>(n * 4));
      got.back()->fill_bytes(0xFF);
      list.push_back(&lins[j]);
      ys.push_back(got.back()->as<float>());
      if (j == 3) {  // null entries are skipped
        list.push_back(nullptr);
        ys.push_back(nullptr);
      }
    }
    {
      std::vector<const cuda::DeviceLinear*> odd = list;
      std::vector<float*> odd_ys = ys;
      odd.push_back(&lins[outs.size()]);  // fp8.other: in 256
      odd_ys.push_back(ys.front());
      CHECK_THROWS_WITH(
          cuda::DeviceLinear::gemv_shared_x(odd, odd_ys, dx.as<float>(), rows, stream.get()),
          Catch::Contains("fp8.other takes 256 inputs"));
    }
    cuda::DeviceLinear::gemv_shared_x(list, ys, dx.as<float>(), rows, stream.get());
    size_t k = 0;
    for (size_t j = 0; j < list.size(); ++j) {
      if (list[j] == nullptr) continue;
      list[j]->gemv(dx.as<float>(), rows, want[k]->as<float>(), stream.get());
      stream.synchronize();
      const size_t n = static_cast<size_t>(rows) * list[j]->out_features();
      std::vector<float> a(n), b(n);
      got[k]->download(std::span<float>(a));
      want[k]->download(std::span<float>(b));
      double scale = 0, worst = 0;
      for (size_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(double(b[i])));
      for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
      INFO(list[j]->name() << " rows " << rows << ": max |shared - own| " << worst << " of max |y| "
                           << scale);
      CHECK(worst <= 1e-5 * scale);  // the k split may differ: fp32 reassociation only
      ++k;
    }
  }
}

}  // namespace dsv41::test
