// Shared by the [tp] tests and the dsv41_tp_peer helper: loopback TpParams and
// the collective script both ranks run (the same calls in the same order on
// both sides).
#pragma once

#include <string>

#include "parallel/rendezvous.hpp"
#include "parallel/tp_comm.hpp"

namespace dsv41::tp_test {

// Rank 0 on 127.0.0.1, rank 1 on 127.0.0.2 (distinct loopback addresses:
// exercises binding).
parallel::TpParams loopback_params(int rank, uint16_t port);
// A port that was free a moment ago on 127.0.0.1.
uint16_t free_port();
// The handshake both ranks agree on; `max_context` lets a test make them
// disagree.
parallel::Handshake test_handshake(const std::string& max_context = "262144");

// Runs all_reduce f32 / bf16 (checked against the exact rank-order sum and, via
// all_gather, bit-identical on both ranks), all_gather, broadcast from each
// root, barrier. Returns "" or the first failure.
std::string run_script(parallel::TpComm& comm);

}  // namespace dsv41::tp_test
