// ImageEncoder: the vision tower on the device of the model's backend (CUDA: DeviceVisionTower),
// used by Model::encode_image instead of the CPU reference tower when the backend has one.
#pragma once

#include <memory>
#include <vector>

#include "vision/image_patches.hpp"
#include "vision/vision_tower.hpp"

namespace dsv41 {

class ImageEncoder {
 public:
  virtual ~ImageEncoder() = default;
  virtual const char* name() const = 0;  // "cuda"
  // VisionTower::span's contract: the span's input embeddings [span_length, D] on the host.
  // Throws detail::Failure.
  virtual std::vector<float> span(const vision::ImagePatches& patches) const = 0;
};

// The tower of `cpu` (must outlive the result) on the current CUDA device. Defined by
// cuda_backend.cpp in a DSV41_CUDA build, else by cuda_backend_absent.cpp (kUnsupported).
// Throws kOutOfMemory / kUnsupported / kInvalidArgument naming what could not go up.
std::unique_ptr<ImageEncoder> make_cuda_image_encoder(const vision::VisionTower& cpu);

}  // namespace dsv41
