// The mHC sites of one forward step (spec model-architecture.md §3) on the device: before each
// sublayer, the site's mixes of the entering H (pre, post, comb) and the sublayer input xn =
// rms_norm(collapse(H, previous site's pre)) · norm_w, with the previous sublayer's expand folded
// in where nothing sits between them (kernels/include/dsv41k/mhc.hpp).
//
// The sublayer needs only xn, and xn needs only the previous site's pre, so with `overlap`
// hc_site_collapse runs on the main stream and hc_site_mixes on a side stream beside the
// sublayer (~20 us per site on the critical path at decode was mostly the mix projection and
// Sinkhorn: docs/perf.md); without it hc_site / hc_expand_site queue both on the main stream. The
// next site's collapse, and any standalone expand, first wait for the mixes they read. Both forms
// write the same bytes (the same kernels).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cuda/device_buffer.hpp"
#include "backend/cuda/side_stream.hpp"
#include "dsv41k/mhc.hpp"

namespace dsv41 {
struct HcSiteWeights;
}

namespace dsv41::cuda {

// Device weights of one site (fn [(2+hc)·hc, hc·D], base, scale [3]) and its sublayer's norm.
struct MhcSiteWeights {
  const float* fn = nullptr;
  const float* base = nullptr;
  const float* scale = nullptr;
  const float* norm_w = nullptr;
};

// The two sites' weights and sublayer norms of one block (a backbone layer or a DSpark stage) in
// device memory.
struct DeviceBlockSites {
  DeviceBuffer attn_norm, ffn_norm;
  DeviceBuffer hc_attn_fn, hc_attn_base, hc_attn_scale;
  DeviceBuffer hc_ffn_fn, hc_ffn_base, hc_ffn_scale;

  static DeviceBlockSites upload(const std::vector<float>& attn_norm,
                                 const std::vector<float>& ffn_norm, const HcSiteWeights& hc_attn,
                                 const HcSiteWeights& hc_ffn);
  MhcSiteWeights attn_site() const {
    return {hc_attn_fn.as<float>(), hc_attn_base.as<float>(), hc_attn_scale.as<float>(),
            attn_norm.as<float>()};
  }
  MhcSiteWeights ffn_site() const {
    return {hc_ffn_fn.as<float>(), hc_ffn_base.as<float>(), hc_ffn_scale.as<float>(),
            ffn_norm.as<float>()};
  }
  uint64_t device_bytes() const;
};

// Outputs of one site: its mixes [T, hc], [T, hc], [T, hc, hc].
struct MhcMixesOut {
  float* pre = nullptr;
  float* post = nullptr;
  float* comb = nullptr;
};

struct MhcShape {
  int hc = 4;
  int64_t D = 0;
  int sinkhorn_iters = 20;
  float hc_eps = 1e-6f;
  float norm_eps = 1e-6f;
};

class MhcSites {
 public:
  // overlap: the mixes on a side stream (creates it; throws Failure on a CUDA error).
  // workspace: hc_site_workspace_bytes(max_chunk, hc, D) bytes, zeroed once, owned by the caller.
  MhcSites(const MhcShape& shape, bool overlap, void* workspace, size_t workspace_bytes);

  // One site on stream s: e non-null folds the expand e into H (written), else H is read.
  // `layer` and `what` name the launch in a failure.
  void site(const kernels::HcExpandIn* e, float* H, const MhcSiteWeights& w, const float* pre_prev,
            const MhcMixesOut& out, float* xn, int64_t T, cudaStream_t s, int layer,
            const char* what);
  // hc_expand(e) into H_new on s after the mixes that wrote e.post / e.comb.
  void expand(const kernels::HcExpandIn& e, float* H_new, int64_t T, cudaStream_t s, int layer,
              const char* what);
  // s waits for every mixes launch queued so far (before anything reads pre / post / comb
  // outside site(), and before a captured step ends).
  void join(cudaStream_t s);

 private:
  MhcShape shape_;
  std::unique_ptr<SideStream> lane_;  // null without overlap
  void* workspace_;
  size_t workspace_bytes_;
};

}  // namespace dsv41::cuda
