// IbvPeerInfo encode / decode with validation (ibv_peer_info.hpp).
#include "parallel/ibv_peer_info.hpp"

#include <fmt/format.h>

#include <cstring>
#include <string>

namespace dsv41::parallel {
namespace {

constexpr uint32_t kMagic = 0x49565344;  // "DSVI" little-endian
constexpr uint32_t k24Bits = 0xFFFFFF;

template <typename T>
void put(std::byte* out, size_t off, T v) {
  for (size_t i = 0; i < sizeof(T); ++i)
    out[off + i] = static_cast<std::byte>((static_cast<uint64_t>(v) >> (8 * i)) & 0xFF);
}

struct Reader {
  std::span<const std::byte> in;
  std::string error;

  template <typename T>
  T get(size_t off, const char* field) {
    if (!error.empty()) return 0;
    if (off + sizeof(T) > in.size()) {
      error = fmt::format("TP peer info ends in field '{}' at offset {} ({} bytes, need {})", field,
                          off, in.size(), kIbvPeerInfoBytes);
      return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); ++i)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(in[off + i])) << (8 * i);
    return static_cast<T>(v);
  }
};

Status corrupt(std::string msg) { return {ErrorCode::kCorruptFile, std::move(msg)}; }

}  // namespace

bool IbvPeerInfo::has_gid() const {
  for (uint8_t b : gid)
    if (b != 0) return true;
  return false;
}

std::array<std::byte, kIbvPeerInfoBytes> encode_peer_info(const IbvPeerInfo& info) {
  std::array<std::byte, kIbvPeerInfoBytes> out{};
  put<uint32_t>(out.data(), 0, kMagic);
  put<uint16_t>(out.data(), 4, kIbvPeerInfoVersion);
  put<uint8_t>(out.data(), 6, info.mtu);
  put<uint32_t>(out.data(), 8, info.qpn);
  put<uint32_t>(out.data(), 12, info.psn);
  put<uint16_t>(out.data(), 16, info.lid);
  put<uint32_t>(out.data(), 20, info.rkey);
  put<uint64_t>(out.data(), 24, info.addr);
  put<uint64_t>(out.data(), 32, info.region_bytes);
  std::memcpy(out.data() + 40, info.gid.data(), info.gid.size());
  return out;
}

Result<IbvPeerInfo> decode_peer_info(std::span<const std::byte> bytes,
                                     uint64_t expected_region_bytes) {
  Reader r{bytes, {}};
  const uint32_t magic = r.get<uint32_t>(0, "magic");
  const uint16_t version = r.get<uint16_t>(4, "version");
  IbvPeerInfo p;
  p.mtu = r.get<uint8_t>(6, "mtu");
  p.qpn = r.get<uint32_t>(8, "qpn");
  p.psn = r.get<uint32_t>(12, "psn");
  p.lid = r.get<uint16_t>(16, "lid");
  p.rkey = r.get<uint32_t>(20, "rkey");
  p.addr = r.get<uint64_t>(24, "addr");
  p.region_bytes = r.get<uint64_t>(32, "region_bytes");
  if (r.error.empty() && bytes.size() < 56)
    r.error = fmt::format("TP peer info ends in field 'gid' at offset 40 ({} bytes, need {})",
                          bytes.size(), kIbvPeerInfoBytes);
  r.get<uint64_t>(56, "reserved");
  if (!r.error.empty()) return corrupt(r.error);
  if (bytes.size() != kIbvPeerInfoBytes)
    return corrupt(
        fmt::format("TP peer info has {} bytes, expected {}", bytes.size(), kIbvPeerInfoBytes));
  std::memcpy(p.gid.data(), bytes.data() + 40, p.gid.size());
  if (magic != kMagic)
    return corrupt(
        fmt::format("TP peer info field 'magic' is {:#010x}, expected {:#010x} (not "
                    "a dsv41 peer)",
                    magic, kMagic));
  if (version != kIbvPeerInfoVersion)
    return corrupt(fmt::format("TP peer info field 'version' is {}, this build speaks {}", version,
                               kIbvPeerInfoVersion));
  if (p.mtu < 1 || p.mtu > 5)
    return corrupt(fmt::format("TP peer info field 'mtu' is {} (ibv_mtu must be 1..5)", p.mtu));
  if (p.qpn == 0 || p.qpn > k24Bits)
    return corrupt(fmt::format("TP peer info field 'qpn' is {} (must be 1..{})", p.qpn, k24Bits));
  if (p.psn > k24Bits)
    return corrupt(fmt::format("TP peer info field 'psn' is {} (must fit 24 bits)", p.psn));
  if (p.addr == 0) return corrupt("TP peer info field 'addr' is 0 (no registered region)");
  if (p.lid == 0 && !p.has_gid())
    return corrupt("TP peer info fields 'lid' and 'gid' are both zero (no address to reach)");
  if (p.region_bytes != expected_region_bytes)
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("TP peer info field 'region_bytes' is {}, this rank planned {} (the "
                              "ranks disagree on the one-shot all-reduce size)",
                              p.region_bytes, expected_region_bytes));
  return p;
}

}  // namespace dsv41::parallel
