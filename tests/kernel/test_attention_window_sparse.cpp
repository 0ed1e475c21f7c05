// [kernel] window_sparse_attention vs the CPU reference model/attention/window_sparse_attention
// (spec §2.2 steps 4-6, §2.6) on the stored formats: FP8 window ring + this call's packed rows,
// FP4 compressed entries, the sink, the inverse RoPE.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <span>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "core/thread_pool.hpp"
#include "dsv41k/attention.hpp"
#include "kernel/kernel_check.hpp"
#include "kv/packed_formats.hpp"
#include "model/attention/kv_quant.hpp"
#include "model/attention/rope.hpp"
#include "model/attention/window_sparse_attention.hpp"

namespace dsv41::test {
namespace {

struct Case {
  int64_t T;
  int H, D, R, W, capacity;
  int64_t pos0, n_entries;
  int topk;             // 0 = ratio-0 layer (no selection)
  int n_selected;       // valid ids per token (<= topk, <= n_entries); the rest -1
  bool bad_id = false;  // token 0 selects id n_entries: its rows must be NaN
};

cuda::DeviceBuffer upload_bytes(const void* p, size_t n) {
  cuda::DeviceBuffer b(std::max<size_t>(n, 16));
  if (n > 0) b.upload(p, n);
  return b;
}

// Bound per element, with K = max |key value| of the inputs and u = 2^-24. Keys decode exactly
// (same products as the reference). A score is a D-term dot product: the reference's sequential
// unfused sum and the kernel's two-accumulator FMA sum each err by <= D·u·Σ|q_c·k_c| (γ_D), so
// they differ by delta <= 3·D·u·B with B = scale·K·max_{t,h} Σ_c |q_c|. Each p_j then has relative
// error <= 2·delta + (nk + 72)·u (exp: CUDA expf <= 2 ulp vs glibc <= 1; the denominator's nk
// terms, up to 64 split weights and the division), and o[c] = Σ p_j k_j[c] (Σ p_j <= 1) errs by
// that times K plus its own nk·u·K summation; the inverse rotation at most doubles it and its
// cos/sin ulp adds 2^-22·2K (test_attention_rope.cpp). This worst case is loose (~1e-3 relative at
// 512 dims); the NMSE limit 1e-9 is the tight check: random rounding gives ~1e-12.
void run_case(const Case& k, ThreadPool* pool) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t T = k.T, H = k.H, D = k.D;
  const int64_t fp8_b = kv::packed_bytes(kv::EntryFormat::kWindowFp8, D);
  const int64_t fp4_b = kv::packed_bytes(kv::EntryFormat::kCompressedFp4, D);
  std::vector<float> q = random_normal(T * H * D, rng);
  std::vector<float> sink = random_normal(H, rng);
  const std::vector<float> f = rope_inv_freq_default(10000.0, k.R);
  float K = 0;
  auto fq_row = [&](std::vector<float>& v, int64_t r, bool fp8) {
    if (fp8)
      fake_quant_window_fp8(v.data() + r * D, D);
    else
      fake_quant_compressed_fp4(v.data() + r * D, D);
    for (int64_t c = 0; c < D; ++c) K = std::max(K, std::fabs(v[r * D + c]));
  };
  // Window ring holding the positions before pos0 (the oldest capacity of them).
  WindowRing ring;
  ring.reset(k.capacity, k.D);
  const int64_t old0 = std::max<int64_t>(0, k.pos0 - k.capacity);
  std::vector<float> old = random_normal((k.pos0 - old0) * D, rng);
  for (int64_t p = old0; p < k.pos0; ++p) {
    fq_row(old, p - old0, true);
    ring.write(p, old.data() + (p - old0) * D);
  }
  ring.next_pos = k.pos0;
  std::vector<float> kvn = random_normal(T * D, rng);
  std::vector<uint8_t> new_packed(T * fp8_b);
  for (int64_t t = 0; t < T; ++t) {
    fq_row(kvn, t, true);
    kv::pack(kv::EntryFormat::kWindowFp8, kvn.data() + t * D, D, new_packed.data() + t * fp8_b);
  }
  // Compressed entries and the selection (ascending distinct ids, -1 padded, as the indexer).
  CsaSourceState src;
  src.reset(0, 4, k.D, 0);
  std::vector<float> comp = random_normal(k.n_entries * D, rng);
  std::vector<uint8_t> comp_packed(k.n_entries * fp4_b);
  for (int64_t j = 0; j < k.n_entries; ++j) {
    fq_row(comp, j, false);
    kv::pack(kv::EntryFormat::kCompressedFp4, comp.data() + j * D, D,
             comp_packed.data() + j * fp4_b);
  }
  src.inject(comp, {});
  IndexSelection sel;
  sel.T = T;
  sel.topk = k.topk;
  sel.index.assign(T * k.topk, -1);
  std::vector<int32_t> ids(k.n_entries);
  for (int64_t j = 0; j < k.n_entries; ++j) ids[j] = static_cast<int32_t>(j);
  for (int64_t t = 0; t < T; ++t) {
    std::shuffle(ids.begin(), ids.end(), rng);
    std::vector<int32_t> pick(ids.begin(), ids.begin() + k.n_selected);
    std::sort(pick.begin(), pick.end());
    std::copy(pick.begin(), pick.end(), sel.index.begin() + t * k.topk);
  }
  const bool has_sel = k.topk > 0;
  std::vector<float> want(T * H * D, 0.0f);
  window_sparse_attention(q.data(), kvn.data(), T, H, D, k.R, k.W, k.pos0, ring,
                          has_sel ? &sel : nullptr, has_sel ? &src : nullptr, sink.data(), f.data(),
                          0, want.data(), pool);
  if (k.bad_id) sel.index[0] = static_cast<int32_t>(k.n_entries);  // after the reference

  cuda::CudaStream stream;
  cuda::DeviceBuffer dq = upload_bytes(q.data(), q.size() * 4);
  cuda::DeviceBuffer dn = upload_bytes(new_packed.data(), new_packed.size());
  cuda::DeviceBuffer dr = upload_bytes(ring.packed.data(), ring.packed.size());
  cuda::DeviceBuffer dc = upload_bytes(comp_packed.data(), comp_packed.size());
  cuda::DeviceBuffer di = upload_bytes(sel.index.data(), sel.index.size() * 4);
  cuda::DeviceBuffer ds = upload_bytes(sink.data(), sink.size() * 4);
  cuda::DeviceBuffer df = upload_bytes(f.data(), f.size() * 4);
  const double u = std::ldexp(1.0, -24);
  double qsum = 0;
  for (int64_t th = 0; th < T * H; ++th) {
    double s = 0;
    for (int64_t c = 0; c < D; ++c) s += std::fabs(q[th * D + c]);
    qsum = std::max(qsum, s);
  }
  const double B = qsum * K / std::sqrt(static_cast<double>(D));
  const int64_t nk = k.W + k.n_selected;
  const double delta = 3.0 * D * u * B;
  const double rel = 2.0 * (2.0 * delta + (2 * nk + 72) * u) + std::ldexp(1.0, -21);
  const std::vector<double> tol(want.size(), rel * K + 1e-30);
  // Both plans: the full split-key workspace (several splits for few tokens) and none (one split
  // per block, sink and normalisation in the block).
  const size_t ws_bytes =
      kernels::window_sparse_attention_workspace_bytes(T, k.H, k.D, k.W, k.topk);
  cuda::DeviceBuffer dws(std::max<size_t>(ws_bytes, 16));
  for (const bool split : {true, false}) {
    std::vector<float> got(want.size(), NAN);  // poisoned: every element must be written
    cuda::DeviceBuffer dout = upload_bytes(got.data(), got.size() * 4);
    DSV41_CUDA_CHECK(kernels::window_sparse_attention(
        dq.as<float>(), dn.as<uint8_t>(), dr.as<uint8_t>(), k.capacity, dc.as<uint8_t>(),
        k.n_entries, has_sel ? di.as<int32_t>() : nullptr, k.topk, ds.as<float>(), df.as<float>(),
        dout.as<float>(), T, k.H, k.D, k.R, k.W, k.pos0, split ? dws.data() : nullptr,
        split ? ws_bytes : 0, stream.get()));
    stream.synchronize();
    dout.download(std::span<float>(got));
    const std::string ctx = fmt::format(
        "window_sparse_attention T {} H {} D {} R {} W {} capacity {} pos0 {} entries {} topk {} "
        "selected {} bad_id {} workspace {} B seed {:#x}",
        T, H, D, k.R, k.W, k.capacity, k.pos0, k.n_entries, k.topk, k.n_selected, k.bad_id,
        split ? ws_bytes : 0, seed);
    INFO(ctx);
    if (k.bad_id) {  // token 0: NaN rows; the other tokens as the reference
      for (int64_t i = 0; i < H * D; ++i) REQUIRE(std::isnan(got[i]));
      std::copy(want.begin(), want.begin() + H * D, got.begin());
    }
    require_match(ctx + fmt::format(", K {}, score bound {}", K, delta), got, want, tol, 1e-9);
  }
}

}  // namespace

TEST_CASE("window_sparse_attention matches the CPU reference at tiny dims",
          "[kernel][attention][window_sparse]") {
  if (skip_without_gpu()) return;
  // T >= 32: the tensor-core kernel where head_dim is 64·2^k (64 here), else (32, 96) the
  // split-key kernel at one split per block.
  for (int64_t T : {1, 2, 7, 8, 16, 32, 33, 100}) {
    run_case({T, 3, 64, 16, 8, 12, 0, 0, 0, 0}, nullptr);      // ratio 0, first call (< window)
    run_case({T, 3, 64, 16, 8, 12, 5, 0, 0, 0}, nullptr);      // shorter than the window
    run_case({T, 3, 64, 16, 8, 12, 101, 0, 0, 0}, nullptr);    // ring wrapped
    run_case({T, 9, 32, 2, 4, 4, 37, 20, 6, 6}, nullptr);      // 9 heads: partial head chunk
    run_case({T, 3, 64, 16, 8, 12, 40, 3, 8, 3}, nullptr);     // fewer entries than topk
    run_case({T, 3, 64, 16, 8, 12, 40, 0, 8, 0}, nullptr);     // selection all -1
    run_case({T, 2, 96, 32, 8, 12, 40, 50, 40, 33}, nullptr);  // > 32 keys: several tiles
  }
  run_case({4, 3, 64, 16, 8, 12, 40, 10, 4, 4, true}, nullptr);   // out-of-range id -> NaN rows
  run_case({40, 3, 64, 16, 8, 12, 40, 10, 4, 4, true}, nullptr);  // the same, tensor-core kernel
  run_case({64, 20, 128, 32, 8, 12, 40, 50, 40, 33}, nullptr);    // 2 head groups, 16 + 4
  run_case({48, 5, 256, 64, 16, 20, 300, 90, 48, 40}, nullptr);   // head_dim 256
}

TEST_CASE("window_sparse_attention matches the CPU reference at the released dims",
          "[kernel][attention][window_sparse]") {
  if (skip_without_gpu()) return;
  ThreadPool pool;
  // 64 heads x 512, rope 64, window 128 (+16 rollback slots), index_topk 512.
  for (int64_t T : {1, 2, 7, 8, 16}) {
    run_case({T, 64, 512, 64, 128, 144, 5000, 1250, 512, 512}, &pool);
    run_case({T, 64, 512, 64, 128, 144, 60, 15, 512, 15}, &pool);  // < window, < topk
    run_case({T, 64, 512, 64, 128, 144, 3000, 0, 0, 0}, &pool);    // window-only layer
  }
  // Tensor-core kernel: a prefill chunk mid-sequence (ring + new rows in the window, full
  // selection), a window-only layer, and the first chunk (T > window).
  run_case({300, 64, 512, 64, 128, 144, 5000, 1250, 512, 512}, &pool);
  run_case({64, 64, 512, 64, 128, 144, 3000, 0, 0, 0}, &pool);
  run_case({2048, 64, 512, 64, 128, 144, 0, 256, 64, 64}, &pool);  // prefill chunk, T > window
}

TEST_CASE("window_sparse_attention rejects unsupported arguments",
          "[kernel][attention][window_sparse]") {
  float fb[64] = {};
  uint8_t bb[64] = {};
  int32_t ib[4] = {};
  const float* q = fb;
  const uint8_t* b = bb;
  float* o = fb;
  auto call = [&](const float* q_, const uint8_t* np, const uint8_t* ring, int cap,
                  const uint8_t* comp, int64_t ne, const int32_t* idx, int topk, const float* sink,
                  const float* f, float* o_, int64_t T, int H, int D, int R, int W, int64_t pos0) {
    return kernels::window_sparse_attention(q_, np, ring, cap, comp, ne, idx, topk, sink, f, o_, T,
                                            H, D, R, W, pos0, nullptr, 0, nullptr);
  };
  // Baseline (T = 0: valid, nothing launched).
  CHECK(call(q, b, b, 8, b, 1, ib, 1, q, q, o, 0, 1, 32, 2, 8, 1) == cudaSuccess);
  const cudaError_t inv = cudaErrorInvalidValue;
  CHECK(call(nullptr, b, b, 8, b, 1, ib, 1, q, q, o, 0, 1, 32, 2, 8, 1) == inv);
  CHECK(call(q, nullptr, b, 8, b, 1, ib, 1, q, q, o, 0, 1, 32, 2, 8, 1) == inv);
  CHECK(call(q, b, nullptr, 8, b, 1, ib, 1, q, q, o, 0, 1, 32, 2, 8, 1) == inv);  // pos0 > 0
  CHECK(call(q, b, b, 8, nullptr, 1, ib, 1, q, q, o, 0, 1, 32, 2, 8, 1) == inv);  // entries
  CHECK(call(q, b, b, 8, b, 1, nullptr, 1, q, q, o, 0, 1, 32, 2, 8, 1) == inv);   // topk > 0
  CHECK(call(q, b, b, 8, b, 1, ib, 1, nullptr, q, o, 0, 1, 32, 2, 8, 1) == inv);
  CHECK(call(q, b, b, 8, b, 1, ib, 1, q, nullptr, o, 0, 1, 32, 2, 8, 1) == inv);
  CHECK(call(q, b, b, 8, b, 1, ib, 1, q, q, nullptr, 0, 1, 32, 2, 8, 1) == inv);
  CHECK(call(q, b, b, 8, b, 1, ib, 1, q, q, o, -1, 1, 32, 2, 8, 1) == inv);  // T
  CHECK(call(q, b, b, 8, b, 1, ib, 1, q, q, o, int64_t{1} << 31, 1, 32, 2, 8, 1) == inv);
  CHECK(call(q, b, b, 8, b, 1, ib, 1, q, q, o, 0, 0, 32, 2, 8, 1) == inv);  // heads
  CHECK(call(q, b, b, 8, b, 1, ib, 1, q, q, o, 0, 65536, 32, 2, 8, 1) == inv);
  CHECK(call(q, b, b, 8, b, 1, ib, 1, q, q, o, 0, 1, 48, 2, 8, 1) == inv);  // D % 32
  CHECK(call(q, b, b, 8, b, 1, ib, 1, q, q, o, 0, 1, 0, 2, 8, 1) == inv);
  CHECK(call(q, b, b, 8, b, 1, ib, 1, q, q, o, 0, 1, 8192, 2, 8, 1) == inv);
  CHECK(call(q, b, b, 8, b, 1, ib, 1, q, q, o, 0, 1, 544, 2, 8, 1) == inv);  // D > 512
  CHECK(kernels::window_sparse_attention(q, b, b, 8, b, 1, ib, 1, q, q, o, 0, 1, 32, 2, 8, 1,
                                         nullptr, 64, nullptr) == inv);     // workspace null, bytes
  CHECK(call(q, b, b, 8, b, 1, ib, 1, q, q, o, 0, 1, 32, 3, 8, 1) == inv);  // R odd
  CHECK(call(q, b, b, 8, b, 1, ib, 1, q, q, o, 0, 1, 32, 0, 8, 1) == inv);
  CHECK(call(q, b, b, 8, b, 1, ib, 1, q, q, o, 0, 1, 32, 34, 8, 1) == inv);  // R > D
  CHECK(call(q, b, b, 8, b, 1, ib, 1, q, q, o, 0, 1, 32, 2, 0, 1) == inv);   // window
  CHECK(call(q, b, b, 8, b, 1, ib, 1, q, q, o, 0, 1, 32, 2, 9, 1) == inv);   // cap < W
  CHECK(call(q, b, b, 8, b, 1, ib, 1, q, q, o, 0, 1, 32, 2, 8, -1) == inv);  // pos0
  CHECK(call(q, b, b, 8, b, 1, ib, -1, q, q, o, 0, 1, 32, 2, 8, 1) == inv);  // topk
  CHECK(call(q, b, b, 8, b, 1, ib, 65537, q, q, o, 0, 1, 32, 2, 8, 1) == inv);
  CHECK(call(q, b, b, 8, b, -1, ib, 1, q, q, o, 0, 1, 32, 2, 8, 1) == inv);  // entries
}

}  // namespace dsv41::test
