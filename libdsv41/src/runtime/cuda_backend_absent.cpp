// make_cuda_backend of a build without CUDA (DSV41_CUDA=OFF): a clear error, never a crash.
#include "core/check.hpp"
#include "runtime/forward_backend.hpp"

namespace dsv41 {

std::unique_ptr<ForwardBackend> make_cuda_backend(const Transformer&, const CudaBackendOptions&) {
  detail::fail(ErrorCode::kUnsupported,
               "backend \"cuda\": this libdsv41 was built without CUDA (configure with "
               "-DDSV41_CUDA=ON and nvcc 13)",
               __FILE__, __LINE__);
}

}  // namespace dsv41
