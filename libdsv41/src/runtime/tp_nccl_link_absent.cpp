// connect_tp_nccl of a build without the dsv41_tp_nccl target (no CUDA, or NCCL not found).
#include "core/check.hpp"
#include "runtime/tp_nccl_link.hpp"

namespace dsv41 {

std::unique_ptr<parallel::TpComm> connect_tp_nccl(parallel::TpComm&, std::chrono::milliseconds) {
  throw detail::Failure(
      ErrorCode::kUnsupported,
      "DSV41_TP_NCCL = true, but this build has no NCCL (dsv41_tp_nccl needs DSV41_CUDA and "
      "nccl.h / libnccl under the CUDA toolkit); leave it false to use the TCP link",
      __FILE__, __LINE__);
}

}  // namespace dsv41
