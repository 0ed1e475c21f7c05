// [kernel] moe_route_dispatch (router, permutation and descriptor tables in one block) against the
// three launches it replaces, moe_route + moe_permute + moe_expert_tile_sets, each validated
// against the CPU reference in test_moe_router.cpp / test_moe_pipeline.cpp: every output must be
// the same bytes, including the entries past the used slots (left untouched by both).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <span>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "dsv41k/moe.hpp"
#include "kernel/kernel_check.hpp"

namespace dsv41::test {
namespace {

struct DispatchCase {
  int64_t T;
  int E, k;
  int begin, end;  // this rank's experts
  int n_sets;
  bool images;
  int tile =
      kernels::kMoeGemvMaxRows;  // descriptor rows (CudaForwardOptions::moe_verify_tile_rows)
};

// The outputs of one way of running the step, poisoned before it runs.
struct Outputs {
  cuda::DeviceBuffer ids, weights, counts, offsets, slot_token, slot_weight, inv;
  std::vector<cuda::DeviceBuffer> desc;
  Outputs(int64_t T, int k, int n_local, int n_sets, int64_t capacity)
      : ids(T * k * 4),
        weights(T * k * 4),
        counts(n_local * 4),
        offsets((n_local + 1) * 4),
        slot_token(T * k * 4),
        slot_weight(T * k * 4),
        inv(T * k * 4) {
    for (auto* b : {&ids, &weights, &counts, &offsets, &slot_token, &slot_weight, &inv})
      b->fill_bytes(0xA5);
    for (int i = 0; i < n_sets; ++i) {
      desc.emplace_back(capacity * sizeof(kernels::MoeGemvDesc));
      desc.back().fill_bytes(0x5A);
    }
  }
};

std::vector<uint8_t> bytes_of(const cuda::DeviceBuffer& b) {
  std::vector<uint8_t> v(b.bytes());
  b.download(std::span<uint8_t>(v));
  return v;
}

void require_same(const std::string& where, const char* what, const cuda::DeviceBuffer& got,
                  const cuda::DeviceBuffer& want) {
  const std::vector<uint8_t> a = bytes_of(got), b = bytes_of(want);
  REQUIRE(a.size() == b.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i] && bad++ == 0) first = i;
  INFO(fmt::format("{} {}: {} of {} bytes differ from the three launches, first at byte {}", where,
                   what, bad, a.size(), first));
  CHECK(bad == 0);
}

void run_dispatch(const DispatchCase& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int n_local = c.end - c.begin, tile = c.tile;
  const std::string where =
      fmt::format("T {} E {} k {} range [{}, {}) sets {} images {} tile {} seed {:#x}", c.T, c.E,
                  c.k, c.begin, c.end, c.n_sets, c.images, c.tile, seed);
  // Logits ~ 3·N(0, 1) (spread scores), biases small: distinct top-k sets across tokens.
  std::vector<float> logits = random_normal(size_t(c.T) * c.E, rng), bias = random_normal(c.E, rng),
                     bias_vl = random_normal(c.E, rng);
  for (float& v : logits) v *= 3.0f;
  for (float& v : bias) v *= 0.1f;
  std::vector<uint8_t> flags(static_cast<size_t>(c.T));
  for (size_t t = 0; t < flags.size(); ++t) flags[t] = (t % 3 == 1) ? 1 : 0;
  cuda::DeviceBuffer dl(logits.size() * 4), db(bias.size() * 4), dbv(bias_vl.size() * 4),
      df(flags.size());
  dl.upload(std::span<const float>(logits));
  db.upload(std::span<const float>(bias));
  dbv.upload(std::span<const float>(bias_vl));
  df.upload(std::span<const uint8_t>(flags));
  // Pointer tables: distinct fake addresses per (set, expert), null for every third expert of
  // odd sets (the other format's experts); the kernels only copy them.
  std::vector<cuda::DeviceBuffer> dw, dsc;
  for (int i = 0; i < c.n_sets; ++i) {
    std::vector<const uint8_t*> w, sc;
    for (int e = 0; e < n_local; ++e) {
      w.push_back(i % 2 == 1 && e % 3 == 0
                      ? nullptr
                      : reinterpret_cast<const uint8_t*>(uintptr_t{0x100000} * (i + 1) + 64 * e));
      sc.push_back(reinterpret_cast<const uint8_t*>(uintptr_t{0x900000} * (i + 1) + 16 * e));
    }
    dw.emplace_back(n_local * sizeof(void*));
    dsc.emplace_back(n_local * sizeof(void*));
    dw.back().upload(std::span<const uint8_t* const>(w));
    dsc.back().upload(std::span<const uint8_t* const>(sc));
  }
  const int64_t capacity = kernels::moe_tile_capacity(c.T, c.k, n_local, tile);
  const auto sets_of = [&](Outputs& o) {
    std::vector<kernels::MoeTileSet> s;
    for (int i = 0; i < c.n_sets; ++i)
      s.push_back({dw[i].as<const uint8_t* const>(), dsc[i].as<const uint8_t* const>(),
                   static_cast<int32_t>(100 * i), o.desc[i].as<kernels::MoeGemvDesc>()});
    return s;
  };
  kernels::MoeRouteArgs r;
  r.logits = dl.as<float>();
  r.bias = db.as<float>();
  r.bias_vl = dbv.as<float>();
  r.image_flags = c.images ? df.as<uint8_t>() : nullptr;
  r.E = c.E;
  r.k = c.k;
  r.gate_temp = 1.3f;
  r.norm_topk_prob = true;
  r.routed_scaling_factor = 2.5f;

  cuda::CudaStream stream;
  Outputs three(c.T, c.k, n_local, c.n_sets, capacity), one(c.T, c.k, n_local, c.n_sets, capacity);
  DSV41_CUDA_CHECK(kernels::moe_route(r.logits, r.bias, r.bias_vl, r.image_flags,
                                      three.ids.as<int32_t>(), three.weights.as<float>(), nullptr,
                                      c.T, c.E, c.k, r.gate_temp, r.norm_topk_prob,
                                      r.routed_scaling_factor, stream.get()));
  DSV41_CUDA_CHECK(kernels::moe_permute(
      three.ids.as<int32_t>(), three.weights.as<float>(), c.T, c.k, c.begin, c.end,
      three.counts.as<int32_t>(), three.offsets.as<int32_t>(), three.slot_token.as<int32_t>(),
      three.slot_weight.as<float>(), three.inv.as<int32_t>(), stream.get()));
  const std::vector<kernels::MoeTileSet> s3 = sets_of(three), s1 = sets_of(one);
  DSV41_CUDA_CHECK(kernels::moe_expert_tile_sets(three.counts.as<int32_t>(),
                                                 three.offsets.as<int32_t>(), n_local, s3.data(),
                                                 c.n_sets, tile, capacity, stream.get()));
  DSV41_CUDA_CHECK(kernels::moe_route_dispatch(
      r, c.T, one.ids.as<int32_t>(), one.weights.as<float>(), c.begin, c.end,
      one.counts.as<int32_t>(), one.offsets.as<int32_t>(), one.slot_token.as<int32_t>(),
      one.slot_weight.as<float>(), one.inv.as<int32_t>(), s1.data(), c.n_sets, tile, capacity,
      stream.get()));
  stream.synchronize();
  require_same(where, "ids", one.ids, three.ids);
  require_same(where, "weights", one.weights, three.weights);
  require_same(where, "counts", one.counts, three.counts);
  require_same(where, "offsets", one.offsets, three.offsets);
  require_same(where, "slot_token", one.slot_token, three.slot_token);
  require_same(where, "slot_weight", one.slot_weight, three.slot_weight);
  require_same(where, "inv", one.inv, three.inv);
  for (int i = 0; i < c.n_sets; ++i)
    require_same(where, fmt::format("set {} descriptors", i).c_str(), one.desc[i], three.desc[i]);
}

}  // namespace

TEST_CASE("moe_route_dispatch equals moe_route + moe_permute + moe_expert_tile_sets",
          "[kernel][moe]") {
  if (skip_without_gpu()) return;
  const uint64_t seed = fresh_seed();
  int n = 0;
  for (const int64_t T : {1, 2, 7, 16})
    for (const auto& [E, k] : {std::pair{8, 2}, std::pair{384, 6}, std::pair{512, 8}}) {
      run_dispatch({T, E, k, 0, E, 3, false}, seed + n++);     // one rank, FP4 w1 w3 w2
      run_dispatch({T, E, k, E / 2, E, 6, true}, seed + n++);  // TP rank 1, both formats
      run_dispatch({T, E, k, 0, std::max(1, E / 2), 1, true}, seed + n++);  // TP rank 0
    }
  run_dispatch({16, 1024, 64, 0, 512, 2, true}, seed + n++);  // the limits: k 64, 512 local
  run_dispatch({3, 1, 1, 0, 1, 1, false}, seed + n++);        // one expert
  // Verify steps in 2- and 1-row tiles (CudaForwardOptions::moe_verify_tile_rows): an expert's
  // rows split over several descriptors, capacity at its largest.
  for (const int tile : {2, 1})
    for (const int64_t T : {2, 7, 16}) {
      run_dispatch({T, 384, 6, 0, 384, 3, false, tile}, seed + n++);
      run_dispatch({T, 8, 2, 0, 8, 3, false, tile}, seed + n++);  // most tokens share experts
      run_dispatch({T, 384, 6, 192, 384, 6, true, tile}, seed + n++);
    }
}

TEST_CASE("moe_route_dispatch rejects unsupported arguments", "[kernel][moe]") {
  float* f = reinterpret_cast<float*>(uintptr_t{256});
  int32_t* i = reinterpret_cast<int32_t*>(uintptr_t{512});
  const auto* tab = reinterpret_cast<const uint8_t* const*>(uintptr_t{1024});
  auto* desc = reinterpret_cast<kernels::MoeGemvDesc*>(uintptr_t{2048});
  kernels::MoeRouteArgs ok;
  ok.logits = f, ok.bias = f, ok.E = 8, ok.k = 2;
  kernels::MoeTileSet set{tab, tab, 0, desc};
  const auto call = [&](const kernels::MoeRouteArgs& r, int64_t T, int begin, int end,
                        const kernels::MoeTileSet* sets, int n_sets, int64_t capacity,
                        float* slot_weight) {
    return kernels::moe_route_dispatch(r, T, i, f, begin, end, i, i, i, slot_weight, i, sets,
                                       n_sets, 16, capacity, nullptr);
  };
  CHECK(call(ok, 0, 0, 8, &set, 1, 4, f) == cudaErrorInvalidValue);  // T = 0
  CHECK(call(ok, kernels::kMoeDispatchMaxTokens + 1, 0, 8, &set, 1, 4, f) == cudaErrorInvalidValue);
  CHECK(call(ok, 1, 0, 0, &set, 1, 4, f) == cudaErrorInvalidValue);   // empty range
  CHECK(call(ok, 1, -1, 8, &set, 1, 4, f) == cudaErrorInvalidValue);  // negative begin
  CHECK(call(ok, 1, 0, 8, nullptr, 1, 4, f) == cudaErrorInvalidValue);
  CHECK(call(ok, 1, 0, 8, &set, 0, 4, f) == cudaErrorInvalidValue);
  CHECK(call(ok, 1, 0, 8, &set, kernels::kMoeMaxTileSets + 1, 4, f) == cudaErrorInvalidValue);
  CHECK(call(ok, 1, 0, 8, &set, 1, 0, f) == cudaErrorInvalidValue);  // capacity 0
  CHECK(call(ok, 1, 0, 8, &set, 1, 4, nullptr) == cudaErrorInvalidValue);
  kernels::MoeTileSet no_desc{tab, tab, 0, nullptr};
  CHECK(call(ok, 1, 0, 8, &no_desc, 1, 4, f) == cudaErrorInvalidValue);
  kernels::MoeTileSet bad_shift{tab, tab, -1, desc};
  CHECK(call(ok, 1, 0, 8, &bad_shift, 1, 4, f) == cudaErrorInvalidValue);
  kernels::MoeRouteArgs r = ok;
  r.k = 9;  // k > E
  CHECK(call(r, 1, 0, 8, &set, 1, 4, f) == cudaErrorInvalidValue);
  r = ok, r.gate_temp = 0.0f;
  CHECK(call(r, 1, 0, 8, &set, 1, 4, f) == cudaErrorInvalidValue);
  r = ok, r.image_flags = reinterpret_cast<const uint8_t*>(uintptr_t{4096});  // no bias_vl
  CHECK(call(r, 1, 0, 8, &set, 1, 4, f) == cudaErrorInvalidValue);
  r = ok, r.logits = nullptr;
  CHECK(call(r, 1, 0, 8, &set, 1, 4, f) == cudaErrorInvalidValue);
  r = ok, r.E = kernels::kMoeMaxExperts, r.k = 2;  // 1024 local experts: more than one block's
  CHECK(call(r, 1, 0, kernels::kMoeMaxExperts, &set, 1, 4, f) == cudaErrorInvalidValue);
}

}  // namespace dsv41::test
