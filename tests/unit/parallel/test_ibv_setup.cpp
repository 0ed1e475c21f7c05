// Pure parts of the ibverbs one-shot transport: peer-info (de)serialisation with validation and
// the QP attributes of each state transition.
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "parallel/ibv_peer_info.hpp"
#include "parallel/ibv_qp_attrs.hpp"
#include "parallel/ibv_transport.hpp"

using namespace dsv41;
using namespace dsv41::parallel;

namespace {

IbvPeerInfo sample() {
  IbvPeerInfo p;
  p.mtu = IBV_MTU_4096;
  p.qpn = 0x1234;
  p.psn = 0xABCDEF;
  p.lid = 0;
  p.rkey = 0xDEADBEEF;
  p.addr = 0x7F0012345000;
  p.region_bytes = 212992;
  for (size_t i = 0; i < 16; ++i) p.gid[i] = static_cast<uint8_t>(i == 10 || i == 11 ? 0xFF : i);
  return p;
}

std::string decode_error(std::span<const std::byte> b, uint64_t expected = 212992) {
  auto r = decode_peer_info(b, expected);
  REQUIRE_FALSE(r.is_ok());
  return r.status().message();
}

}  // namespace

TEST_CASE("ibv peer info: round trip", "[unit][parallel]") {
  const IbvPeerInfo p = sample();
  auto bytes = encode_peer_info(p);
  auto r = decode_peer_info(bytes, p.region_bytes);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  CHECK(r->mtu == p.mtu);
  CHECK(r->qpn == p.qpn);
  CHECK(r->psn == p.psn);
  CHECK(r->rkey == p.rkey);
  CHECK(r->addr == p.addr);
  CHECK(r->region_bytes == p.region_bytes);
  CHECK(r->gid == p.gid);
  CHECK(static_cast<uint8_t>(bytes[0]) == 'D');  // little-endian magic "DSVI"
}

TEST_CASE("ibv peer info: short and bad input name the field", "[unit][parallel]") {
  const auto bytes = encode_peer_info(sample());
  std::span<const std::byte> all(bytes);
  CHECK_THAT(decode_error(all.first(0)), Catch::Contains("field 'magic'"));
  CHECK_THAT(decode_error(all.first(22)), Catch::Contains("field 'rkey' at offset 20"));
  CHECK_THAT(decode_error(all.first(45)), Catch::Contains("field 'gid'"));
  CHECK_THAT(decode_error(all.first(60)), Catch::Contains("field 'reserved'"));
  std::vector<std::byte> longer(bytes.begin(), bytes.end());
  longer.push_back(std::byte{0});
  CHECK_THAT(decode_error(longer), Catch::Contains("65 bytes, expected 64"));
  CHECK(decode_peer_info(all.first(10), 212992).status().code() == ErrorCode::kCorruptFile);

  auto with = [&](auto edit) {
    IbvPeerInfo p = sample();
    edit(p);
    return encode_peer_info(p);
  };
  auto b = bytes;
  b[0] = std::byte{'X'};
  CHECK_THAT(decode_error(b), Catch::Contains("field 'magic'"));
  b = bytes;
  b[4] = std::byte{9};
  CHECK_THAT(decode_error(b), Catch::Contains("field 'version' is 9"));
  CHECK_THAT(decode_error(with([](IbvPeerInfo& p) { p.mtu = 6; })), Catch::Contains("'mtu' is 6"));
  CHECK_THAT(decode_error(with([](IbvPeerInfo& p) { p.qpn = 0; })), Catch::Contains("'qpn' is 0"));
  CHECK_THAT(decode_error(with([](IbvPeerInfo& p) { p.qpn = 1u << 24; })),
             Catch::Contains("'qpn' is 16777216"));
  CHECK_THAT(decode_error(with([](IbvPeerInfo& p) { p.psn = 1u << 24; })),
             Catch::Contains("'psn'"));
  CHECK_THAT(decode_error(with([](IbvPeerInfo& p) { p.addr = 0; })), Catch::Contains("'addr'"));
  CHECK_THAT(decode_error(with([](IbvPeerInfo& p) { p.gid = {}; })),
             Catch::Contains("'lid' and 'gid'"));
  auto sized = decode_peer_info(bytes, 4096);
  REQUIRE(sized.status().code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(sized.status().message(),
             Catch::Contains("'region_bytes' is 212992, this rank planned 4096"));
}

TEST_CASE("ibv qp attrs: INIT, RTR, RTS", "[unit][parallel]") {
  IbvQpStep init = qp_init_step(1);
  CHECK(init.attr.qp_state == IBV_QPS_INIT);
  CHECK(init.attr.port_num == 1);
  CHECK(init.attr.qp_access_flags == IBV_ACCESS_REMOTE_WRITE);
  CHECK(init.mask == (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));

  IbvPeerInfo peer = sample();
  IbvQpStep rtr = qp_rtr_step(peer, 1, 3, IBV_MTU_1024);
  CHECK(rtr.attr.qp_state == IBV_QPS_RTR);
  CHECK(rtr.attr.path_mtu == IBV_MTU_1024);  // min(local 1024, peer 4096)
  CHECK(rtr.attr.dest_qp_num == peer.qpn);
  CHECK(rtr.attr.rq_psn == peer.psn);
  CHECK(rtr.attr.ah_attr.is_global == 1);
  CHECK(rtr.attr.ah_attr.grh.sgid_index == 3);
  CHECK(rtr.attr.ah_attr.port_num == 1);
  CHECK(std::memcmp(rtr.attr.ah_attr.grh.dgid.raw, peer.gid.data(), 16) == 0);
  CHECK((rtr.mask & IBV_QP_AV) != 0);
  CHECK((rtr.mask & IBV_QP_DEST_QPN) != 0);
  CHECK((rtr.mask & IBV_QP_RQ_PSN) != 0);
  CHECK((rtr.mask & IBV_QP_SQ_PSN) == 0);  // RTS sets the send PSN, not RTR

  peer.gid = {};
  peer.lid = 7;
  IbvQpStep ib = qp_rtr_step(peer, 2, 0, IBV_MTU_4096);
  CHECK(ib.attr.ah_attr.is_global == 0);  // InfiniBand without GRH: lid only
  CHECK(ib.attr.ah_attr.dlid == 7);
  CHECK(ib.attr.path_mtu == IBV_MTU_4096);

  IbvQpStep rts = qp_rts_step(0x42);
  CHECK(rts.attr.qp_state == IBV_QPS_RTS);
  CHECK(rts.attr.sq_psn == 0x42);
  CHECK(rts.attr.retry_cnt == kIbvRetryCount);
  CHECK(rts.mask == (IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC));
}

TEST_CASE("ibv qp attrs: initial psn is 24-bit, nonzero, per qpn", "[unit][parallel]") {
  for (uint32_t q = 1; q < 2000; ++q) {
    uint32_t psn = initial_psn(12345, q);
    REQUIRE(psn != 0);
    REQUIRE(psn <= 0xFFFFFF);
  }
  CHECK(initial_psn(1, 10) != initial_psn(1, 11));
  CHECK(initial_psn(1, 10) == initial_psn(1, 10));
}

TEST_CASE("ibv transport: missing library, no device, empty name are clean errors",
          "[unit][parallel]") {
  auto plan = *plan_oneshot(48 * 1024);
  IbvDeviceOptions o;
  o.device = "mlx5_0";
  o.library = "libdsv41-absent-ibverbs.so.1";
  auto missing = IbvTransport::open(o, plan);
  REQUIRE(missing.status().code() == ErrorCode::kUnsupported);
  CHECK_THAT(missing.status().message(), Catch::Contains("libdsv41-absent-ibverbs.so.1"));
  o.library = IbvShim::kDefaultLibrary;
  o.device = "";
  auto empty = IbvTransport::open(o, plan);
  REQUIRE(empty.status().code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(empty.status().message(), Catch::Contains("IbvDeviceOptions.device"));
  o.device = "dsv41-no-such-rdma-dev";
  auto absent = IbvTransport::open(o, plan);
  REQUIRE_FALSE(absent.is_ok());
  INFO(absent.status().to_string());
  // Without libibverbs.so.1: kUnsupported naming it; with it (no such device): kNotFound.
  if (absent.status().code() == ErrorCode::kUnsupported) {
    CHECK_THAT(absent.status().message(), Catch::Contains("libibverbs.so.1"));
  } else {
    REQUIRE(absent.status().code() == ErrorCode::kNotFound);
    CHECK_THAT(absent.status().message(), Catch::Contains("'dsv41-no-such-rdma-dev' not found"));
  }
}
