#include "runtime/tp_link.hpp"

#include <fstream>
#include <sstream>

#include "config/model_config.hpp"
#include "core/check.hpp"
#include "loader/checkpoint.hpp"
#include "model/shard_plan.hpp"
#include "parallel/tp_ibverbs.hpp"
#include "parallel/tp_tcp.hpp"

namespace dsv41 {

parallel::TpParams tp_params(const TensorParallelParams& p) {
  parallel::TpParams t;
  t.rank = p.rank;
  t.world = p.world;
  t.bind_address = p.bind_address;
  t.peer_address = p.peer_address;
  t.port = p.port;
  t.connect_timeout = std::chrono::milliseconds(p.connect_timeout_ms);
  t.op_timeout = std::chrono::milliseconds(p.op_timeout_ms);
  t.heartbeat_interval = std::chrono::milliseconds(p.heartbeat_interval_ms);
  t.heartbeat_timeout = std::chrono::milliseconds(p.heartbeat_timeout_ms);
  return t;
}

parallel::Handshake tp_handshake(const std::string& dir, const TensorParallelParams& p) {
  parallel::Handshake h;
  const std::string cfg_path = dir + "/config.json";
  std::ifstream f(cfg_path, std::ios::binary);
  DSV41_CHECK(f.good(), kNotFound, "{}: cannot read", cfg_path);
  std::ostringstream bytes;
  bytes << f.rdbuf();
  h.config_hash = parallel::fnv1a_64(bytes.str());
  Result<ModelConfig> cfg = ModelConfig::load(dir);
  if (!cfg) throw detail::Failure(cfg.status().code(), cfg.status().message(), __FILE__, __LINE__);
  h.plan_hash = ShardPlan::make(cfg->text, p.rank, p.world).world_hash(cfg->text);
  std::unique_ptr<Checkpoint> ck = Checkpoint::open(dir);
  uint64_t inv = parallel::fnv1a_64("dsv41-inventory-v1");
  for (const std::string& name : ck->names()) {
    const TensorView v = ck->get(name);
    std::string line = name + ":" + dtype_name(v.dtype());
    for (int64_t d : v.shape()) line += fmt::format(",{}", d);
    inv = parallel::fnv1a_64(line + "\n", inv);
  }
  h.inventory_hash = inv;
  h.settings = p.settings;
  return h;
}

std::unique_ptr<parallel::TpComm> connect_tp_link(const std::string& dir,
                                                  const TensorParallelParams& p,
                                                  const std::string& ib_device, int ib_gid_index) {
  Result<std::unique_ptr<parallel::TpComm>> comm =
      parallel::connect_tp_tcp(tp_params(p), tp_handshake(dir, p), p.cancel);
  if (!comm)
    throw detail::Failure(comm.status().code(), comm.status().message(), __FILE__, __LINE__);
  if (ib_device.empty()) return std::move(*comm);
  parallel::IbvDeviceOptions o;
  o.device = ib_device;
  o.gid_index = ib_gid_index;
  Result<std::unique_ptr<parallel::TpComm>> rdma =
      parallel::make_tp_ibverbs(std::move(*comm), o, parallel::kOneShotDefaultMaxBytes,
                                std::chrono::milliseconds(p.op_timeout_ms));
  if (!rdma)
    throw detail::Failure(rdma.status().code(), rdma.status().message(), __FILE__, __LINE__);
  return std::move(*rdma);
}

}  // namespace dsv41
