// [kernel] The vision tower on the GPU against its CPU reference (spec §7.3-7.4): every op of
// kernels/include/dsv41k/vision.hpp against the vision/ function it mirrors, then the whole
// DeviceVisionTower (encode, span) against VisionTower on the tiny vision fixture, and
// Model::encode_image on the CUDA backend against the CPU backend's.
//
// Bounds. Copies, merges and bias / residual adds are single roundings of the same operands:
// bit-equal. RoPE: the same unfused products and cos / sin values, but the host compiler may
// contract x1·c - x2·s into an FMA (-march=native): 2 ulp of the operands' scale. SiLU / GELU:
// the device expf / erff are within 2 ulp of glibc's. Attention: the online softmax rescales
// partial sums once per 32 keys and the dot products use FMA: 1e-5 of max |v|. The tower: the
// GEMMs take fp32-faithful inputs (three bf16 parts) and sum in another order, plus the above,
// through 2 blocks: 1e-4 of the output rms.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <random>
#include <span>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "backend/cuda/vision/device_vision_tower.hpp"
#include "dsv41/model.hpp"
#include "dsv41k/vision.hpp"
#include "golden/vision/vision_fixture.hpp"
#include "kernel_check.hpp"
#include "logits_check.hpp"
#include "model/transformer.hpp"
#include "vision/patch_merge.hpp"
#include "vision/vision_attention.hpp"
#include "vision/vision_rope.hpp"

namespace dsv41::test {
namespace {

cuda::DeviceBuffer up(const std::vector<float>& v) {
  cuda::DeviceBuffer b(v.size() * 4);
  b.upload(std::span<const float>(v));
  return b;
}

std::vector<float> down(const cuda::DeviceBuffer& b, size_t n) {
  std::vector<float> v(n);
  b.download(std::span<float>(v));
  return v;
}

// max |got - want| <= tol · scale, naming the first worst element.
void require_close(const std::string& what, const std::vector<float>& got,
                   const std::vector<float>& want, double tol, double scale) {
  REQUIRE(got.size() == want.size());
  const MaxDiff m = max_abs_diff(got, want);
  std::printf("%s: max |diff| %.3g at %zu (bound %.3g)\n", what.c_str(), m.worst, m.at,
              tol * scale);
  INFO(what << ": max |diff| " << m.worst << " at index " << m.at << " (got " << got[m.at]
            << ", want " << want[m.at] << "), bound " << tol * scale);
  REQUIRE(m.worst <= tol * scale);
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

double rms(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s / static_cast<double>(v.size()));
}

}  // namespace

TEST_CASE("vision element-wise ops match the CPU reference", "[kernel][vision]") {
  if (skip_without_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  cuda::CudaStream stream;
  const int64_t rows = 37, n = 96, inter = 40;
  const std::vector<float> x = random_normal(rows * n, rng), y = random_normal(rows * n, rng),
                           b = random_normal(n, rng);
  {  // bias: y += b; residual: x = x + (y + b), and without b
    cuda::DeviceBuffer dy = up(y), db = up(b), dx = up(x), dx2 = up(x);
    DSV41_CUDA_CHECK(
        kernels::vision_add_bias(dy.as<float>(), db.as<float>(), rows, n, stream.get()));
    DSV41_CUDA_CHECK(kernels::vision_residual_add(dx.as<float>(), up(y).as<float>(), db.as<float>(),
                                                  rows, n, stream.get()));
    DSV41_CUDA_CHECK(kernels::vision_residual_add(dx2.as<float>(), up(y).as<float>(), nullptr, rows,
                                                  n, stream.get()));
    stream.synchronize();
    std::vector<float> want_y = y, want_x = x, want_x2 = x;
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t i = 0; i < n; ++i) {
        want_y[t * n + i] += b[i];
        want_x[t * n + i] += want_y[t * n + i];
        want_x2[t * n + i] += y[t * n + i];
      }
    require_close("vision_add_bias", down(dy, y.size()), want_y, 0, 1);
    require_close("vision_residual_add", down(dx, x.size()), want_x, 0, 1);
    require_close("vision_residual_add (no bias)", down(dx2, x.size()), want_x2, 0, 1);
  }
  {  // SiLU(gate) · up and the exact GELU
    const std::vector<float> gu = random_normal(rows * 2 * inter, rng);
    cuda::DeviceBuffer dgu = up(gu), dact(static_cast<size_t>(rows * inter) * 4), dh = up(x);
    DSV41_CUDA_CHECK(
        kernels::vision_silu_mul(dgu.as<float>(), dact.as<float>(), rows, inter, stream.get()));
    DSV41_CUDA_CHECK(kernels::vision_gelu(dh.as<float>(), rows * n, stream.get()));
    stream.synchronize();
    std::vector<float> want_act(static_cast<size_t>(rows * inter)), want_h(x.size());
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t i = 0; i < inter; ++i) {
        const float g = gu[t * 2 * inter + i];
        want_act[t * inter + i] = g / (1.0f + std::exp(-g)) * gu[t * 2 * inter + inter + i];
      }
    for (size_t i = 0; i < x.size(); ++i)
      want_h[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] / std::sqrt(2.0f)));
    require_close("vision_silu_mul", down(dact, want_act.size()), want_act, 4.8e-7,
                  max_abs(want_act));
    require_close("vision_gelu", down(dh, want_h.size()), want_h, 4.8e-7, max_abs(want_h));
  }
}

TEST_CASE("vision RoPE, merge and attention match the CPU reference", "[kernel][vision]") {
  if (skip_without_gpu()) return;
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  cuda::CudaStream stream;
  // (vit_h, vit_w, heads, head_dim): the tiny tower, an odd grid, the released head_dim 64 with
  // more keys than one 32-key tile and queries than one 128-query block.
  for (auto [vh, vw, heads, hd] : {std::array<int, 4>{4, 6, 2, 16}, std::array<int, 4>{7, 5, 3, 32},
                                   std::array<int, 4>{13, 11, 4, 64}}) {
    const int64_t n = int64_t{vh} * vw, hidden = int64_t{heads} * hd;
    const std::string ctx = fmt::format("grid {}x{} heads {} head_dim {}", vh, vw, heads, hd);
    std::vector<float> qkv = random_normal(n * 3 * hidden, rng);
    const std::vector<float> angles = vision::vision_rope_angles(vh, vw, hd, 10000.0);
    std::vector<float> cos_t(angles.size()), sin_t(angles.size());
    for (size_t i = 0; i < angles.size(); ++i) {
      cos_t[i] = std::cos(angles[i]);
      sin_t[i] = std::sin(angles[i]);
    }
    cuda::DeviceBuffer dqkv = up(qkv), dc = up(cos_t), ds = up(sin_t);
    cuda::DeviceBuffer dout(static_cast<size_t>(n * hidden) * 4);
    DSV41_CUDA_CHECK(kernels::vision_rope(dqkv.as<float>(), dc.as<float>(), ds.as<float>(), n,
                                          heads, hd, stream.get()));
    stream.synchronize();
    vision::rotate_qk(qkv.data(), n, heads, hd, angles.data());
    require_close("vision_rope " + ctx, down(dqkv, qkv.size()), qkv, 2.4e-7, max_abs(qkv));
    // Attention on the device's rotated qkv (the bound is for the attention alone).
    const std::vector<float> rotated = down(dqkv, qkv.size());
    DSV41_CUDA_CHECK(
        kernels::vision_attention(dqkv.as<float>(), dout.as<float>(), n, heads, hd, stream.get()));
    stream.synchronize();
    std::vector<float> want(static_cast<size_t>(n * hidden));
    ThreadPool pool(2);
    vision::full_attention(rotated.data(), n, heads, hd, want.data(), pool);
    require_close("vision_attention " + ctx, down(dout, want.size()), want, 1e-5, max_abs(rotated));
    // Merge of a [n, hidden] map in 3x3 cells (padding where the grid is not a multiple of 3).
    const std::vector<float> vit(rotated.begin(), rotated.begin() + n * hidden);
    const std::vector<float> merged = vision::merge_patches(vit.data(), vh, vw, hidden, 3);
    cuda::DeviceBuffer dvit = up(vit), dmerged(merged.size() * 4);
    DSV41_CUDA_CHECK(kernels::vision_merge(dvit.as<float>(), dmerged.as<float>(), vh, vw, hidden, 3,
                                           stream.get()));
    stream.synchronize();
    require_close("vision_merge " + ctx, down(dmerged, merged.size()), merged, 0, 1);
  }
}

TEST_CASE("vision ops reject unsupported arguments", "[kernel][vision]") {
  float f[64] = {};
  CHECK(kernels::vision_add_bias(nullptr, f, 1, 4, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::vision_add_bias(f, f, 1, 0, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::vision_residual_add(f, nullptr, f, 1, 4, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::vision_rope(f, f, f, 1, 1, 3, nullptr) == cudaErrorInvalidValue);  // odd
  CHECK(kernels::vision_silu_mul(f, f, -1, 4, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::vision_gelu(nullptr, 4, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::vision_merge(f, f, 0, 4, 4, 3, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::vision_attention(f, f, 4, 2, 128, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::vision_attention(f, f, 4, 0, 64, nullptr) == cudaErrorInvalidValue);
  CHECK(kernels::vision_attention(f, f, 0, 2, 64, nullptr) == cudaSuccess);  // nothing to do
}

TEST_CASE("DeviceVisionTower encode and span match VisionTower", "[kernel][vision]") {
  if (skip_without_gpu()) return;
  auto t = Transformer::load(make_tiny8_vision(), 2);
  vision::VisionTower cpu(t->checkpoint(), t->config(), t->pool());
  std::unique_ptr<cuda::DeviceVisionTower> gpu = cuda::DeviceVisionTower::upload(cpu);
  CHECK(gpu->weight_bytes() > 0);
  std::mt19937 rng(11);
  // 20x14 (the fixture's usual image), a wide and a tall one (other grids, merge padding).
  for (auto [w, h] : {std::pair{20, 14}, std::pair{41, 9}, std::pair{12, 30}}) {
    std::vector<uint8_t> rgb(size_t{3} * w * h);
    for (uint8_t& b : rgb) b = static_cast<uint8_t>(rng() & 0xFF);
    Result<vision::ImagePatches> p =
        vision::make_patches(vision::RgbImage{w, h, rgb}, cpu.config());
    REQUIRE(p.is_ok());
    const std::string ctx =
        fmt::format("{}x{} image, {}x{} patches", w, h, p->layout.vit_h, p->layout.vit_w);
    const std::vector<float> want_vit = cpu.encode(*p);
    require_close("encode " + ctx, gpu->encode(*p), want_vit, 1e-4, rms(want_vit));
    const std::vector<float> want = cpu.span(*p);
    require_close("span " + ctx, gpu->span(*p), want, 1e-4, rms(want));
  }
  vision::ImagePatches bad;
  bad.layout.vit_h = bad.layout.vit_w = 2;
  REQUIRE_THROWS_WITH(gpu->span(bad), Catch::Contains("0 patch values for a 2x2 grid"));
}

TEST_CASE("Model::encode_image on the CUDA backend matches the CPU backend", "[kernel][vision]") {
  if (skip_without_gpu()) return;
  const std::string dir = make_tiny8_vision();
  auto load = [&](const char* backend) {
    ModelParams p;
    p.model_dir = dir;
    p.threads = 2;
    p.backend = backend;
    Result<Model> m = Model::load(p);
    INFO(m.status().to_string());
    REQUIRE(m.is_ok());
    return std::move(*m);
  };
  const Model cpu = load("cpu"), gpu = load("cuda");
  REQUIRE(gpu.image_support().is_ok());
  CHECK(cpu.info().image_encoder == "cpu");
  CHECK(gpu.info().image_encoder == "cuda");
  ::setenv("DSV41_CUDA_VISION", "0", 1);  // the CUDA forward with the CPU reference tower
  const Model gpu_cpu_tower = load("cuda");
  ::unsetenv("DSV41_CUDA_VISION");
  CHECK(gpu_cpu_tower.info().image_encoder == "cpu");
  std::mt19937 rng(3);
  std::vector<uint8_t> rgb(size_t{3} * 20 * 14);
  for (uint8_t& b : rgb) b = static_cast<uint8_t>(rng() & 0xFF);
  Result<ImageEmbedding> a = cpu.encode_image({20, 14, rgb});
  Result<ImageEmbedding> b = gpu.encode_image({20, 14, rgb});
  REQUIRE(a.is_ok());
  REQUIRE(b.is_ok());
  CHECK(b->positions() == a->positions());
  const std::vector<float> want(a->values().begin(), a->values().end());
  require_close("Model::encode_image cuda vs cpu",
                std::vector<float>(b->values().begin(), b->values().end()), want, 1e-4, rms(want));
  Result<ImageEmbedding> c = gpu_cpu_tower.encode_image({20, 14, rgb});
  REQUIRE(c.is_ok());
  CHECK(std::equal(c->values().begin(), c->values().end(), want.begin(), want.end()));
}

}  // namespace dsv41::test
