// QP transition attributes (ibv_qp_attrs.hpp).
#include "parallel/ibv_qp_attrs.hpp"

#include <algorithm>
#include <cstring>

namespace dsv41::parallel {

IbvQpStep qp_init_step(uint8_t port) {
  IbvQpStep s;
  s.attr.qp_state = IBV_QPS_INIT;
  s.attr.pkey_index = 0;
  s.attr.port_num = port;
  // The peer only RDMA-writes into our region; no reads, no atomics.
  s.attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  s.mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  return s;
}

IbvQpStep qp_rtr_step(const IbvPeerInfo& peer, uint8_t port, int gid_index, uint8_t local_mtu) {
  IbvQpStep s;
  s.attr.qp_state = IBV_QPS_RTR;
  s.attr.path_mtu = static_cast<ibv_mtu>(std::min(local_mtu, peer.mtu));
  s.attr.dest_qp_num = peer.qpn;
  s.attr.rq_psn = peer.psn;
  s.attr.max_dest_rd_atomic = 1;
  s.attr.min_rnr_timer = kIbvMinRnrTimer;
  s.attr.ah_attr.dlid = peer.lid;
  s.attr.ah_attr.sl = 0;
  s.attr.ah_attr.src_path_bits = 0;
  s.attr.ah_attr.port_num = port;
  if (peer.has_gid()) {
    s.attr.ah_attr.is_global = 1;
    std::memcpy(s.attr.ah_attr.grh.dgid.raw, peer.gid.data(), peer.gid.size());
    s.attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index);
    s.attr.ah_attr.grh.hop_limit = kIbvHopLimit;
    s.attr.ah_attr.grh.flow_label = 0;
    s.attr.ah_attr.grh.traffic_class = 0;
  }
  s.mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  return s;
}

IbvQpStep qp_rts_step(uint32_t my_psn) {
  IbvQpStep s;
  s.attr.qp_state = IBV_QPS_RTS;
  s.attr.timeout = kIbvTimeout;
  s.attr.retry_cnt = kIbvRetryCount;
  s.attr.rnr_retry = kIbvRnrRetry;
  s.attr.sq_psn = my_psn;
  s.attr.max_rd_atomic = 1;
  s.mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
           IBV_QP_MAX_QP_RD_ATOMIC;
  return s;
}

uint32_t initial_psn(uint64_t seed, uint32_t qpn) {
  uint64_t x = seed ^ (uint64_t{qpn} * 0x9E3779B97F4A7C15ull);
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  const uint32_t psn = static_cast<uint32_t>(x & 0xFFFFFF);
  return psn == 0 ? 1 : psn;
}

}  // namespace dsv41::parallel
