// EXL3 fused decode GEMV for 1..16 activation rows over a host list of matrices (spec
// exl3-format.md §1.1, §3.2–3.5): y = had128(had128(x ⊙ suh) · Ŵ) ⊙ svh. The block's work (trellis
// streaming, decode into MMA fragments, split-k reduction, output transform) is
// exl3g::gemv_block (exl3_gemv_block.cuh, whose header describes it); this file picks the k
// split and launches one block per (matrix, 128 columns, split). CPU reference: exl3::matmul.
#include <algorithm>

#include "common/launch.cuh"
#include "dsv41k/launchers.hpp"
#include "exl3/exl3_gemv_block.cuh"

namespace dsv41::kernels {
namespace {

using exl3g::kThreads;
using exl3g::kWarps;
using exl3g::WarpSmem;

struct Batch {
  Exl3GemvMatrix m[kExl3GemvMaxMatrices];
};

// 2 blocks per SM (128 registers); the 3INST/MCG decode at K = 5 with 16 rows needs a few more
// (ptxas spills 4 bytes at 128), so that instance runs 1 block per SM.
template <int K, int CB>
constexpr int kMinBlocks = (K == 5 && CB != exl3d::kCbMul1) ? 1 : 2;

template <int K, int CB, int NB>
__global__ void __launch_bounds__(kThreads, NB == 2 ? kMinBlocks<K, CB> : 2)
    exl3_gemv_kernel(const __grid_constant__ Batch batch, int64_t k, int64_t n, int splits,
                     uint32_t* __restrict__ counters, float* __restrict__ partials) {
  detail::pdl_begin();
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int last_flag;
  const Exl3GemvMatrix& m = batch.m[blockIdx.y];
  if (m.rows <= 0) return;
  const exl3g::MatrixIo io{m.trellis, m.suh, m.svh, m.x, k, m.y, n, m.rows};
  const int cg = blockIdx.x / splits, split = blockIdx.x % splits;
  const int64_t group = static_cast<int64_t>(blockIdx.y) * (n / 128) + cg;
  exl3g::gemv_block<K, CB, NB>(io, k, n, cg, split, splits, group, counters, partials, smem,
                               &last_flag);
}

struct Plan {
  int splits = 1;
  int nb = 1;
};

cudaError_t make_plan(int matrices, int max_rows, int64_t k, int64_t n, int k_splits, Plan* p) {
  int dev = 0, sms = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
      e != cudaSuccess)
    return e;
  const int64_t groups = int64_t{matrices} * (n / 128);
  const int64_t cap = std::max<int64_t>(1, (k / 16) / 32);  // each warp keeps >= 4 k16 steps
  int64_t s = k_splits > 0 ? k_splits : (2 * int64_t{sms} + groups / 2) / groups;  // ~2 blocks/SM
  s = std::min<int64_t>(std::max<int64_t>(s, 1), k_splits > 0 ? (k / 16) / kWarps : cap);
  p->splits = static_cast<int>(std::max<int64_t>(s, 1));
  p->nb = max_rows > 8 ? 2 : 1;
  return cudaSuccess;
}

template <int K, int CB, int NB>
cudaError_t launch(const Batch& b, int matrices, int64_t k, int64_t n, const Plan& p,
                   uint32_t* counters, float* partials, cudaStream_t stream) {
  using S = WarpSmem<K, NB>;
  auto* kern = &exl3_gemv_kernel<K, CB, NB>;
  if (cudaError_t e =
          cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kBlockBytes);
      e != cudaSuccess)
    return e;
  const dim3 grid(static_cast<unsigned>((n / 128) * p.splits), static_cast<unsigned>(matrices));
  return detail::launch_kernel(kern, grid, kThreads, S::kBlockBytes, stream, b, k, n, p.splits,
                               counters, partials);
}

template <int K, int CB>
cudaError_t launch_nb(const Batch& b, int matrices, int64_t k, int64_t n, const Plan& p,
                      uint32_t* c, float* part, cudaStream_t s) {
  return p.nb == 2 ? launch<K, CB, 2>(b, matrices, k, n, p, c, part, s)
                   : launch<K, CB, 1>(b, matrices, k, n, p, c, part, s);
}

template <int K>
cudaError_t launch_cb(Exl3Codebook cb, const Batch& b, int matrices, int64_t k, int64_t n,
                      const Plan& p, uint32_t* c, float* part, cudaStream_t s) {
  switch (cb) {
    case Exl3Codebook::kMul1:
      return launch_nb<K, exl3d::kCbMul1>(b, matrices, k, n, p, c, part, s);
    case Exl3Codebook::kMcg:
      return launch_nb<K, exl3d::kCbMcg>(b, matrices, k, n, p, c, part, s);
    default:
      return launch_nb<K, exl3d::kCb3Inst>(b, matrices, k, n, p, c, part, s);
  }
}

size_t align256(size_t v) { return (v + 255) / 256 * 256; }

size_t bytes_for(int matrices, int64_t n, const Plan& p) {
  const size_t groups = static_cast<size_t>(matrices) * static_cast<size_t>(n / 128);
  return align256(groups * 4) + (p.splits > 1 ? groups * p.splits * 16 * 128 * 4 : 0);
}

bool shape_ok(int matrices, int64_t k, int64_t n) {
  return matrices >= 1 && matrices <= kExl3GemvMaxMatrices && k >= 128 && n >= 128 &&
         k % 128 == 0 && n % 128 == 0 && k <= (int64_t{1} << 24) && n <= (int64_t{1} << 24);
}

}  // namespace

size_t exl3_gemv_workspace_bytes(int matrices, int64_t k, int64_t n, int k_splits) {
  Plan p;
  if (!shape_ok(matrices, k, n) || make_plan(matrices, 16, k, n, k_splits, &p) != cudaSuccess)
    return 0;
  return bytes_for(matrices, n, p);
}

cudaError_t exl3_gemv(const Exl3GemvMatrix* matrices, int count, int64_t k, int64_t n, int K,
                      Exl3Codebook cb, int k_splits, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream) {
  if (!matrices || !shape_ok(count, k, n) || k_splits < 0 || static_cast<int>(cb) < 0 ||
      static_cast<int>(cb) > 2 || (K != 2 && K != 3 && K != 5))
    return cudaErrorInvalidValue;
  const auto aligned16 = [](const void* q) { return (reinterpret_cast<uintptr_t>(q) & 15) == 0; };
  const auto aligned8 = [](const void* q) { return (reinterpret_cast<uintptr_t>(q) & 7) == 0; };
  Batch b{};
  int max_rows = 0;
  for (int i = 0; i < count; ++i) {
    const Exl3GemvMatrix& m = matrices[i];
    if (m.rows < 0 || m.rows > kGemvMaxRows) return cudaErrorInvalidValue;
    if (m.rows > 0 && (!m.trellis || !m.suh || !m.svh || !m.x || !m.y || !aligned16(m.trellis) ||
                       !aligned8(m.suh) || !aligned8(m.svh) || !aligned16(m.x) || !aligned16(m.y) ||
                       static_cast<const void*>(m.x) == m.y))
      return cudaErrorInvalidValue;
    max_rows = std::max(max_rows, m.rows);
    b.m[i] = m;
  }
  Plan p;
  if (cudaError_t e = make_plan(count, max_rows, k, n, k_splits, &p); e != cudaSuccess) return e;
  if (!workspace || workspace_bytes < bytes_for(count, n, p) || !aligned16(workspace))
    return cudaErrorInvalidValue;
  if (max_rows == 0) return cudaSuccess;
  auto* counters = static_cast<uint32_t*>(workspace);
  auto* partials = reinterpret_cast<float*>(static_cast<uint8_t*>(workspace) +
                                            align256(static_cast<size_t>(count) * (n / 128) * 4));
  switch (K) {
    case 2:
      return launch_cb<2>(cb, b, count, k, n, p, counters, partials, stream);
    case 3:
      return launch_cb<3>(cb, b, count, k, n, p, counters, partials, stream);
    default:
      return launch_cb<5>(cb, b, count, k, n, p, counters, partials, stream);
  }
}

}  // namespace dsv41::kernels
