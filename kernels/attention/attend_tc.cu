// Tensor-core attention core (spec §2.2 steps 4-6): every head of a token reads
// the same keys (one K=V head), so a block of (token, 16 heads) is a small GEMM pair per tile of
// 32 keys: S[16 heads, 32 keys] = Q·Kᵀ over head_dim, then O[16, head_dim] += P·K, with the
// online softmax between them. mma.sync m16n8k16 (bf16 in, fp32 accumulate; sm_80+, so sm_90
// and sm_121 alike). Keys decode exactly to bf16 (FP8 e4m3 · 2^k: 4 significant bits; FP4 e2m1
// · e4m3: at most 6); Q and P enter as three bf16 parts hi/mid/lo (24 significant bits, as the
// prefill GEMMs: two parts moved tiny40's end-to-end logits through an FP8 fake-quant flip,
// linear/quant_gemm.cuh), so S and O round like fp32 sums in another order.
//
// Block: 4 warps, warp w owns channels [w·D/4, (w+1)·D/4):
//   S pass   partial S of its channels (Q fragments in registers, K fragments from shared
//            memory), the 4 partials summed in warp order by the softmax threads
//   softmax  thread = (head, 4 keys): scale, tile max / sum over 8 lanes, P in three parts
//   PV pass  O of its channels (P fragments and ldmatrix.trans K fragments from shared memory)
// The 640-key list of the released dims (128 window + 512 selected) is 20 tiles; 4 head groups
// per token decode the same keys (the split-key kernel decodes them 8 times).
//
// Key splits (decode and verify steps, few tokens): block (token, split, head group) walks tiles
// [split · tiles_per_split, ...) and, with more than one split, stores its unnormalised O, m and l
// in the split-key layout of window_sparse_attention.cu, whose combine_kernel adds the sink,
// normalises and applies the inverse RoPE. At one token that is 20 splits × 4 head groups = 80
// blocks of one tile each, where the CUDA-core split-key kernel ran 320 blocks of a 16-key tile
// for 8 heads at ~28 us (ncu, H100: its q copy, value-table lookups and fp32 dot products from
// shared memory were latency chains at 0.6 waves).
#include <cuda_bf16.h>

#include <cstdint>

#include "attention/attend_tc.cuh"
#include "common/launch.cuh"
#include "common/mma_sync.cuh"

namespace dsv41::kernels::detail {
namespace {

constexpr int kHeads = kAttendTcHeads;  // MMA rows
constexpr int kKeys = kAttendTcKeys;    // keys per tile
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kParts = 3;         // hi, mid, lo
constexpr int kSpLd = kKeys + 8;  // fp32 per S-partial row: fragment stores hit 32 banks
constexpr int kPLd = kKeys + 8;   // bf16 per P row (80 B): fragment loads hit 32 banks

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// x = hi + mid + lo exactly up to the last part's rounding (x − hi and x − hi − mid are exact in
// fp32: each drops the 8 leading significant bits).
__device__ __forceinline__ void split3(float x, float (&part)[kParts]) {
  part[0] = __bfloat162float(__float2bfloat16_rn(x));
  const float r = x - part[0];
  part[1] = __bfloat162float(__float2bfloat16_rn(r));
  part[2] = r - part[1];
}

// Raw bytes of 16 channels c .. c + 15 of a packed key row (attend_common.cuh formats): FP8 16
// codes (one 16-byte load where aligned: rows of 528 bytes at the released dims) + the E8M0
// scale of their 32-block; FP4 8 bytes (one 8-byte load where aligned: rows of 288 bytes) + the
// e4m3 scale of their 16-block. A null row reads nothing.
struct Raw16 {
  uint4 w;
  uint8_t scale;
};

__device__ __forceinline__ Raw16 load_raw16(const uint8_t* p, bool fp8, int c, int D) {
  Raw16 r{make_uint4(0, 0, 0, 0), 0};
  if (p == nullptr) return r;
  const uint8_t* q = fp8 ? p + c : p + c / 2;
  const int n = fp8 ? 16 : 8;
  if ((reinterpret_cast<uintptr_t>(q) & (n - 1)) == 0) {
    if (fp8) {
      r.w = __ldg(reinterpret_cast<const uint4*>(q));
    } else {
      const uint2 v = __ldg(reinterpret_cast<const uint2*>(q));
      r.w = make_uint4(v.x, v.y, 0, 0);
    }
  } else {
    uint32_t words[4] = {0, 0, 0, 0};
#pragma unroll
    for (int b = 0; b < 16; ++b)
      if (b < n) words[b / 4] |= static_cast<uint32_t>(q[b]) << (8 * (b % 4));
    r.w = make_uint4(words[0], words[1], words[2], words[3]);
  }
  r.scale = fp8 ? p[D + c / 32] : p[D / 2 + c / 16];
  return r;
}

// The 16 values of load_raw16 as bf16 pairs (exact: same products as the reference's decode).
__device__ __forceinline__ void raw16_to_bf16(const Raw16& r, bool fp8, const float* e4m3,
                                              const float* e2m1, uint32_t (&out)[8]) {
  const uint32_t words[4] = {r.w.x, r.w.y, r.w.z, r.w.w};
  if (fp8) {
    const float s = ldexpf(1.0f, static_cast<int>(r.scale) - 127);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t b = words[i / 2] >> (16 * (i % 2));
      out[i] = pack_bf16x2(__fmul_rn(e4m3[b & 0xFF], s), __fmul_rn(e4m3[(b >> 8) & 0xFF], s));
    }
  } else {
    const float s = e4m3[r.scale];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t b = (words[i / 4] >> (8 * (i % 4))) & 0xFF;
      out[i] = pack_bf16x2(__fmul_rn(e2m1[b & 0xF], s), __fmul_rn(e2m1[b >> 4], s));
    }
  }
}

constexpr size_t smem_bytes(int D) {
  return static_cast<size_t>(kKeys) * (D + 8) * 2 + kWarps * kHeads * kSpLd * 4 +
         kParts * kHeads * kPLd * 2 + (256 + 16 + 16 + 16) * 4;
}

// KS = head_dim / 64: a warp owns 16·KS channels = KS k-steps of the S pass and 2·KS n-tiles of
// the PV pass. Registers at KS = 8: Q fragments 96, O accumulators 64.
template <int KS>
__global__ void __launch_bounds__(kThreads, 2) attend_tc_kernel(AttendArgs a) {
  pdl_begin();
  constexpr int D = 64 * KS, DW = 16 * KS, LdK = D + 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __nv_bfloat16* kt = reinterpret_cast<__nv_bfloat16*>(smem_raw);  // [kKeys, LdK] keys
  float* sp = reinterpret_cast<float*>(kt + kKeys * LdK);          // [kWarps, kHeads, kSpLd]
  __nv_bfloat16* pp = reinterpret_cast<__nv_bfloat16*>(sp + kWarps * kHeads * kSpLd);
  float* e4m3 = reinterpret_cast<float*>(pp + kParts * kHeads * kPLd);  // [256]
  float* e2m1 = e4m3 + 256;                                             // [16]
  float* alpha = e2m1 + 16;  // [kHeads] rescale of the tile
  float* fac = alpha + 16;   // [kHeads] final normalisation
  // Key slots of the current tile and the next (written while the current one is multiplied).
  __shared__ const uint8_t* src[2][kKeys];
  __shared__ int fp8_key[2][kKeys];
  __shared__ int bad;

  const int64_t t = blockIdx.x / a.splits;
  const int split = static_cast<int>(blockIdx.x % a.splits);
  const int tb = split * a.tiles_per_split, te = min(a.n_tiles, tb + a.tiles_per_split);
  const int h0 = blockIdx.y * kHeads;
  const int heads = min(kHeads, a.H - h0);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  fill_value_tables(e4m3, e2m1);
  if (tid == 0) bad = 0;
  __syncthreads();  // bad = 0 before any slot may set it
  if (tid < kKeys) {
    int fp8 = 0;
    src[0][tid] = key_slot(a, t, tb * kKeys + tid, &fp8, &bad);
    fp8_key[0][tid] = fp8;
  }

  // Q as A fragments (rows = heads g / g + 8, k = channels), three parts; rows past `heads` 0.
  uint32_t qf[KS][kParts][4];
#pragma unroll
  for (int j = 0; j < KS; ++j) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int row = g + 8 * (r & 1), col = warp * DW + 16 * j + 8 * (r >> 1) + 2 * tq;
      float2 v = make_float2(0.f, 0.f);
      if (row < heads) v = *reinterpret_cast<const float2*>(a.q + (t * a.H + h0 + row) * D + col);
      float px[kParts], py[kParts];
      split3(v.x, px);
      split3(v.y, py);
#pragma unroll
      for (int p = 0; p < kParts; ++p) qf[j][p][r] = pack_bf16x2(px[p], py[p]);
    }
  }
  float acc[2 * KS][4];
#pragma unroll
  for (int n = 0; n < 2 * KS; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  // Softmax role: head sh, keys sk .. sk + 3; (m_run, l_run) replicated over the head's 8 threads.
  const int sh = tid >> 3, sk = (tid & 7) * 4;
  float m_run = -INFINITY, l_run = 0.0f;

  // Decode items: (key, 16 channels); kItems per thread, loaded in batches of 4 so that a
  // batch's global loads are in flight together (one dependent round per 4 items).
  constexpr int kItems = kKeys * (D / 16) / kThreads, kBatch = kItems < 4 ? kItems : 4;
  for (int tile = tb; tile < te; ++tile) {
    const int buf = (tile - tb) & 1;
    __syncthreads();  // slots of this tile written; the previous tile's keys and P consumed
#pragma unroll
    for (int i0 = 0; i0 < kItems; i0 += kBatch) {
      Raw16 raw[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int i = tid + (i0 + b) * kThreads, e = i / (D / 16), c = 16 * (i % (D / 16));
        raw[b] = load_raw16(src[buf][e], fp8_key[buf][e] != 0, c, D);
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int i = tid + (i0 + b) * kThreads, e = i / (D / 16), c = 16 * (i % (D / 16));
        uint32_t v[8];
        raw16_to_bf16(raw[b], fp8_key[buf][e] != 0, e4m3, e2m1, v);
        uint4* dst = reinterpret_cast<uint4*>(kt + e * LdK + c);
        dst[0] = make_uint4(v[0], v[1], v[2], v[3]);
        dst[1] = make_uint4(v[4], v[5], v[6], v[7]);
      }
    }
    __syncthreads();
    if (tid < kKeys && tile + 1 < te) {  // the next tile's slots (index load in flight)
      int fp8 = 0;
      src[buf ^ 1][tid] = key_slot(a, t, (tile + 1) * kKeys + tid, &fp8, &bad);
      fp8_key[buf ^ 1][tid] = fp8;
    }
    // S pass: this warp's channels, n-tile nt = keys 8·nt .. 8·nt + 7.
    {
      float s[4][4];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
        const __nv_bfloat16* krow = kt + (8 * nt + g) * LdK + warp * DW + 2 * tq;
#pragma unroll
        for (int j = 0; j < KS; ++j) {
          const uint32_t b0 = lds32(krow + 16 * j), b1 = lds32(krow + 16 * j + 8);
#pragma unroll
          for (int p = 0; p < kParts; ++p) mma_bf16_16816(s[nt], qf[j][p], b0, b1);
        }
      }
      float* spw = sp + warp * kHeads * kSpLd;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        *reinterpret_cast<float2*>(spw + g * kSpLd + 8 * nt + 2 * tq) =
            make_float2(s[nt][0], s[nt][1]);
        *reinterpret_cast<float2*>(spw + (g + 8) * kSpLd + 8 * nt + 2 * tq) =
            make_float2(s[nt][2], s[nt][3]);
      }
    }
    __syncthreads();
    // Softmax of head sh over the tile's keys sk .. sk + 3.
    {
      float4 part[kWarps];
#pragma unroll
      for (int w = 0; w < kWarps; ++w)
        part[w] = *reinterpret_cast<const float4*>(sp + (w * kHeads + sh) * kSpLd + sk);
      const float dot[4] = {(part[0].x + part[1].x) + (part[2].x + part[3].x),
                            (part[0].y + part[1].y) + (part[2].y + part[3].y),
                            (part[0].z + part[1].z) + (part[2].z + part[3].z),
                            (part[0].w + part[1].w) + (part[2].w + part[3].w)};
      float sc[4];
      float mt = -INFINITY;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        sc[i] = src[buf][sk + i] != nullptr ? __fmul_rn(dot[i], a.scale) : -INFINITY;
        mt = fmaxf(mt, sc[i]);
      }
#pragma unroll
      for (int off = 1; off < 8; off *= 2) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, off));
      const float m_new = fmaxf(m_run, mt);
      float p[4] = {0.f, 0.f, 0.f, 0.f}, al = 1.0f;
      if (m_new != -INFINITY) {
#pragma unroll
        for (int i = 0; i < 4; ++i) p[i] = sc[i] != -INFINITY ? expf(sc[i] - m_new) : 0.0f;
        al = m_run == -INFINITY ? 0.0f : expf(m_run - m_new);
      }
      float sum = (p[0] + p[1]) + (p[2] + p[3]);
#pragma unroll
      for (int off = 1; off < 8; off *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      l_run = l_run * al + sum;
      m_run = m_new;
#pragma unroll
      for (int i = 0; i < 4; i += 2) {
        float pa[kParts], pb[kParts];
        split3(p[i], pa);
        split3(p[i + 1], pb);
#pragma unroll
        for (int q = 0; q < kParts; ++q)
          *reinterpret_cast<uint32_t*>(pp + (q * kHeads + sh) * kPLd + sk + i) =
              pack_bf16x2(pa[q], pb[q]);
      }
      if ((tid & 7) == 0) alpha[sh] = al;
    }
    __syncthreads();
    // PV pass: acc = acc · alpha + P · K over this warp's channels.
    {
      const float al_lo = alpha[g], al_hi = alpha[g + 8];
#pragma unroll
      for (int n = 0; n < 2 * KS; ++n) {
        acc[n][0] *= al_lo;
        acc[n][1] *= al_lo;
        acc[n][2] *= al_hi;
        acc[n][3] *= al_hi;
      }
      const int mi = lane >> 3, r = lane & 7;
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        uint32_t pa[kParts][4];
#pragma unroll
        for (int q = 0; q < kParts; ++q) {
          const __nv_bfloat16* pr = pp + q * kHeads * kPLd + 16 * kk + 2 * tq;
          pa[q][0] = lds32(pr + g * kPLd);
          pa[q][1] = lds32(pr + (g + 8) * kPLd);
          pa[q][2] = lds32(pr + g * kPLd + 8);
          pa[q][3] = lds32(pr + (g + 8) * kPLd + 8);
        }
        // ldmatrix.trans: matrix mi = keys 16·kk + 8·(mi & 1) .., channels + 8·(mi >> 1) ..;
        // registers 0, 1 are the B fragment of one n-tile, 2, 3 of the next.
        const __nv_bfloat16* vb =
            kt + (16 * kk + 8 * (mi & 1) + r) * LdK + warp * DW + 8 * (mi >> 1);
#pragma unroll
        for (int np = 0; np < KS; ++np) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, vb + 16 * np);
#pragma unroll
          for (int q = 0; q < kParts; ++q) {
            mma_bf16_16816(acc[2 * np], pa[q], b[0], b[1]);
            mma_bf16_16816(acc[2 * np + 1], pa[q], b[2], b[3]);
          }
        }
      }
    }
  }
  __syncthreads();
  if (a.splits > 1) {  // this split's O, m, l for combine_kernel (rows of head_dim + 4 floats)
    const int64_t stride = D + 4;
    // Row (t, h, split) of `part`: t · H · splits + split = blockIdx.x + (H - 1) · t · splits.
    const int64_t row0 = blockIdx.x + static_cast<int64_t>(a.H - 1) * (blockIdx.x - split);
    if ((tid & 7) == 0 && sh < heads) {
      float* dst = a.part + (row0 + static_cast<int64_t>(h0 + sh) * a.splits) * stride;
      dst[D] = m_run;
      dst[D + 1] = bad != 0 ? __int_as_float(0x7fc00000) : l_run;
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = g + 8 * half;
      if (row >= heads) continue;
      float* prow =
          a.part + (row0 + static_cast<int64_t>(h0 + row) * a.splits) * stride + warp * DW + 2 * tq;
#pragma unroll
      for (int n = 0; n < 2 * KS; ++n)
        *reinterpret_cast<float2*>(prow + 8 * n) =
            make_float2(acc[n][2 * half], acc[n][2 * half + 1]);
    }
    return;
  }
  if ((tid & 7) == 0 && sh < heads)
    fac[sh] = finish_factor(a.sink[h0 + sh], m_run, l_run, bad != 0);
  __syncthreads();
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = g + 8 * half;
    if (row >= heads) continue;
    const float f = fac[row];
    float* orow = a.o + (t * a.H + h0 + row) * D + warp * DW + 2 * tq;
#pragma unroll
    for (int n = 0; n < 2 * KS; ++n)
      *reinterpret_cast<float2*>(orow + 8 * n) =
          make_float2(acc[n][2 * half] * f, acc[n][2 * half + 1] * f);
  }
}

template <int KS>
cudaError_t launch(const AttendArgs& a, cudaStream_t stream) {
  // The opt-in is needed once dynamic + static (784 B of slots) pass 48 KB: at head_dim 512.
  const size_t smem = smem_bytes(64 * KS);
  if (smem + 1024 > 48 * 1024 &&
      cudaFuncSetAttribute(attend_tc_kernel<KS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(smem)) != cudaSuccess) {
    (void)cudaGetLastError();
    return cudaErrorInvalidValue;
  }
  const dim3 grid(static_cast<unsigned>(a.T * a.splits),
                  static_cast<unsigned>((a.H + kHeads - 1) / kHeads));
  return launch_kernel(attend_tc_kernel<KS>, grid, kThreads, smem, stream, a);
}

}  // namespace

bool attend_tc_supported(int head_dim) {
  return head_dim == 64 || head_dim == 128 || head_dim == 256 || head_dim == 512;
}

cudaError_t attend_tc(const AttendArgs& a, cudaStream_t stream) {
  switch (a.D) {
    case 64:
      return launch<1>(a, stream);
    case 128:
      return launch<2>(a, stream);
    case 256:
      return launch<4>(a, stream);
    case 512:
      return launch<8>(a, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace dsv41::kernels::detail
