// mHC mixes of one site (spec model-architecture.md §3 steps 1-6), as the CPU reference
// model/mhc.cpp (hc_mixes, hc_sinkhorn) computes them:
//   v = H[t] flattened [hc·D]; inv = 1 / sqrt(fp32(Σv² / n) + eps)   (Σ in fp64)
//   m_r = fp32(Σ_i fn[r, i]·v[i] (fp64) · inv)                         r < (2+hc)·hc
//   pre, post = sigmoids of m·scale + base; comb = Sinkhorn(m·scale2 + base) (20 iterations).
// Two kernels: hc_project (one block per (token, row r): the fp64 dot product and the fp64 sum
// of squares, reduced in a fixed order) writes m_r into the output slot it belongs to (pre,
// post or comb: exactly (2+hc)·hc floats per token), then hc_finish / hc_finish_small (one warp
// per token) applies the reference's fp32 op sequence in place. Products and sums use __fmul_rn /
// __fadd_rn so nvcc cannot fuse them; exp goes through fp64 and is rounded to fp32 (within a
// rounding of glibc expf, which is what the reference calls).
#include "dsv41k/mhc.hpp"

namespace dsv41::kernels {
namespace {

constexpr int kProjThreads = 512;

// Output slot of mix row r of token t: pre [T, hc], post [T, hc], comb [T, hc·hc].
__device__ float* mix_slot(float* pre, float* post, float* comb, int64_t t, int hc, int r) {
  if (r < hc) return pre + t * hc + r;
  if (r < 2 * hc) return post + t * hc + (r - hc);
  return comb + t * hc * hc + (r - 2 * hc);
}

__global__ void __launch_bounds__(kProjThreads)
    hc_project(const float* __restrict__ H, const float* __restrict__ fn, float* pre, float* post,
               float* comb, int hc, int64_t flat, float norm_eps) {
  __shared__ double part_dot[kProjThreads / 32], part_ss[kProjThreads / 32];
  const int mix = (2 + hc) * hc;
  const int64_t t = blockIdx.x / mix;
  const int r = static_cast<int>(blockIdx.x % mix);
  const float* v = H + t * flat;
  const float* f = fn + static_cast<int64_t>(r) * flat;
  double dot = 0.0, ss = 0.0;
  // 8 strided elements' loads in flight, then added in the same i order as one at a time (the
  // plain loop waited on each load: ~10 us per site at hc 4, D 5120 under ncu).
  constexpr int kBatch = 8;
  int64_t i = threadIdx.x;
  for (; i + (kBatch - 1) * kProjThreads < flat; i += kBatch * kProjThreads) {
    float fv[kBatch], xv[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      fv[b] = f[i + b * kProjThreads];
      xv[b] = v[i + b * kProjThreads];
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const double x = xv[b];
      dot += static_cast<double>(fv[b]) * x;  // exact product of two fp32 values, as the reference
      ss += x * x;
    }
  }
  for (; i < flat; i += kProjThreads) {
    const double x = v[i];
    dot += static_cast<double>(f[i]) * x;
    ss += x * x;
  }
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) {
    dot += __shfl_xor_sync(0xFFFFFFFFu, dot, m);
    ss += __shfl_xor_sync(0xFFFFFFFFu, ss, m);
  }
  if ((threadIdx.x & 31) == 0) {
    part_dot[threadIdx.x >> 5] = dot;
    part_ss[threadIdx.x >> 5] = ss;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  double total_dot = 0.0, total_ss = 0.0;
  for (int w = 0; w < kProjThreads / 32; ++w) {
    total_dot += part_dot[w];
    total_ss += part_ss[w];
  }
  // rms_inverse: fp32 mean, fp32 (mean + eps), IEEE sqrt and division.
  const float mean = static_cast<float>(total_ss / static_cast<double>(flat));
  const float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, norm_eps)));
  *mix_slot(pre, post, comb, t, hc, r) = static_cast<float>(total_dot * static_cast<double>(inv));
}

// Correctly rounded fp32 ops that nvcc cannot fuse.
__device__ __forceinline__ float exp_f32(float x) {
  return static_cast<float>(exp(static_cast<double>(x)));
}

// 1 / (1 + exp(-x)) in fp32.
__device__ __forceinline__ float sigmoid_f32(float x) {
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, exp_f32(-x)));
}

// One warp per token: lanes own the hc·hc entries of comb (e = lane, lane + 32) and the 2·hc
// sigmoids; every row / column sum is read back from shared memory and added in the reference's
// index order, so each lane reproduces hc_sinkhorn's values exactly while the hc·hc divisions of
// a normalisation run in parallel (one thread per token spent 20 × 2·hc² dependent IEEE
// divisions: ~35 us per site at hc 4 on the H200).
constexpr int kFinishWarps = 4;
constexpr int kHcMaxEntries = kHcMaxStreams * kHcMaxStreams;  // 64 = 2 per lane

__global__ void __launch_bounds__(32 * kFinishWarps)
    hc_finish(const float* __restrict__ base, const float* __restrict__ scale, float* pre,
              float* post, float* comb, int64_t T, int hc, int iters, float hc_eps) {
  __shared__ float cs[kFinishWarps][kHcMaxEntries];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kFinishWarps + warp;
  if (t >= T) return;  // whole warps leave: only __syncwarp below
  float* l = cs[warp];
  float* p = pre + t * hc;
  float* q = post + t * hc;
  float* c = comb + t * hc * hc;
  const int n = hc * hc;
  if (lane < hc) {
    p[lane] = __fadd_rn(sigmoid_f32(__fadd_rn(__fmul_rn(p[lane], scale[0]), base[lane])), hc_eps);
  } else if (lane < 2 * hc) {
    const int j = lane - hc;
    q[j] = __fmul_rn(2.0f, sigmoid_f32(__fadd_rn(__fmul_rn(q[j], scale[1]), base[hc + j])));
  }
  for (int e = lane; e < n; e += 32) l[e] = __fadd_rn(__fmul_rn(c[e], scale[2]), base[2 * hc + e]);
  __syncwarp();
  // Row softmax + eps: the row max as std::max in order, exp, the row sum in order.
  float v[2];
  for (int i = 0, e = lane; e < n; ++i, e += 32) {
    const int j = e / hc;
    float mx = l[j * hc];
    for (int k = 1; k < hc; ++k) mx = mx < l[j * hc + k] ? l[j * hc + k] : mx;
    v[i] = mx;
  }
  __syncwarp();
  for (int i = 0, e = lane; e < n; ++i, e += 32) l[e] = exp_f32(__fadd_rn(l[e], -v[i]));
  __syncwarp();
  for (int i = 0, e = lane; e < n; ++i, e += 32) {
    const int j = e / hc;
    float sum = 0.0f;
    for (int k = 0; k < hc; ++k) sum = __fadd_rn(sum, l[j * hc + k]);
    v[i] = __fadd_rn(__fdiv_rn(l[e], sum), hc_eps);
  }
  __syncwarp();
  for (int i = 0, e = lane; e < n; ++i, e += 32) l[e] = v[i];
  __syncwarp();
  for (int it = 0; it < iters; ++it) {
    for (int pass = it > 0 ? 0 : 1; pass < 2; ++pass) {  // 0 = rows, 1 = columns
      for (int i = 0, e = lane; e < n; ++i, e += 32) {
        const int j = e / hc, k = e % hc;
        float sum = 0.0f;
        if (pass == 0) {
          for (int m = 0; m < hc; ++m) sum = __fadd_rn(sum, l[j * hc + m]);
        } else {
          for (int m = 0; m < hc; ++m) sum = __fadd_rn(sum, l[m * hc + k]);
        }
        v[i] = __fdiv_rn(l[e], __fadd_rn(sum, hc_eps));
      }
      __syncwarp();
      for (int i = 0, e = lane; e < n; ++i, e += 32) l[e] = v[i];
      __syncwarp();
    }
  }
  for (int e = lane; e < n; e += 32) c[e] = l[e];
}

// hc·hc <= 32 (the released hc = 4): lane e owns comb entry e in a register and reads the row /
// column it sums with shuffles, in the reference's index order, so each lane computes the same
// values as hc_finish. Each normalisation is hc shuffles + adds and one division on the critical
// path: hc_finish's shared-memory round trips, dynamically indexed (local-memory) v[] and integer
// divisions per pass cost ~30 us per site at hc 4 (ncu, H200); this takes a few.
constexpr int kSmallEntries = 32;

__global__ void __launch_bounds__(32 * kFinishWarps)
    hc_finish_small(const float* __restrict__ base, const float* __restrict__ scale, float* pre,
                    float* post, float* comb, int64_t T, int hc, int iters, float hc_eps) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kFinishWarps + warp;
  if (t >= T) return;  // whole warps leave: every shuffle below has all 32 lanes
  float* p = pre + t * hc;
  float* q = post + t * hc;
  float* c = comb + t * hc * hc;
  const int n = hc * hc;
  if (lane < hc) {
    p[lane] = __fadd_rn(sigmoid_f32(__fadd_rn(__fmul_rn(p[lane], scale[0]), base[lane])), hc_eps);
  } else if (lane < 2 * hc) {
    const int j = lane - hc;
    q[j] = __fmul_rn(2.0f, sigmoid_f32(__fadd_rn(__fmul_rn(q[j], scale[1]), base[hc + j])));
  }
  const bool own = lane < n;
  // Lanes >= n compute throw-away values (their sources may be any lane).
  const int row0 = (lane / hc) * hc, col = lane % hc;
  float v = own ? __fadd_rn(__fmul_rn(c[lane], scale[2]), base[2 * hc + lane]) : 0.0f;
  // Row softmax + eps: the row max as std::max in order, exp, the row sum in order.
  float mx = __shfl_sync(0xFFFFFFFFu, v, row0);
  for (int m = 1; m < hc; ++m) {
    const float o = __shfl_sync(0xFFFFFFFFu, v, row0 + m);
    mx = mx < o ? o : mx;
  }
  v = exp_f32(__fadd_rn(v, -mx));
  float sum = 0.0f;
  for (int m = 0; m < hc; ++m) sum = __fadd_rn(sum, __shfl_sync(0xFFFFFFFFu, v, row0 + m));
  v = __fadd_rn(__fdiv_rn(v, sum), hc_eps);
  for (int it = 0; it < iters; ++it) {
    for (int pass = it > 0 ? 0 : 1; pass < 2; ++pass) {  // 0 = rows, 1 = columns
      sum = 0.0f;
      for (int m = 0; m < hc; ++m) {
        const int src = pass == 0 ? row0 + m : m * hc + col;
        sum = __fadd_rn(sum, __shfl_sync(0xFFFFFFFFu, v, src));
      }
      v = __fdiv_rn(v, __fadd_rn(sum, hc_eps));
    }
  }
  if (own) c[lane] = v;
}

}  // namespace

cudaError_t hc_mixes(const float* H, const float* fn, const float* base, const float* scale,
                     float* pre, float* post, float* comb, int64_t T, int hc, int64_t D,
                     int sinkhorn_iters, float hc_eps, float norm_eps, cudaStream_t stream) {
  if (H == nullptr || fn == nullptr || base == nullptr || scale == nullptr || pre == nullptr ||
      post == nullptr || comb == nullptr || T < 0 || hc < 1 || hc > kHcMaxStreams || D < 1 ||
      sinkhorn_iters < 1)
    return cudaErrorInvalidValue;
  const int64_t mix = static_cast<int64_t>(2 + hc) * hc;
  if (T > 0x7FFFFFFF / mix) return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  hc_project<<<static_cast<unsigned>(T * mix), kProjThreads, 0, stream>>>(H, fn, pre, post, comb,
                                                                          hc, hc * D, norm_eps);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  const unsigned blocks = static_cast<unsigned>((T + kFinishWarps - 1) / kFinishWarps);
  if (hc * hc <= kSmallEntries) {
    hc_finish_small<<<blocks, 32 * kFinishWarps, 0, stream>>>(base, scale, pre, post, comb, T, hc,
                                                              sinkhorn_iters, hc_eps);
  } else {
    hc_finish<<<blocks, 32 * kFinishWarps, 0, stream>>>(base, scale, pre, post, comb, T, hc,
                                                        sinkhorn_iters, hc_eps);
  }
  return cudaGetLastError();
}

}  // namespace dsv41::kernels
