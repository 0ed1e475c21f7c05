// The follower rank's loop (docs/tp.md "Rank processes"): receives rank 0's SequenceMirror ops
// (model/sequence_mirror.hpp, sent by runtime/mirrored_backend.hpp) and applies them to its own
// sequences of its own forward backend, running the same forward calls (whose all-reduces and
// all-gathers pair with rank 0's). Rank 0 samples; the follower's logits are discarded.
#pragma once

#include <atomic>

#include "dsv41/status.hpp"

namespace dsv41 {

class ForwardBackend;
namespace parallel {
class TpComm;
}

// Returns Ok when rank 0 sends kStop, kCancelled when *stop is set, or the link's error (rank 0
// died / stalled: the TpComm's kAborted / kTimeout). An op the follower cannot apply (unknown
// sequence, position mismatch, a forward failure) aborts the link with that reason, so rank 0
// fails at once instead of waiting for a collective, and returns it. backend must be the same
// kind as rank 0's (the collectives of a forward depend on it). hidden_size: the width of the
// image-span embedding rows a forward may carry (the model's hidden size, equal on both ranks:
// the rendezvous compared config.json).
Status run_follower(const ForwardBackend& backend, parallel::TpComm& comm, int64_t hidden_size,
                    const std::atomic<bool>* stop);

}  // namespace dsv41
