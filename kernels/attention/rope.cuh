// One RoPE rotation of a pair (spec model-architecture.md §2.2), the CPU reference
// model/attention/rope.cpp op for op: angle = fp32(pos) · f (fp32), c and s = fp32(cos / sin of
// the fp64 angle), then ec - os and es + oc with every product and sum rounded separately
// (__fmul_rn / __fsub_rn / __fadd_rn: no FMA); inverse = rotation by -angle. Shared by
// rope_rotate and the kernels that rotate on the fly (attention output, kv_norm_rope_quantize).
// cos/sin in fp64 are within an fp64 ulp of glibc's, so c and s round to the same fp32 except
// within ~2^-29 of an fp32 rounding boundary.
#pragma once

#include <cstdint>

namespace dsv41::kernels::detail {

__device__ __forceinline__ void rope_pair(float& even, float& odd, float inv_freq, int64_t pos,
                                          bool inverse) {
  const float fpos = static_cast<float>(pos);
  const double angle = static_cast<double>(__fmul_rn(fpos, inv_freq));
  const float c = static_cast<float>(cos(angle));
  float s = static_cast<float>(sin(angle));
  if (inverse) s = -s;
  const float e = even, o = odd;
  even = __fsub_rn(__fmul_rn(e, c), __fmul_rn(o, s));
  odd = __fadd_rn(__fmul_rn(e, s), __fmul_rn(o, c));
}

// The output rows of attention leave in float4s of 4 channels [c, c + 4) of a head of head_dim
// D (c % 4 == 0, D - rope_dim even): a pair never straddles a float4, and each half of the
// float4 is rotated when it lies in the rope slice [D - rope_dim, D).
__device__ __forceinline__ float4 inverse_rope4(float4 v, int c, int D, int rope_dim,
                                                const float* inv_freq, int64_t pos) {
  const int r0 = D - rope_dim;
  if (c >= r0) rope_pair(v.x, v.y, inv_freq[(c - r0) / 2], pos, true);
  if (c + 2 >= r0) rope_pair(v.z, v.w, inv_freq[(c + 2 - r0) / 2], pos, true);
  return v;
}

}  // namespace dsv41::kernels::detail
