// IbvPeerInfo: what one rank tells the other to connect an RC queue pair and RDMA-write into its
// one-shot region (docs/tp.md "One-shot RDMA transport"). Exchanged as a fixed 64-byte
// little-endian record over the TCP link (TpComm::all_gather) before any verbs traffic.
//
//   off  size  field
//     0     4  magic "DSVI"
//     4     2  version (kIbvPeerInfoVersion)
//     6     1  mtu (ibv_mtu enum, IBV_MTU_256 = 1 .. IBV_MTU_4096 = 5: the port's active MTU)
//     7     1  pad (0)
//     8     4  qpn (24 bits)
//    12     4  psn (24 bits)
//    16     2  lid (0 on RoCE)
//    18     2  pad (0)
//    20     4  rkey
//    24     8  addr (virtual address of the registered region)
//    32     8  region_bytes (OneShotPlan::total_bytes)
//    40    16  gid (raw bytes; all zero on InfiniBand without GRH)
//    56     8  reserved (0)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "dsv41/status.hpp"

namespace dsv41::parallel {

inline constexpr size_t kIbvPeerInfoBytes = 64;
inline constexpr uint16_t kIbvPeerInfoVersion = 1;

struct IbvPeerInfo {
  uint8_t mtu = 0;
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  uint32_t rkey = 0;
  uint64_t addr = 0;
  uint64_t region_bytes = 0;
  std::array<uint8_t, 16> gid{};

  bool has_gid() const;
};

std::array<std::byte, kIbvPeerInfoBytes> encode_peer_info(const IbvPeerInfo& info);

// kCorruptFile naming the field: short input ("ends in field 'rkey' at offset 20 (18 bytes)"),
// trailing bytes, bad magic / version, qpn 0 or > 24 bits, psn > 24 bits, mtu outside [1, 5],
// addr 0, neither lid nor gid. kInvalidArgument when region_bytes differs from
// expected_region_bytes (the ranks planned different one-shot sizes).
Result<IbvPeerInfo> decode_peer_info(std::span<const std::byte> bytes,
                                     uint64_t expected_region_bytes);

}  // namespace dsv41::parallel
