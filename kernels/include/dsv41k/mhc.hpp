// Launchers of the mHC residual ops (spec model-architecture.md §3), mirroring the CPU reference
// model/mhc.cpp: raw device pointers, sizes, a stream; no allocation, no workspace. Every
// launcher returns cudaErrorInvalidValue before launching anything when an argument is outside
// its preconditions, else cudaGetLastError() after the launch. Layouts row-major, fp32.
// See docs/kernels.md.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dsv41::kernels {

// Largest hc_mult the mHC kernels take (released 4).
inline constexpr int kHcMaxStreams = 8;

// §3 steps 1-6 for T tokens at one site (= dsv41::hc_mixes):
//   H      [T, hc, D]            residual streams (flattened per token to hc·D values)
//   fn     [(2+hc)·hc, hc·D]     rows 0..hc-1 pre, hc..2hc-1 post, then comb j-major
//   base   [(2+hc)·hc], scale [3] (pre, post, comb)   all device pointers
//   pre    [T, hc]  = sigmoid(m_j·scale0 + base_j) + hc_eps
//   post   [T, hc]  = 2·sigmoid(m_{hc+j}·scale1 + base_{hc+j})
//   comb   [T, hc, hc] Sinkhorn of the logits (first index j = input stream), sinkhorn_iters
// The rms statistic and the 24 dot products are accumulated in fp64 like the reference; the
// rest is its fp32 op sequence with unfused products (exp through fp64, then rounded to fp32).
// Needs T >= 0, 1 <= hc <= kHcMaxStreams, D >= 1, sinkhorn_iters >= 1, all pointers non-null,
// outputs not aliasing the inputs.
cudaError_t hc_mixes(const float* H, const float* fn, const float* base, const float* scale,
                     float* pre, float* post, float* comb, int64_t T, int hc, int64_t D,
                     int sinkhorn_iters, float hc_eps, float norm_eps, cudaStream_t stream);

// One site before its sublayer (the forward pass's form of hc_mixes + hc_collapse + rms_norm, same
// op sequences): hc_site_collapse then hc_site_mixes (below) on one stream.
//   pre, post, comb  = hc_mixes(H, fn, base, scale)                    (this site's mixes)
//   xn [T, D]        = rms_norm(Σ_j pre_prev[t, j] · H[t, j, :], eps) · norm_w   (norm_w may be
//   null)
// pre_prev [T, hc] is the previous site's pre (the collapse does not wait for this site's mixes).
// workspace: hc_site_workspace_bytes(max_T, hc, D) bytes for any T <= max_T, 16-byte aligned,
// zeroed once after allocation (each call leaves its counters at zero), used by no concurrent
// call (but see hc_site_collapse / hc_site_mixes below). Needs hc_mixes' conditions, non-null
// outputs not aliasing the inputs, pre_prev != pre.
size_t hc_site_workspace_bytes(int64_t max_T, int hc, int64_t D);
cudaError_t hc_site(const float* H, const float* fn, const float* base, const float* scale,
                    const float* pre_prev, const float* norm_w, float* pre, float* post,
                    float* comb, float* xn, int64_t T, int hc, int64_t D, int sinkhorn_iters,
                    float hc_eps, float norm_eps, void* workspace, size_t workspace_bytes,
                    cudaStream_t stream);

// hc_expand(e.y, e.H_old, e.post, e.comb) into H_new, then hc_site on H_new, with the results of
// those two calls bit for bit: the collapse kernel computes the expanded values (hc_expand's op
// sequence) where it reads them and writes H_new, saving hc_expand's launch per site. H_new must
// not alias e.H_old; otherwise hc_site's conditions. Used for every site that follows an expand
// with nothing in between (all but those after an Engram block).
struct HcExpandIn {
  const float* y = nullptr;      // [T, D] sublayer output
  const float* H_old = nullptr;  // [T, hc, D]
  const float* post = nullptr;   // [T, hc] of the previous site
  const float* comb = nullptr;   // [T, hc, hc] of the previous site
};
cudaError_t hc_expand_site(const HcExpandIn& e, float* H_new, const float* fn, const float* base,
                           const float* scale, const float* pre_prev, const float* norm_w,
                           float* pre, float* post, float* comb, float* xn, int64_t T, int hc,
                           int64_t D, int sinkhorn_iters, float hc_eps, float norm_eps,
                           void* workspace, size_t workspace_bytes, cudaStream_t stream);

// The two launches of hc_site (or hc_expand_site), for two streams: the collapse needs only the
// previous site's pre, so the sublayer can start after hc_site_collapse while hc_site_mixes runs
// beside it (CudaForwardOptions::side_streams). Together they write what hc_site /
// hc_expand_site write, bit for bit (the same kernels).
//   hc_site_collapse: xn = rms_norm(collapse(H, pre_prev)) · norm_w; with e non-null H is
//     written first with hc_expand(e) (H must not alias e->H_old), for any T. At T <= 16 the
//     row is split over D slices (several blocks per token, the last one normalising), using
//     the end of the workspace; the Σx² is then summed in another order than at T > 16 (fp64
//     rounding: ~1e-16 relative).
//   hc_site_mixes: pre, post, comb of H. Must not start before the H it reads is written.
// Both take hc_site's workspace; a collapse and a mixes call may run at the same time on one
// workspace (disjoint regions), two collapses or two mixes calls may not.
cudaError_t hc_site_collapse(const HcExpandIn* e, float* H, const float* pre_prev,
                             const float* norm_w, float* xn, int64_t T, int hc, int64_t D,
                             float norm_eps, void* workspace, size_t workspace_bytes,
                             cudaStream_t stream);
cudaError_t hc_site_mixes(const float* H, const float* fn, const float* base, const float* scale,
                          float* pre, float* post, float* comb, int64_t T, int hc, int64_t D,
                          int sinkhorn_iters, float hc_eps, float norm_eps, void* workspace,
                          size_t workspace_bytes, cudaStream_t stream);

// x[t, d] = Σ_j pre[t, j] · H[t, j, d] (= dsv41::hc_collapse), j ascending, fp32 unfused.
//   H [T, hc, D], pre [T, hc], x [T, D] (x must not alias H).
// Needs T >= 0, 1 <= hc <= kHcMaxStreams, D >= 1, non-null pointers.
cudaError_t hc_collapse(const float* H, const float* pre, float* x, int64_t T, int hc, int64_t D,
                        cudaStream_t stream);

// H_new[t, k, d] = post[t, k] · y[t, d] + Σ_j comb[t, j, k] · H_old[t, j, d] (= dsv41::hc_expand),
// j ascending, fp32 unfused.
//   y [T, D], H_old / H_new [T, hc, D], post [T, hc], comb [T, hc, hc]; H_new must not alias
//   H_old. Needs T >= 0, 1 <= hc <= kHcMaxStreams, D >= 1, non-null pointers, H_new != H_old.
cudaError_t hc_expand(const float* y, const float* H_old, const float* post, const float* comb,
                      float* H_new, int64_t T, int hc, int64_t D, cudaStream_t stream);

}  // namespace dsv41::kernels
