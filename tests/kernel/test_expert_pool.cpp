// A synthetic checkpoint with an expert pool (text_config.synthetic_expert_pool: an 8-wide router
// over 4 stored experts, expert e running expert e % 4's weights) on the CUDA backend: the upload
// keeps one device copy per pooled expert (DeviceMoe's dedup by mapped bytes), and the logits of a
// prefill and decode steps match the CPU reference within the tiny models' bound. A geometry with
// 128-multiple widths takes the routed experts' decode tensor-core GEMV at 1- and 2-row steps.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cuda/forward/cuda_transformer.hpp"
#include "dsv41k/moe.hpp"
#include "kernel_check.hpp"
#include "logits_check.hpp"
#include "model/transformer.hpp"
#include "synthetic/synthetic_checkpoint.hpp"
#include "unit/base/temp_dir.hpp"

namespace dsv41::test {
namespace {

constexpr double kCudaVsCpuTol = 2e-3;  // as test_model_forward.cpp (tiny8 bound)

}  // namespace

TEST_CASE("cuda forward: a synthetic expert pool uploads once and matches the CPU",
          "[kernel][model]") {
  if (skip_without_gpu()) return;
  synth::SyntheticGeometry g = synth::SyntheticGeometry::tiny();
  synth::SyntheticGeometry plain_g = g;
  g.expert_pool = g.n_routed_experts;  // 4 stored
  g.n_routed_experts = 8;
  TempDir pooled, plain;
  synth::write_synthetic_checkpoint(pooled.path(), g, 7);
  synth::write_synthetic_checkpoint(plain.path(), plain_g, 7);

  std::unique_ptr<Transformer> cpu = Transformer::load(pooled.path(), 0);
  cuda::CudaForwardOptions opts;
  opts.max_chunk = 8;
  opts.max_context = 256;
  std::unique_ptr<cuda::CudaTransformer> gpu = cuda::CudaTransformer::upload(*cpu, opts);
  // The same 4 experts per layer on the device as the plain 4-expert checkpoint.
  std::unique_ptr<Transformer> cpu_plain = Transformer::load(plain.path(), 0);
  std::unique_ptr<cuda::CudaTransformer> gpu_plain =
      cuda::CudaTransformer::upload(*cpu_plain, opts);
  const cuda::CudaLoadReport& rep = gpu->load_report();
  INFO("routed bytes " << rep.routed_bytes << " vs " << gpu_plain->load_report().routed_bytes);
  REQUIRE(rep.routed_bytes == gpu_plain->load_report().routed_bytes);
  REQUIRE(rep.expert_bytes == gpu_plain->load_report().expert_bytes);

  const int64_t V = g.vocab_size;
  const std::vector<int32_t> prompt = {5, 77, 300, 2, 599, 41, 12, 9, 400, 3, 17};
  SequenceState st = cpu->new_sequence();
  cuda::DeviceSequence seq = gpu->new_sequence();
  require_logits("pool prefill cuda vs cpu", gpu->forward(seq, prompt), cpu->forward(st, prompt), V,
                 kCudaVsCpuTol);
  for (int32_t id : {7, 123, 450}) {
    const std::vector<int32_t> one{id};
    require_logits("pool decode cuda vs cpu", gpu->forward(seq, one), cpu->forward(st, one), V,
                   kCudaVsCpuTol);
  }
}

TEST_CASE("cuda forward: routed experts on the decode tensor-core GEMV match the CPU",
          "[kernel][model]") {
  if (skip_without_gpu()) return;
  // moe_grouped_fp4_gemv_tc_decode needs in % 128 == 0 for both expert projections.
  synth::SyntheticGeometry g = synth::SyntheticGeometry::tiny();
  g.hidden_size = 128;
  g.moe_intermediate_size = 128;
  TempDir dir;
  synth::write_synthetic_checkpoint(dir.path(), g, 11);
  std::unique_ptr<Transformer> cpu = Transformer::load(dir.path(), 0);
  REQUIRE(kernels::moe_grouped_fp4_gemv_tc_decode_supported(2, g.hidden_size));
  cuda::CudaForwardOptions opts;
  opts.max_chunk = 8;
  opts.max_context = 256;
  opts.fp4_tc_decode_min_rows = 1;  // 1-row steps too
  std::unique_ptr<cuda::CudaTransformer> gpu = cuda::CudaTransformer::upload(*cpu, opts);
  const int64_t V = g.vocab_size;
  const std::vector<int32_t> prompt = {5, 77, 300, 2, 599, 41, 12, 9, 400, 3, 17};
  SequenceState st = cpu->new_sequence();
  cuda::DeviceSequence seq = gpu->new_sequence();
  require_logits("decode-tc prefill cuda vs cpu", gpu->forward(seq, prompt),
                 cpu->forward(st, prompt), V, kCudaVsCpuTol);
  for (const std::vector<int32_t>& step : std::vector<std::vector<int32_t>>{{7}, {123, 450}, {9}})
    require_logits("decode-tc step cuda vs cpu", gpu->forward(seq, step), cpu->forward(st, step), V,
                   kCudaVsCpuTol);
}

}  // namespace dsv41::test
