// The TP link of a Model load (docs/tp.md "Rank processes"): TensorParallelParams -> TpParams,
// the rendezvous Handshake of this model directory, and the connection.
#pragma once

#include <memory>
#include <string>

#include "dsv41/model.hpp"
#include "parallel/rendezvous.hpp"
#include "parallel/tp_comm.hpp"

namespace dsv41 {

parallel::TpParams tp_params(const TensorParallelParams& p);

// config_hash: config.json's bytes; plan_hash: the ShardPlan of the whole world; inventory_hash:
// every tensor's name, dtype and shape in checkpoint order; settings: p.settings. Throws
// detail::Failure naming the file.
parallel::Handshake tp_handshake(const std::string& model_dir, const TensorParallelParams& p);

// Connects (rank 0 waits for rank 1, up to connect_timeout) and runs the rendezvous: a mismatch
// is kInvalidArgument naming the difference on both ranks. Throws detail::Failure.
// ib_device non-empty (DSV41_TP_IB_DEVICE): the TCP link is then wrapped by make_tp_ibverbs
// (one-shot RDMA all-reduce; unverified on hardware), failing both ranks if either cannot open it.
std::unique_ptr<parallel::TpComm> connect_tp_link(const std::string& model_dir,
                                                  const TensorParallelParams& p,
                                                  const std::string& ib_device = "",
                                                  int ib_gid_index = 3);

}  // namespace dsv41
