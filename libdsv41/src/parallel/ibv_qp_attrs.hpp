// The RC queue-pair attributes of each state transition of the one-shot transport, as pure
// functions (unit-tested; ibv_transport.cpp applies them with ibv_modify_qp). Values follow the
// verbs spec and rdma-core's ibv_rc_pingpong: RESET -> INIT (port, remote-write access), INIT ->
// RTR (the peer's QPN / PSN / address, path MTU), RTR -> RTS (own PSN, retry counts).
// Types from <infiniband/verbs.h> (libibverbs-dev, rdma-core 44): no libibverbs symbol is used.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "parallel/ibv_peer_info.hpp"

namespace dsv41::parallel {

struct IbvQpStep {
  ibv_qp_attr attr{};
  int mask = 0;  // ibv_qp_attr_mask bits of the fields set in attr
};

// Constants of the transition (docs/tp.md "One-shot RDMA transport").
inline constexpr uint8_t kIbvMinRnrTimer = 12;  // 0.64 ms
inline constexpr uint8_t kIbvTimeout = 14;      // 4.096 us * 2^14 = 67 ms per retry
inline constexpr uint8_t kIbvRetryCount = 7;
inline constexpr uint8_t kIbvRnrRetry = 7;  // 7 = retry forever on receiver-not-ready
inline constexpr uint8_t kIbvHopLimit = 64;

IbvQpStep qp_init_step(uint8_t port);
// path_mtu = min(local_mtu, peer.mtu). With a GID (RoCE: always) the address handle is global
// with sgid_index = gid_index; dlid = peer.lid.
IbvQpStep qp_rtr_step(const IbvPeerInfo& peer, uint8_t port, int gid_index, uint8_t local_mtu);
IbvQpStep qp_rts_step(uint32_t my_psn);

// 24-bit PSN derived from (seed, qpn): different per connection, never 0 (easier to spot in
// traces); deterministic so tests can check it.
uint32_t initial_psn(uint64_t seed, uint32_t qpn);

}  // namespace dsv41::parallel
