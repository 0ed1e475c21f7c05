#include "backend/cuda/forward/mhc_sites.hpp"

#include <string>

#include "backend/cuda/forward/launch_check.hpp"

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

}  // namespace dsv41::cuda
