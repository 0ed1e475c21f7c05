#include "backend/cuda/forward/mhc_sites.hpp"

#include <string>

#include "backend/cuda/forward/device_linear.hpp"
#include "backend/cuda/forward/launch_check.hpp"
#include "model/mhc.hpp"

namespace dsv41::cuda {
namespace {

// check_launch with "<what> <part>" (the string built only on failure: this runs 160 times a step).
void check_part(cudaError_t e, int layer, const char* what, const char* part) {
  if (e != cudaSuccess) [[unlikely]]
    check_launch(e, layer, (std::string(what) + " " + part).c_str());
}

}  // namespace

MhcSites::MhcSites(const MhcShape& shape, bool overlap, void* workspace, size_t workspace_bytes)
    : shape_(shape),
      lane_(overlap ? std::make_unique<SideStream>() : nullptr),
      workspace_(workspace),
      workspace_bytes_(workspace_bytes) {}

void MhcSites::site(const kernels::HcExpandIn* e, float* H, const MhcSiteWeights& w,
                    const float* pre_prev, const MhcMixesOut& out, float* xn, int64_t T,
                    cudaStream_t s, int layer, const char* what) {
  const MhcShape& m = shape_;
  if (lane_ == nullptr) {
    check_launch(
        e != nullptr
            ? kernels::hc_expand_site(*e, H, w.fn, w.base, w.scale, pre_prev, w.norm_w, out.pre,
                                      out.post, out.comb, xn, T, m.hc, m.D, m.sinkhorn_iters,
                                      m.hc_eps, m.norm_eps, workspace_, workspace_bytes_, s)
            : kernels::hc_site(H, w.fn, w.base, w.scale, pre_prev, w.norm_w, out.pre, out.post,
                               out.comb, xn, T, m.hc, m.D, m.sinkhorn_iters, m.hc_eps, m.norm_eps,
                               workspace_, workspace_bytes_, s),
        layer, what);
    return;
  }
  // pre_prev (and e's post / comb) are the previous site's mixes; H, once rewritten here, is no
  // longer read by them either.
  lane_->join(s);
  check_part(kernels::hc_site_collapse(e, H, pre_prev, w.norm_w, xn, T, m.hc, m.D, m.norm_eps,
                                       workspace_, workspace_bytes_, s),
             layer, what, "collapse");
  lane_->fork(s);
  check_part(kernels::hc_site_mixes(H, w.fn, w.base, w.scale, out.pre, out.post, out.comb, T, m.hc,
                                    m.D, m.sinkhorn_iters, m.hc_eps, m.norm_eps, workspace_,
                                    workspace_bytes_, lane_->get()),
             layer, what, "mixes");
  lane_->done();
}

void MhcSites::expand(const kernels::HcExpandIn& e, float* H_new, int64_t T, cudaStream_t s,
                      int layer, const char* what) {
  join(s);
  check_launch(kernels::hc_expand(e.y, e.H_old, e.post, e.comb, H_new, T, shape_.hc, shape_.D, s),
               layer, what);
}

void MhcSites::join(cudaStream_t s) {
  if (lane_ != nullptr) lane_->join(s);
}

DeviceBlockSites DeviceBlockSites::upload(const std::vector<float>& attn_norm,
                                          const std::vector<float>& ffn_norm,
                                          const HcSiteWeights& hc_attn,
                                          const HcSiteWeights& hc_ffn) {
  DeviceBlockSites b;
  b.attn_norm = upload_f32(attn_norm);
  b.ffn_norm = upload_f32(ffn_norm);
  b.hc_attn_fn = upload_f32(hc_attn.fn);
  b.hc_attn_base = upload_f32(hc_attn.base);
  b.hc_attn_scale = upload_f32(hc_attn.scale);
  b.hc_ffn_fn = upload_f32(hc_ffn.fn);
  b.hc_ffn_base = upload_f32(hc_ffn.base);
  b.hc_ffn_scale = upload_f32(hc_ffn.scale);
  return b;
}

uint64_t DeviceBlockSites::device_bytes() const {
  uint64_t b = 0;
  for (const DeviceBuffer* v : {&attn_norm, &ffn_norm, &hc_attn_fn, &hc_attn_base, &hc_attn_scale,
                                &hc_ffn_fn, &hc_ffn_base, &hc_ffn_scale})
    b += v->bytes();
  return b;
}

}  // namespace dsv41::cuda
