// One block of the EXL3 fused decode GEMV (spec exl3-format.md §1.1, §3.2–3.5), shared by
// exl3_gemv.cu (a host list of matrices) and moe/moe_grouped_exl3_gemv.cu (device descriptors of
// the routed experts): y = had128(had128(x ⊙ suh) · Ŵ) ⊙ svh for 128 output columns, Ŵ decoded
// from the trellis on the fly and never written. CPU reference: exl3::matmul.
//
// Work split. A block (matrix, 128 output columns = 8 n-tiles, k split s) has 8 warps; the k16
// steps of the column group are spread evenly over the splits' warps. Per k16 step a warp
// streams the 8 tiles of the step (256K contiguous bytes) into shared memory with cp.async,
// stages(K, NB) - 1 steps ahead, and decodes each lane's 8 states straight into an m16n8k16 A
// fragment (the weights as A: m = output column, k = input; §1.4 makes that a register renaming
// of the B-fragment order exllamav3 uses). B = the Hadamard-domain activations xh (k16 × 8
// rows), split into f16 hi + lo parts, so the products keep ~22 bits of xh; fp32 accumulation in
// the tensor cores. xh is computed by the warp itself for each 128-chunk it touches (x ⊙ suh,
// the butterflies of exl3::hadamard128_blocks in the same order, so xh is bit-equal to the
// CPU's), scaled per (row, chunk) by a power of two that puts max|xh| in [2^13, 2^14) (f16
// range); the accumulators are rescaled by the exact power-of-two ratio when the chunk changes.
// Reduction: warps -> shared memory in warp order; splits -> workspace partials, and the last
// block of a column group to arrive (atomic counter, reset to 0 after) sums them in split order:
// deterministic. That block applies the output butterflies, 1/sqrt(128) and svh, and stores y.
//
// Narrow activations (the EXL3 padding of spec §2.1: a bank matrix is (pad128(in), pad128(out))
// of the model's projection): x rows hold x_cols <= k values (the rest read as 0) and y rows
// x_cols / y_cols apart; only the first y_cols outputs are stored.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "exl3/exl3_decode.cuh"

namespace dsv41::kernels::exl3g {

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr float kInvSqrt128 = 0.08838834764831845f;  // as exl3/hadamard.cpp

// The operands of one block: a matrix, its activation rows and where its outputs go.
struct MatrixIo {
  const uint8_t* trellis;  // int16 [k/16][n/16][16K], 16-byte aligned
  const uint16_t* suh;     // fp16 [k]
  const uint16_t* svh;     // fp16 [n]
  const float* x;          // row r at x + r·x_cols, 16-byte aligned rows (x_cols % 4 == 0)
  int64_t x_cols;          // <= k; inputs at x_cols .. k-1 are 0
  float* y;                // row r at y + r·y_cols, 16-byte aligned rows (y_cols % 4 == 0)
  int64_t y_cols;          // <= n; outputs at y_cols .. n-1 are not stored
  int rows;                // 1 .. 8·NB
};

// k16 steps of trellis in flight per warp. 4, except K = 5 with 16 rows: 3, so that the block
// fits the 101,376 B of shared memory a GB10 (sm_121) block may opt into (4 stages: 107,008 B).
template <int K, int NB>
constexpr int kStages = (K >= 5 && NB == 2) ? 3 : 4;

// Per-warp shared memory: the trellis stages, the B fragments of one 128-chunk, row scales.
template <int K, int NB>
struct WarpSmem {
  static constexpr int kRows = 8 * NB;
  static constexpr int kStepWords = 64 * K;  // 8 tiles x 8K words
  static constexpr int kTrellisBytes = kStages<K, NB> * kStepWords * 4;
  static constexpr int kXsBytes = 8 * kRows * 4 * 16;  // [step][row][c] uint4 {hi0,hi1,lo0,lo1}
  static constexpr int kBytes = kTrellisBytes + kXsBytes + 16 * 4;
  static constexpr int kRedBytes = kWarps * kRows * 128 * 4;  // reduction, aliases the above
  static constexpr int kBlockBytes =
      kWarps * kBytes > kRedBytes + 16 ? kWarps* kBytes : kRedBytes + 16;
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float pow2f(int e) { return __int_as_float((127 + e) << 23); }

// The 7 butterfly stages of one 128-vector held as 4 consecutive values per lane (element
// 4·lane + i), in exl3::hadamard128_blocks' order: stages 1, 2 in registers, 4 .. 64 across
// lanes (lower index a, upper c: a + c and a - c, exactly as the CPU loop).
__device__ __forceinline__ void butterflies128(float (&v)[4], int lane) {
  float a = v[0], b = v[1];
  v[0] = a + b;
  v[1] = a - b;
  a = v[2], b = v[3];
  v[2] = a + b;
  v[3] = a - b;
  a = v[0], b = v[2];
  v[0] = a + b;
  v[2] = a - b;
  a = v[1], b = v[3];
  v[1] = a + b;
  v[3] = a - b;
#pragma unroll
  for (int m = 1; m < 32; m <<= 1) {
    const bool upper = (lane & m) != 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float p = __shfl_xor_sync(0xFFFFFFFFu, v[i], m);
      v[i] = upper ? p - v[i] : v[i] + p;
    }
  }
}

__device__ __forceinline__ uint32_t pack_half2(float a, float b) {
  const __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ void load_f16x4(const uint16_t* p, float (&v)[4]) {
  const uint2 raw = __ldg(reinterpret_cast<const uint2*>(p));
  const float2 s01 = __half22float2(*reinterpret_cast<const __half2*>(&raw.x));
  const float2 s23 = __half22float2(*reinterpret_cast<const __half2*>(&raw.y));
  v[0] = s01.x, v[1] = s01.y, v[2] = s23.x, v[3] = s23.y;
}

// xh of 128-chunk `ch` for row slot r (< kRows of the B-fragment layout): B fragments (hi, lo)
// into xs, the row's scale exponent into ex[r] (lane 0). Rows >= m.rows get zeros (their
// accumulator columns are never stored). su: the lane's 4 suh values of the chunk; in_x: whether
// the lane's 4 columns lie inside x_cols. All 32 lanes must call it (shuffles).
template <int kRows>
__device__ __forceinline__ void transform_row(const MatrixIo& m, int ch, int lane, int r,
                                              uint32_t* xs, int* ex, const float (&su)[4],
                                              bool in_x) {
  const int step = lane >> 2, p0 = 4 * (lane & 3);  // this lane's 4 values: step, positions p0..
  const int c = (p0 & 7) >> 1, slot = p0 >> 3;      // pairs (p0, p0+1) -> c, (p0+2, p0+3) -> c+1
  float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int e = 0;
  if (r < m.rows) {
    if (in_x) {
      const int64_t col = int64_t{ch} * 128 + 4 * lane;
      const float4 xv = __ldg(reinterpret_cast<const float4*>(m.x + r * m.x_cols + col));
      v[0] = xv.x * su[0], v[1] = xv.y * su[1], v[2] = xv.z * su[2], v[3] = xv.w * su[3];
    }
    butterflies128(v, lane);
    float mx = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[i] *= kInvSqrt128;
      mx = fmaxf(mx, fabsf(v[i]));
    }
#pragma unroll
    for (int s = 16; s >= 1; s >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, s));
    if (mx > 0.0f && mx <= 3.0e38f) {
      const int be = ((__float_as_int(mx) >> 23) & 0xFF) - 127;  // floor(log2) for normals
      e = min(60, max(-60, 13 - max(be, -126)));
    }
    const float sc = pow2f(e);
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] *= sc;
  }
  float hi[4], lo[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    hi[i] = __half2float(__float2half_rn(v[i]));
    lo[i] = v[i] - hi[i];  // exact
  }
  uint32_t* d = xs + ((step * kRows + r) * 4 + c) * 4 + slot;
  d[0] = pack_half2(hi[0], hi[1]);
  d[2] = pack_half2(lo[0], lo[1]);
  d[4] = pack_half2(hi[2], hi[3]);  // pair (p0+2, p0+3): c + 1, same slot
  d[6] = pack_half2(lo[2], lo[3]);
  if (lane == 0) ex[r] = e;
}

// The lane's 4 suh values of chunk ch and whether its 4 x columns are inside x_cols (x_cols % 4
// == 0: all or none).
__device__ __forceinline__ bool chunk_inputs(const MatrixIo& m, int ch, int lane, float (&su)[4]) {
  load_f16x4(m.suh + ch * 128 + 4 * lane, su);
  return int64_t{ch} * 128 + 4 * lane < m.x_cols;
}

// xh of 128-chunk `ch` for every row slot of one warp's B-fragment layout.
template <int NB>
__device__ void input_transform(const MatrixIo& m, int ch, int lane, uint32_t* xs, int* ex) {
  constexpr int kRows = 8 * NB;
  float su[4];
  const bool in_x = chunk_inputs(m, ch, lane, su);
  for (int r = 0; r < kRows; ++r) transform_row<kRows>(m, ch, lane, r, xs, ex, su, in_x);
}

// Output transform of one row's 128-column block: the lane's 4 Hadamard-domain sums `in`, the
// butterflies, 1/sqrt(128) and svh (sv), stored at y_row[col..col+3] when col < y_cols (y_cols %
// 4 == 0). All 32 lanes must call it (shuffles).
__device__ __forceinline__ void store_output(float4 in, const float (&sv)[4], float* y_row,
                                             int64_t col, int64_t y_cols, int lane) {
  float v[4] = {in.x, in.y, in.z, in.w};
  butterflies128(v, lane);
  float4 o;
  o.x = v[0] * kInvSqrt128 * sv[0];
  o.y = v[1] * kInvSqrt128 * sv[1];
  o.z = v[2] * kInvSqrt128 * sv[2];
  o.w = v[3] * kInvSqrt128 * sv[3];
  if (col < y_cols) reinterpret_cast<float4*>(y_row + col)[0] = o;
}

// f(KTag<K>{}) for the runtime K in 2..5 (the grouped kernels' per-record bodies; other values
// run the K = 5 body and are excluded by the callers).
template <int K>
struct KTag {
  static constexpr int value = K;
};
template <typename F>
__device__ __forceinline__ void with_k(int K, F&& f) {
  switch (K) {
    case 2:
      f(KTag<2>{});
      break;
    case 3:
      f(KTag<3>{});
      break;
    case 4:
      f(KTag<4>{});
      break;
    default:
      f(KTag<5>{});
      break;
  }
}

// The block's work: column group cg (128 outputs) of `m`, k split `split` of `splits`. With
// splits > 1, `counters[group]` and the partials of `group` (splits × 16 × 128 fp32) are the
// block's slice of the workspace; last_flag is a __shared__ int of the kernel. smem holds
// WarpSmem<K, NB>::kBlockBytes. Every thread of the block must call it.
template <int K, int CB, int NB>
__device__ __forceinline__ void gemv_block(const MatrixIo& m, int64_t k, int64_t n, int cg,
                                           int split, int splits, int64_t group, uint32_t* counters,
                                           float* partials, uint8_t* smem, int* last_flag) {
  using S = WarpSmem<K, NB>;
  constexpr int kRows = S::kRows, kSt = kStages<K, NB>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int steps_k = static_cast<int>(k / 16), tiles_n = static_cast<int>(n / 16);
  const int gw = split * kWarps + warp, total_w = splits * kWarps;
  const int s_begin = static_cast<int>(int64_t{gw} * steps_k / total_w);
  const int s_end = static_cast<int>(int64_t{gw + 1} * steps_k / total_w);
  const int nq = s_end - s_begin;

  uint8_t* wsm = smem + warp * S::kBytes;
  uint32_t* tb = reinterpret_cast<uint32_t*>(wsm);
  uint32_t* xs = reinterpret_cast<uint32_t*>(wsm + S::kTrellisBytes);
  int* ex = reinterpret_cast<int*>(wsm + S::kTrellisBytes + S::kXsBytes);

  // Step q of this warp: tiles (s_begin + q, 8 cg .. 8 cg + 7), 256K contiguous bytes.
  const uint8_t* tbase = m.trellis + (static_cast<int64_t>(s_begin) * tiles_n + 8 * cg) * 32 * K;
  const int64_t step_stride = static_cast<int64_t>(tiles_n) * 32 * K;
  auto issue = [&](int q) {
    if (q < nq) {
      const uint8_t* src = tbase + q * step_stride;
      const uint32_t dst = smem_addr(tb + (q % kSt) * S::kStepWords);
#pragma unroll
      for (int i = lane; i < 16 * K; i += 32) cp_async16(dst + 16 * i, src + 16 * i);
    }
    cp_async_commit();
  };
#pragma unroll
  for (int q = 0; q < kSt - 1; ++q) issue(q);

  const exl3d::LaneWindow lw = exl3d::lane_window<K>(lane);
  const int g = lane >> 2, c = lane & 3;
  float acc[8][NB][4];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int b = 0; b < NB; ++b)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][b][j] = 0.0f;
  int e_cur[NB][2];  // scale exponents of this lane's accumulator rows (8b + 2c, 8b + 2c + 1)
#pragma unroll
  for (int b = 0; b < NB; ++b) e_cur[b][0] = e_cur[b][1] = 0;

  for (int q = 0; q < nq; ++q) {
    const int step = s_begin + q;
    if (q == 0 || (step & 7) == 0) {
      __syncwarp();
      input_transform<NB>(m, step >> 3, lane, xs, ex);
      __syncwarp();
#pragma unroll
      for (int b = 0; b < NB; ++b)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int e = ex[8 * b + 2 * c + h];
          const float f = pow2f(e - e_cur[b][h]);
          e_cur[b][h] = e;
#pragma unroll
          for (int i = 0; i < 8; ++i) {
            acc[i][b][h] *= f;
            acc[i][b][2 + h] *= f;
          }
        }
    }
    issue(q + kSt - 1);
    cp_async_wait<kSt - 1>();
    __syncwarp();
    uint4 bf[NB];
#pragma unroll
    for (int b = 0; b < NB; ++b)
      bf[b] = reinterpret_cast<const uint4*>(xs)[((step & 7) * kRows + 8 * b + g) * 4 + c];
    const uint32_t* words = tb + (q % kSt) * S::kStepWords;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t* tw = words + i * 8 * K;
      uint32_t p[4];
      exl3d::decode_lane<K, CB>(tw[lw.i0], tw[lw.i1], exl3d::needs_third_word<K>() ? tw[lw.i2] : 0u,
                                lw.off, p);
      const uint32_t a[4] = {p[0], p[2], p[1], p[3]};  // (j0,j1) (j4,j5) (j2,j3) (j6,j7)
#pragma unroll
      for (int b = 0; b < NB; ++b) {
        mma16816(acc[i][b], a, bf[b].x, bf[b].y);
        mma16816(acc[i][b], a, bf[b].z, bf[b].w);
      }
    }
    __syncwarp();
  }
  cp_async_wait<0>();

  // Warp partials, unscaled, into red[warp][row][col]; then the block sum in warp order.
  __syncthreads();
  float* red = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int b = 0; b < NB; ++b)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float f = pow2f(-e_cur[b][h]);
      float* rr = red + (warp * kRows + 8 * b + 2 * c + h) * 128;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        rr[16 * i + g] = acc[i][b][h] * f;
        rr[16 * i + g + 8] = acc[i][b][2 + h] * f;
      }
    }
  __syncthreads();
  const int rows = min(m.rows, kRows), elems = rows * 128;
  for (int idx = threadIdx.x; idx < elems; idx += kThreads) {
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += red[w * kRows * 128 + idx];
    red[idx] = s;
  }
  if (splits > 1) {
    float* part = partials + (group * splits + split) * (16 * 128);
    for (int idx = threadIdx.x; idx < elems; idx += kThreads) __stcg(part + idx, red[idx]);
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
      *last_flag = atomicAdd(counters + group, 1u) == static_cast<uint32_t>(splits - 1);
    __syncthreads();
    if (!*last_flag) return;
    __threadfence();
    const float* p0 = partials + group * splits * (16 * 128);
    for (int idx = threadIdx.x; idx < elems; idx += kThreads) {
      float s = 0.0f;
      for (int sp = 0; sp < splits; ++sp) s += __ldcg(p0 + sp * (16 * 128) + idx);
      red[idx] = s;
    }
    if (threadIdx.x == 0) counters[group] = 0;  // ready for the next call
  }
  __syncthreads();

  // Output transform: one warp per row; y = had128(yh) ⊙ svh.
  float sv[4];
  load_f16x4(m.svh + cg * 128 + 4 * lane, sv);
  const int64_t col = int64_t{cg} * 128 + 4 * lane;
  for (int r = warp; r < rows; r += kWarps)
    store_output(reinterpret_cast<const float4*>(red + r * 128)[lane], sv, m.y + r * m.y_cols, col,
                 m.y_cols, lane);
}

}  // namespace dsv41::kernels::exl3g
