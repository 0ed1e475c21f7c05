// The vision tower on one GPU (DeviceVisionTower) at the checkpoint's dimensions: wall time of
// DeviceVisionTower::span per image size (upload of the patches, the ViT, the aligner and the
// download of the span included; median of `repeats`), its FLOP count and rate. check=1 also runs
// the CPU reference tower on the first size and prints max |GPU - CPU| / rms (slow: minutes at
// the released dims on few cores).
//
// Usage: dsv41_bench_cuda_vision DIR [sizes=544x544,1024x768,1512x1134] [repeats=3] [check=1]
// DIR: a checkpoint with a vision tower, e.g. dsv41_make_synthetic /tmp/synv --layers 1
// --experts 8 --vision (released tower dims). Results: docs/perf.md "Vision tower".
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.hpp"
#include "backend/cuda/vision/device_vision_tower.hpp"
#include "bench_main.hpp"
#include "model/transformer.hpp"
#include "vision/image_patches.hpp"
#include "vision/vision_tower.hpp"

namespace {

struct Size {
  int w = 0, h = 0;
};

std::vector<Size> parse_sizes(const std::string& s) {
  std::vector<Size> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    Size z;
    if (std::sscanf(item.c_str(), "%dx%d", &z.w, &z.h) != 2 || z.w < 1 || z.h < 1) {
      std::fprintf(stderr, "dsv41_bench_cuda_vision: bad size \"%s\" (want WxH)\n", item.c_str());
      std::exit(2);
    }
    out.push_back(z);
  }
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// 2 · MACs of the tower for n patches and `rows` aligner rows (spec §7.3-7.4).
double tower_flop(const dsv41::VisionConfig& v, int64_t D, int64_t n, int64_t rows) {
  const double h = v.hidden_size, i = v.intermediate_size, p = 3.0 * v.patch_size * v.patch_size;
  const double r2 = static_cast<double>(v.downsample_ratio) * v.downsample_ratio;
  const double per_block = 2.0 * n * (3 * h * h + h * h + 2 * i * h + h * i) + 4.0 * n * n * h;
  return 2.0 * n * h * p + v.num_hidden_layers * per_block +
         2.0 * rows * (h * r2 * static_cast<double>(D) + static_cast<double>(D) * D);
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: dsv41_bench_cuda_vision DIR [sizes=544x544,1024x768,1512x1134] "
                 "[repeats=3] [check=1]\n");
    return 2;
  }
  const std::vector<Size> sizes = parse_sizes(argc > 2 ? argv[2] : "544x544,1024x768,1512x1134");
  const int repeats = std::max(1, argc > 3 ? std::atoi(argv[3]) : 3);
  const bool check = argc > 4 && std::string(argv[4]) == "check=1";
  std::printf("device: %s\n", dsv41::cuda::describe(dsv41::cuda::device_info(0)).c_str());
  std::unique_ptr<dsv41::Transformer> t = dsv41::Transformer::load(argv[1], 0);
  dsv41::vision::VisionTower cpu(t->checkpoint(), t->config(), t->pool());
  const dsv41::VisionConfig& v = cpu.config();
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<dsv41::cuda::DeviceVisionTower> gpu = dsv41::cuda::DeviceVisionTower::upload(cpu);
  std::printf(
      "tower: %d blocks x %d (heads %d, inter %d), aligner -> %lld; upload %.2f s, %.1f MiB\n",
      v.num_hidden_layers, v.hidden_size, v.num_attention_heads, v.intermediate_size,
      static_cast<long long>(cpu.embedding_dim()), seconds_since(t0),
      gpu->weight_bytes() / 1048576.0);
  std::printf(
      "\n| image | patches | span | GPU ms (median) | TFLOP | TFLOP/s |\n"
      "| --- | --- | --- | --- | --- | --- |\n");
  std::mt19937 rng(7);
  for (size_t si = 0; si < sizes.size(); ++si) {
    const Size z = sizes[si];
    std::vector<uint8_t> rgb(size_t{3} * z.w * z.h);
    for (uint8_t& b : rgb) b = static_cast<uint8_t>(rng() & 0xFF);
    dsv41::Result<dsv41::vision::ImagePatches> p =
        dsv41::vision::make_patches(dsv41::vision::RgbImage{z.w, z.h, rgb}, v);
    if (!p.is_ok()) {
      std::fprintf(stderr, "%dx%d: %s\n", z.w, z.h, p.status().to_string().c_str());
      return 1;
    }
    std::vector<float> span = gpu->span(*p);  // warm-up (allocations, first launches)
    std::vector<double> ms;
    for (int r = 0; r < repeats; ++r) {
      t0 = std::chrono::steady_clock::now();
      span = gpu->span(*p);
      ms.push_back(seconds_since(t0) * 1e3);
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    const double flop =
        tower_flop(v, cpu.embedding_dim(), p->layout.patches(), p->layout.image_tokens());
    std::printf("| %dx%d | %lld (%dx%d) | %lld | %.1f | %.2f | %.1f |\n", z.w, z.h,
                static_cast<long long>(p->layout.patches()), p->layout.vit_h, p->layout.vit_w,
                static_cast<long long>(p->layout.span_length()), med, flop / 1e12,
                flop / 1e12 / (med / 1e3));
    std::fflush(stdout);
    if (check && si == 0) {
      t0 = std::chrono::steady_clock::now();
      const std::vector<float> want = cpu.span(*p);
      const double cpu_s = seconds_since(t0);
      double worst = 0, ss = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::fabs(static_cast<double>(span[i]) - want[i]));
        ss += static_cast<double>(want[i]) * want[i];
      }
      const double r = std::sqrt(ss / static_cast<double>(want.size()));
      std::printf(
          "check %dx%d: CPU reference %.1f s; max |GPU - CPU| %.3g = %.3g of the rms %.3g\n", z.w,
          z.h, cpu_s, worst, worst / r, r);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return dsv41::bench::guarded_main("dsv41_bench_cuda_vision", [&] { return run(argc, argv); });
}
