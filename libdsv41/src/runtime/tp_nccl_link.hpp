// The NCCL data link of a CUDA tensor-parallel rank (DSV41_TP_NCCL, docs/tp.md "NCCL data
// link"): a TpNccl communicator on the current CUDA device, bootstrapped over `link` (the rank's
// TCP link, borrowed: it keeps carrying the runtime's messages), used only by the CUDA forward's
// all-reduces and logits gather on device buffers. Defined by tp_nccl_link.cpp when the
// dsv41_tp_nccl target is built (CUDA + NCCL found), else by tp_nccl_link_absent.cpp
// (kUnsupported naming the missing part).
#pragma once

#include <chrono>
#include <memory>

#include "parallel/tp_comm.hpp"

namespace dsv41 {

// Both ranks must call it (the rendezvous settings make them agree); `link` must outlive the
// result. Throws detail::Failure: kUnsupported without NCCL, kAborted / kTimeout when the
// communicator cannot be created within init_timeout (the peer's NCCL network unreachable).
std::unique_ptr<parallel::TpComm> connect_tp_nccl(parallel::TpComm& link,
                                                  std::chrono::milliseconds init_timeout);

}  // namespace dsv41
