// Handshake encoding and comparison (rendezvous.hpp).
#include "parallel/rendezvous.hpp"

#include <algorithm>
#include <cstring>
#include <set>

#include "core/check.hpp"

namespace dsv41::parallel {
namespace {

constexpr uint32_t kMagic = 0x48565344;  // "DSVH" little endian
constexpr uint32_t kMaxHandshakeBytes = 1u << 20;

class Writer {
 public:
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
  }
  void put_string(const std::string& s) {
    put(static_cast<uint32_t>(s.size()));
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    out.insert(out.end(), p, p + s.size());
  }
  std::vector<std::byte> out;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> b) : bytes_(b) {}
  template <typename T>
  T get(const char* field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string get_string(const char* field) {
    uint32_t n = get<uint32_t>(field);
    need(n, field);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  size_t pos() const { return pos_; }

 private:
  void need(size_t n, const char* field) {
    DSV41_CHECK(n <= bytes_.size() - pos_, kCorruptFile,
                "TP handshake truncated: field '{}' needs {} bytes at offset "
                "{}, message has {}",
                field, n, pos_, bytes_.size());
  }
  std::span<const std::byte> bytes_;
  size_t pos_ = 0;
};

Status differ(const std::string& what, const std::string& rank0, const std::string& rank1) {
  return {
      ErrorCode::kInvalidArgument,
      fmt::format("TP ranks disagree on {}: rank 0 has '{}', rank 1 has '{}'", what, rank0, rank1)};
}

}  // namespace

std::vector<std::byte> encode_handshake(const Handshake& h) {
  Writer w;
  w.put(kMagic);
  w.put(h.protocol_version);
  w.put(h.world);
  w.put(h.rank);
  w.put(h.config_hash);
  w.put(h.plan_hash);
  w.put(h.inventory_hash);
  w.put(static_cast<uint32_t>(h.settings.size()));
  for (const auto& [k, v] : h.settings) {
    w.put_string(k);
    w.put_string(v);
  }
  return std::move(w.out);
}

Handshake decode_handshake(std::span<const std::byte> bytes) {
  Reader r(bytes);
  uint32_t magic = r.get<uint32_t>("magic");
  DSV41_CHECK(magic == kMagic, kCorruptFile,
              "TP handshake: magic {:#010x}, expected {:#010x} (peer is not a "
              "dsv41 TP rank)",
              magic, kMagic);
  Handshake h;
  h.protocol_version = r.get<uint32_t>("protocol_version");
  DSV41_CHECK(h.protocol_version == kTpProtocolVersion, kUnsupported,
              "TP handshake: peer speaks protocol version {}, this build speaks {}",
              h.protocol_version, kTpProtocolVersion);
  h.world = r.get<int32_t>("world");
  h.rank = r.get<int32_t>("rank");
  h.config_hash = r.get<uint64_t>("config_hash");
  h.plan_hash = r.get<uint64_t>("plan_hash");
  h.inventory_hash = r.get<uint64_t>("inventory_hash");
  uint32_t n = r.get<uint32_t>("settings count");
  for (uint32_t i = 0; i < n; ++i) {
    std::string k = r.get_string("setting key");
    std::string v = r.get_string("setting value");
    DSV41_CHECK(h.settings.emplace(k, std::move(v)).second, kCorruptFile,
                "TP handshake: setting '{}' appears twice", k);
  }
  DSV41_CHECK(r.pos() == bytes.size(), kCorruptFile,
              "TP handshake: {} trailing bytes after offset {}", bytes.size() - r.pos(), r.pos());
  return h;
}

Status compare_handshakes(const Handshake& a, const Handshake& b) {
  // Every message lists the lower rank (or smaller value) first so both ranks
  // print the same.
  if (a.protocol_version != b.protocol_version)
    return {ErrorCode::kInvalidArgument,
            fmt::format("TP ranks speak protocol versions {} and {}",
                        std::min(a.protocol_version, b.protocol_version),
                        std::max(a.protocol_version, b.protocol_version))};
  if (a.rank == b.rank)
    return {ErrorCode::kInvalidArgument,
            fmt::format("TP ranks are not distinct: both sides claim rank {}", a.rank)};
  const Handshake& r0 = a.rank < b.rank ? a : b;
  const Handshake& r1 = a.rank < b.rank ? b : a;
  if (r0.world != r1.world)
    return differ("world size", std::to_string(r0.world), std::to_string(r1.world));
  if (r0.rank < 0 || r1.rank >= r1.world)
    return {ErrorCode::kInvalidArgument, fmt::format("TP ranks {} and {} are not ranks of world {}",
                                                     r0.rank, r1.rank, r0.world)};
  auto hex = [](uint64_t v) { return fmt::format("{:016x}", v); };
  if (r0.config_hash != r1.config_hash)
    return differ("config hash (model config.json)", hex(r0.config_hash), hex(r1.config_hash));
  if (r0.plan_hash != r1.plan_hash)
    return differ("plan hash (shard plan)", hex(r0.plan_hash), hex(r1.plan_hash));
  if (r0.inventory_hash != r1.inventory_hash)
    return differ("tensor inventory hash", hex(r0.inventory_hash), hex(r1.inventory_hash));
  std::set<std::string> keys;
  for (const auto& kv : r0.settings) keys.insert(kv.first);
  for (const auto& kv : r1.settings) keys.insert(kv.first);
  static const std::string kAbsent = "<absent>";
  for (const std::string& k : keys) {
    auto i0 = r0.settings.find(k);
    auto i1 = r1.settings.find(k);
    const std::string& v0 = i0 == r0.settings.end() ? kAbsent : i0->second;
    const std::string& v1 = i1 == r1.settings.end() ? kAbsent : i1->second;
    if (v0 != v1 || (i0 == r0.settings.end()) != (i1 == r1.settings.end()))
      return differ(fmt::format("setting '{}'", k), v0, v1);
  }
  return Status::ok();
}

Handshake exchange_handshake(TcpSocket& socket, const Handshake& mine, Clock::time_point deadline,
                             const StopCheck& stop) {
  std::vector<std::byte> out = encode_handshake(mine);
  uint32_t len = static_cast<uint32_t>(out.size());
  socket.send_all(std::as_bytes(std::span(&len, 1)), deadline, stop, "TP handshake length");
  socket.send_all(out, deadline, stop, "TP handshake");
  uint32_t peer_len = 0;
  socket.recv_all(std::as_writable_bytes(std::span(&peer_len, 1)), deadline, stop,
                  "TP handshake length from peer");
  DSV41_CHECK(peer_len <= kMaxHandshakeBytes, kCorruptFile,
              "TP handshake from peer declares {} bytes (limit {})", peer_len, kMaxHandshakeBytes);
  std::vector<std::byte> in(peer_len);
  socket.recv_all(in, deadline, stop, "TP handshake from peer");
  Handshake peer = decode_handshake(in);
  Status s = compare_handshakes(mine, peer);
  if (!s.is_ok()) throw detail::Failure(s.code(), s.message(), __FILE__, __LINE__);
  return peer;
}

uint64_t fnv1a_64(std::string_view bytes, uint64_t seed) {
  uint64_t h = seed;
  for (char c : bytes) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace dsv41::parallel
