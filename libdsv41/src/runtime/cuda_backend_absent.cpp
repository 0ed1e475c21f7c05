// make_cuda_backend and make_cuda_image_encoder of a build without CUDA (DSV41_CUDA=OFF): a clear
// error, never a crash.
#include "core/check.hpp"
#include "runtime/forward_backend.hpp"
#include "runtime/image_encoder.hpp"

namespace dsv41 {

std::unique_ptr<ForwardBackend> make_cuda_backend(const Transformer&, const CudaBackendOptions&) {
  detail::fail(ErrorCode::kUnsupported,
               "backend \"cuda\": this libdsv41 was built without CUDA (configure with "
               "-DDSV41_CUDA=ON and nvcc 13)",
               __FILE__, __LINE__);
}

std::unique_ptr<ImageEncoder> make_cuda_image_encoder(const vision::VisionTower&) {
  detail::fail(ErrorCode::kUnsupported,
               "the CUDA vision tower: this libdsv41 was built without CUDA", __FILE__, __LINE__);
}

}  // namespace dsv41
