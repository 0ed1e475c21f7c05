// CudaForwardOptions: how a CudaTransformer is built and which kernels its steps take (chunk and
// context sizes, the prefill GEMM input, the row thresholds between GEMV and GEMM paths, side
// streams, TP collectives). Plain fields and one validate(); the runtime fills them from the
// DSV41_CUDA_* tunables (runtime/model.cpp), the benches from their knobs.
#pragma once

#include <cstdint>

#include "dsv41k/gemm_x.hpp"

namespace dsv41::parallel {
class TpComm;
}  // namespace dsv41::parallel

namespace dsv41::cuda {

struct CudaForwardOptions {
  int max_chunk = 32;          // tokens per device step (workspace rows); 1..4096
  int64_t max_context = 8192;  // longest sequence; sizes the compressed caches and scores
  // How the large projections' inputs enter the tensor-core GEMMs in steps of more than 16 rows
  // (kernels/include/dsv41k/gemm_x.hpp); kFp32 rounds like the CPU reference.
  kernels::GemmX prefill_x = kernels::GemmX::kFp32;
  // Tensor-core GEMVs for steps of <= 16 rows: FP8 projections from 4 rows (fp8_block_gemv_tc)
  // and the routed FP4 experts (moe_grouped_fp4_gemv_tc); false: the CUDA-core kernels (kept for
  // comparison in dsv41_bench_cuda_forward, gemv=cuda-core).
  bool gemv_tc = true;
  // Fewest rows of a step that take the routed FP4 experts' tensor-core GEMV (with gemv_tc), 1..17
  // (17: never). Below 5 the CUDA-core kernel was faster (H200, device_moe.cpp); an A/B knob of
  // dsv41_bench_cuda_forward (fp4tc=N).
  int fp4_tc_min_rows = 5;
  // Steps of fp4_tc_decode_min_rows..fp4_tc_decode_max_rows rows take the routed FP4 experts'
  // decode tensor-core GEMV (with gemv_tc; moe_grouped_fp4_gemv_tc_decode: x split in shared
  // memory, in k chunks past 2 rows at the released hidden size 5120 and 6 at 2304; no extra
  // launch), ahead of fp4_tc_min_rows; max 0..8 (0: never), min 1..8. At 1 row the CUDA-core
  // kernel was faster (H100: docs/perf.md "Stop 33"). A/B knobs of dsv41_bench_cuda_forward
  // (fp4dec=MAX, fp4decmin=MIN).
  int fp4_tc_decode_min_rows = 2;
  int fp4_tc_decode_max_rows = 8;
  // Fewest rows (2..17; 17: never) of a step whose BF16 head takes the tensor-core GEMM
  // (bf16_gemm: the 1.32 GB head in ~0.84 ms at any row count) instead of the CUDA-core
  // dense_gemv (0.47 ms at 2 rows, 1.24 at 6; H100, docs/perf.md "Stop 35"): DSpark's 5-row
  // draft head and 6-row verify steps take the GEMM. An A/B knob of dsv41_bench_cuda_forward
  // (bf16gemm=N).
  int head_gemm_min_rows = 5;
  // Fewest rows (17..4097; 4097: never) of a step whose layer projections (FP8 attention and
  // shared expert, BF16 router gate, compressor, indexer, Engram) take the tensor-core GEMM;
  // fewer run the GEMVs 16 rows at a time. With split-K the GEMM won from 17 rows (H100, context
  // 1024, chunk of 17 / 64 / 256 rows: 116 / 273 / 469 ms against 119 / 314 / 660 with the GEMVs
  // up to 256 rows; docs/perf.md "Stop 36"). moe_gemm_min_rows: the same for the routed experts
  // (grouped GEMM in 64-row tiles vs the grouped GEMVs in tiles of moe_gemv_tile_rows): with
  // 8-row tiles the GEMVs won to 1024 rows (routed experts, GEMM -> GEMVs: 768 rows 430 -> 301
  // ms, 1024 rows 462 -> 378) and lost at 2048 (566 -> 682); 1409 is the interpolated crossover
  // (H100, docs/perf.md "Stop 37"); DSV41_CUDA_MOE_GEMM_MIN_ROWS. A/B knobs of
  // dsv41_bench_cuda_chunks (gemm=N, moegemm=N).
  int gemm_min_rows = 17;
  int moe_gemm_min_rows = 1409;
  // Rows per descriptor (1..16) of the routed experts' grouped GEMVs at steps of 17 to
  // moe_gemm_min_rows - 1 rows: an expert's rows are cut into tiles of this many, each a pass
  // over its weights. 8 = the decode tensor-core GEMV's B columns (x staged in k chunks past 2
  // rows). Routed experts of a 64-token chunk: 188 ms with 16-row tiles, 95 with 2, 92 with 8;
  // 256 / 512 tokens: 278 / 516 ms with 2, 157 / 222 with 8 (H100, docs/perf.md "Stop 37"). A/B
  // knob of dsv41_bench_cuda_chunks and dsv41_bench_cuda_forward (moetile=N).
  int moe_gemv_tile_rows = 8;
  // Rows per descriptor (1..16) of the routed experts at decode and verify steps (2..16 rows) of
  // an FP4-only layer; 16 keeps one descriptor per expert. At 2 an expert's rows of a verify step
  // go to the decode tensor-core GEMV's 2-row form in pairs (one pass over its weights per pair):
  // routed experts of a step, 16 -> 2: 16 rows 63.8 -> 31.8 ms, 6 rows 15.29 -> 14.59, 3 rows
  // 8.94 -> 8.72 (H100, bench knob, docs/perf.md "Stop 37"). The default stays 16 until the
  // kernel tier has run the 2- and 1-row tiles of this path (test_moe_dispatch,
  // test_model_forward). A/B knob of dsv41_bench_cuda_forward (verifytile=N).
  int moe_verify_tile_rows = 16;
  // moe_gemm_min_rows for layers that hold EXL3 experts (the Spark checkpoint's banks): their
  // grouped GEMV decodes the trellis on the CUDA cores once per descriptor and multiplies every
  // row there, so the crossovers above (measured on FP4 experts) do not carry over; such layers
  // keep stop 36's rule, GEMM from 97 rows and one 16-row tile per expert below, until measured
  // (DSV41_CUDA_EXL3_GEMM_MIN_ROWS).
  int moe_exl3_gemm_min_rows = 97;
  // GEMMs whose grid is small (short chunks; narrow outputs such as the router gate) split k over
  // more blocks (kernels::gemm_k_splits), partials in a 32 MiB workspace: a 17-token chunk 186 ->
  // 116 ms, 64 tokens 350 -> 273, 512 tokens 602 -> 556 (H100); 2048 unchanged. An A/B knob of
  // dsv41_bench_cuda_chunks and dsv41_bench_cuda_forward (splitk=0).
  bool gemm_split_k = true;
  // A sharded Transformer's collectives run over this TpComm instead of the Transformer's own
  // link (null): TpNccl (takes_device_memory) on device buffers without host staging. Must have
  // the link's rank and world and outlive the CudaTransformer.
  parallel::TpComm* data_comm = nullptr;
  // Independent work of a step on second streams: each mHC site's mixes beside its sublayer (only
  // the collapse stays before it: mhc_sites.hpp), each shared expert beside the router and
  // routed experts (DeviceMoe::set_shared_lane), each attention's K=V rows and compressor beside
  // its query chain (DeviceAttention::set_side_lane); false: everything on the step's stream.
  // Same results bit for bit.
  bool side_streams = true;
  // kInvalidArgument naming the field.
  void validate() const;
};

}  // namespace dsv41::cuda
