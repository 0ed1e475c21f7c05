// DeviceVisionTower: the image encoder (spec model-architecture.md §7.3-7.4) on one GPU, the
// device twin of vision/vision_tower.hpp and judged against it op by op
// (tests/kernel/test_vision_tower.cpp). Built from a bound CPU VisionTower: its BF16 matrices
// are copied from the mmapped checkpoint into device memory as they are stored (DeviceLinear;
// tensor-core GEMMs with fp32-faithful inputs for the many-row products), biases and norms as
// fp32. One call encodes one image on the tower's own stream with buffers sized to that image
// (a 1024-token image: 8,748 patches, ~0.6 GB at the released dims); calls are serialised.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/cuda/cuda_stream.hpp"
#include "backend/cuda/device_buffer.hpp"
#include "vision/image_patches.hpp"
#include "vision/vision_tower.hpp"

namespace dsv41::cuda {

class DeviceLinear;

class DeviceVisionTower {
 public:
  // cpu must outlive the result (its configuration and delimiter rows are used). Throws
  // detail::Failure: kOutOfMemory naming the allocation, kInvalidArgument naming a weight the
  // kernels cannot take, kUnsupported for a head_dim other than 16, 32 or 64.
  static std::unique_ptr<DeviceVisionTower> upload(const vision::VisionTower& cpu);
  ~DeviceVisionTower();

  // VisionTower::encode / align / span on the device; results on the host. Same checks.
  std::vector<float> encode(const vision::ImagePatches& patches) const;
  std::vector<float> span(const vision::ImagePatches& patches) const;
  uint64_t weight_bytes() const { return weight_bytes_; }

 private:
  struct Block;
  DeviceVisionTower() = default;
  // The ViT output [n, hidden] in `out` (device), n = the layout's patches.
  void run_vit(const vision::ImagePatches& patches, DeviceBuffer& out) const;

  const vision::VisionTower* cpu_ = nullptr;
  std::unique_ptr<CudaStream> stream_;
  int64_t patch_in_ = 0, patch_in_padded_ = 0;  // 3·p², rounded up to the GEMM's 32
  std::unique_ptr<DeviceLinear> patch_embed_, aligner_w1_, aligner_w2_;
  DeviceBuffer patch_embed_bias_, norm_, aligner_b1_, aligner_b2_;
  std::vector<std::unique_ptr<Block>> blocks_;
  uint64_t weight_bytes_ = 0;
  mutable std::mutex mu_;
};

}  // namespace dsv41::cuda
