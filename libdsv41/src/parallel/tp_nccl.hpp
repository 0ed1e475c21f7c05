// TpNccl: the GPU TpComm over NCCL (target dsv41_tp_nccl, built only when CUDA
// + NCCL are found). Spans passed to its collectives must be device-accessible
// memory (device or managed; on GB10 host and device memory are one).
// COMPILE-ONLY in this repository: never run on two GPUs yet (docs/tp.md
// "Unverified on hardware").
#pragma once

#include <memory>

#include "dsv41/status.hpp"
#include "parallel/tp_comm.hpp"

namespace dsv41::parallel {

// `bootstrap` is a connected world-2 TpComm (TpTcp): it carries the
// ncclUniqueId from rank 0 and the barriers, and keeps its heartbeat.
// Communicator creation and every collective are non-blocking NCCL calls polled
// until done, the deadline (kTimeout), the abort flag or an asynchronous NCCL
// error (kAborted); any failure calls ncclCommAbort and poisons the comm.
Result<std::unique_ptr<TpComm>> make_tp_nccl(std::unique_ptr<TpComm> bootstrap, int cuda_device,
                                             std::chrono::milliseconds init_timeout);

}  // namespace dsv41::parallel
