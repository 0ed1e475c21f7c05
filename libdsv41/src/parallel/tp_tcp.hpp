// TpTcp: the CPU TpComm over one TCP connection per rank pair (world 2, direct
// exchange). Used by tests and CPU-only hosts, and as the bootstrap / liveness
// channel beside NCCL (docs/tp.md).
#pragma once

#include <memory>

#include "dsv41/status.hpp"
#include "parallel/rendezvous.hpp"
#include "parallel/tp_comm.hpp"

namespace dsv41::parallel {

// Rank 0 listens on bind_address:port and accepts only peer_address; rank 1
// binds bind_address and connects. Then the Handshake is exchanged and compared
// (a mismatch fails on both ranks with the same message), and the heartbeat and
// reader threads start. mine.rank/world are taken from params. Errors:
// kInvalidArgument (params, mismatch), kTimeout (no peer within
// connect_timeout), kIo (bind refused: address not on this host / port in use).
Result<std::unique_ptr<TpComm>> connect_tp_tcp(const TpParams& params, Handshake mine,
                                               const std::atomic<bool>* abort = nullptr);

}  // namespace dsv41::parallel
