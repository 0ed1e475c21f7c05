#include "runtime/tp_nccl_link.hpp"

#include <cuda_runtime_api.h>

#include "core/check.hpp"
#include "parallel/tp_nccl.hpp"

namespace dsv41 {

std::unique_ptr<parallel::TpComm> connect_tp_nccl(parallel::TpComm& link,
                                                  std::chrono::milliseconds init_timeout) {
  int device = 0;
  const cudaError_t e = cudaGetDevice(&device);
  DSV41_CHECK(e == cudaSuccess, kUnsupported, "DSV41_TP_NCCL: no CUDA device ({})",
              cudaGetErrorString(e));
  Result<std::unique_ptr<parallel::TpComm>> comm =
      parallel::make_tp_nccl(parallel::borrow_tp_comm(link), device, init_timeout);
  if (!comm)
    throw detail::Failure(comm.status().code(), "DSV41_TP_NCCL: " + comm.status().message(),
                          __FILE__, __LINE__);
  return std::move(*comm);
}

}  // namespace dsv41
