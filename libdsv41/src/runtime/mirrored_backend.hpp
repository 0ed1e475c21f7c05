// Rank 0's ForwardBackend under tensor parallelism (docs/tp.md "Rank processes"): a decorator
// over the rank's own backend (CPU or CUDA) that tells the follower rank every sequence
// operation before running it (SequenceMirror ops: new, fork on clone, release on destruction,
// reset, rollback, forward with its logit rows and image-span rows), so the follower
// (runtime/tp_follower.hpp) runs the same calls on its backend and their collectives pair. A
// forward holds the mirror for its op and every collective of the pass, so ops from other threads
// never fall in between.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/forward_backend.hpp"

namespace dsv41 {

namespace parallel {
class TpComm;
}

// comm (rank 0 of world 2) must outlive the result; the result sends kStop when destroyed.
// A forward's ids are checked against vocab_size, and image embeddings against hidden_size
// (their width), before the follower is told: bad input must fail the call on rank 0, not
// abort the link from the follower.
std::unique_ptr<ForwardBackend> make_mirrored_backend(std::unique_ptr<ForwardBackend> inner,
                                                      parallel::TpComm& comm, int64_t vocab_size,
                                                      int64_t hidden_size);

}  // namespace dsv41
