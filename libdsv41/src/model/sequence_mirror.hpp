// SequenceMirror: rank 0 of a tensor-parallel pair tells the follower rank every change of every
// sequence's state, in order, over the TpComm (docs/tp.md "Rank processes"). The follower
// (runtime/tp_follower.hpp) applies the same changes to its own sequences of the same forward
// backend, so both ranks enter each forward with the same state and issue the same collectives.
// Ops: new, fork (a copy of a state), release (destruction), reset, rollback, forward (tokens,
// logit rows, image-span rows), draft (a DSpark round), stop. The sender side is
// runtime/mirrored_backend.hpp (rank 0's ForwardBackend decorator). Every op is one broadcast of a
// 48-byte header from rank 0 (+ one of the token ids; + for a forward with image rows, one of the
// span flags [T] bytes and one of the embeddings [image_rows, hidden] fp32: rank 1 never sees the
// pixels, only what the tower made).
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <string>

#include "dsv41/status.hpp"

namespace dsv41 {

namespace parallel {
class TpComm;
}

// Wire header of one op (little endian, 48 bytes).
enum class MirrorOp : uint32_t {
  kNew = 1,
  kFork,
  kRelease,
  kReset,
  kRollback,
  kForward,
  kStop,
  kDraft,  // a DSpark draft round (its collectives pair with rank 0's; the drafts are discarded)
};
struct MirrorHeader {
  MirrorOp op = MirrorOp::kStop;
  uint32_t n_tokens = 0;    // kForward: ids that follow
  uint64_t id = 0;          // the sequence
  int64_t arg = 0;          // kFork: source id; kRollback: n; kNew: max_rollback; kDraft: next
  int64_t pos0 = 0;         // kForward, kDraft: the state's position (checked)
  int64_t max_context = 0;  // kNew; kFork: the copy's (0: the source's)
  uint32_t last_row = 0;    // kForward: 1 = rank 0 wants the last row's logits only
  uint32_t image_rows = 0;  // kForward: image-span positions among the ids (spec §7.4)
};
static_assert(sizeof(MirrorHeader) == 48);

class SequenceMirror {
 public:
  explicit SequenceMirror(parallel::TpComm& comm) : comm_(comm) {}
  ~SequenceMirror();  // sends kStop

  // Throw detail::Failure with the TpComm's Status (naming the op) when the link fails. open()
  // and fork() return the new sequence's id.
  uint64_t open(int max_rollback, int64_t max_context);
  // flags [ids.size()] (non-zero = image-span position) and embeds [n_flagged, hidden] follow
  // the ids when a flag is set; empty flags = a text-only forward.
  void forward(uint64_t id, int64_t pos0, std::span<const int32_t> ids, bool last_row,
               std::span<const uint8_t> flags = {}, std::span<const float> embeds = {});
  void rollback(uint64_t id, int64_t n);
  // A DSpark round after `next` on the sequence at position pos0.
  void draft(uint64_t id, int64_t pos0, int32_t next);
  void reset(uint64_t id) noexcept;
  uint64_t fork(uint64_t from, int64_t max_context);
  void release(uint64_t id) noexcept;
  // Tells the follower to return from run_follower (once; later ops fail). Never throws.
  void stop() noexcept;
  // Aborts the link with `reason` (TpComm::abort): rank 0 failed after the follower was told,
  // so the two ranks' states and collectives can no longer pair.
  void abort(const std::string& reason) noexcept;
  // Held by the mirrored forward for the whole call (its op + every collective of the pass),
  // so ops of other threads (a Session destroyed elsewhere, a fork) never fall between a
  // forward's op and its all-reduces: the follower sees the same order as the wire.
  std::unique_lock<std::recursive_mutex> hold() { return std::unique_lock(mu_); }

 private:
  void send(const MirrorHeader& h, std::span<const int32_t> ids = {},
            std::span<const uint8_t> flags = {}, std::span<const float> embeds = {});

  parallel::TpComm& comm_;
  std::recursive_mutex mu_;  // one op (header + payload) at a time; see hold()
  uint64_t next_id_ = 1;
  bool stopped_ = false;
};

}  // namespace dsv41
