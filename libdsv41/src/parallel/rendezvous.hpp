// Rendezvous: the first exchange on a new TP link. Each rank sends a Handshake;
// both compare the pair with the same rank-ordered rule, so both sides refuse a
// mismatch with the same message naming the first difference (docs/tp.md
// "Rendezvous").
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dsv41/status.hpp"
#include "parallel/tcp_socket.hpp"

namespace dsv41::parallel {

// Bumped whenever the handshake, the frame layout or the follower ops change (2: a forward op
// carries image-span rows, and DSpark draft rounds are an op; model/sequence_mirror.hpp).
inline constexpr uint32_t kTpProtocolVersion = 2;

struct Handshake {
  uint32_t protocol_version = kTpProtocolVersion;
  int32_t world = 0;
  int32_t rank = 0;
  uint64_t config_hash = 0;     // hash of config.json as loaded (same model)
  uint64_t plan_hash = 0;       // hash of the shard/allocation plan (same split)
  uint64_t inventory_hash = 0;  // hash of tensor names + shapes + dtypes (same files)
  std::map<std::string, std::string> settings;  // every engine setting that must agree
};

// Wire layout (little endian): u32 magic "DSVH", u32 version, i32 world, i32
// rank, u64 x3 hashes, u32 n, then n x (u32 len, key bytes, u32 len, value
// bytes).
std::vector<std::byte> encode_handshake(const Handshake& h);
// Throws kCorruptFile naming the byte offset when the message is truncated or
// malformed, and kUnsupported when the peer speaks another protocol version
// (checked before the rest).
Handshake decode_handshake(std::span<const std::byte> bytes);

// Ok when a and b describe the two ranks of one TP world running the same model
// and settings. Otherwise kInvalidArgument naming the first difference in this
// order: protocol version, world, ranks (must be distinct, 0..world-1), config
// / plan / inventory hash, then settings keys in sorted order ("<absent>" for a
// missing key). Symmetric: compare(a, b) == compare(b, a).
Status compare_handshakes(const Handshake& a, const Handshake& b);

// Sends mine, receives the peer's (length-prefixed, at most 1 MiB), compares.
// Throws the comparison Status (as a Failure) on mismatch, kTimeout/kAborted
// from the socket.
Handshake exchange_handshake(TcpSocket& socket, const Handshake& mine, Clock::time_point deadline,
                             const StopCheck& stop);

// FNV-1a 64-bit, for callers building the hashes above from files and tensor
// lists.
uint64_t fnv1a_64(std::string_view bytes, uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace dsv41::parallel
