// TpIbverbs: a TpComm (world 2) whose all-reduces up to OneShotPlan::max_bytes run the one-shot
// protocol (oneshot_allreduce.hpp) over IbvTransport, and whose larger all-reduces and every
// other collective (all_gather, broadcast, barrier), heartbeats and abort delegate to the TCP
// comm it wraps. COMPILED AND UNIT-TESTED ONLY, NOT VERIFIED ON RDMA HARDWARE (docs/tp.md).
#pragma once

#include <chrono>
#include <memory>

#include "dsv41/status.hpp"
#include "parallel/ibv_transport.hpp"
#include "parallel/tp_comm.hpp"

namespace dsv41::parallel {

// Decode-sized messages (48 KB = 2.4 rows of 5120 fp32 per the anchors; 1 MiB = 51 rows).
inline constexpr size_t kOneShotDefaultMaxBytes = size_t{1} << 20;

// Opens the device on both ranks, exchanges {ok, IbvPeerInfo} over tcp (all_gather, so a rank
// that cannot open its device makes both ranks fail with the same reason), connects the QP and
// barriers. Errors: IbvTransport::open's (kUnsupported naming libibverbs.so.1 when absent),
// decode_peer_info's, modify_qp's. On error `tcp` is destroyed.
Result<std::unique_ptr<TpComm>> make_tp_ibverbs(std::unique_ptr<TpComm> tcp,
                                                const IbvDeviceOptions& options, size_t max_bytes,
                                                std::chrono::milliseconds op_timeout);

}  // namespace dsv41::parallel
