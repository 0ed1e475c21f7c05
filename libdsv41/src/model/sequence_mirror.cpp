#include "model/sequence_mirror.hpp"

#include <vector>

#include "core/check.hpp"
#include "parallel/tp_comm.hpp"

namespace dsv41 {

SequenceMirror::~SequenceMirror() { stop(); }

namespace {

// TpComm::broadcast takes a writable buffer (it is the receive buffer on the other ranks).
template <typename T>
Status broadcast_copy(parallel::TpComm& comm, std::span<const T> values) {
  std::vector<T> buf(values.begin(), values.end());
  return comm.broadcast(std::as_writable_bytes(std::span(buf)), 0);
}

}  // namespace

void SequenceMirror::send(const MirrorHeader& h, std::span<const int32_t> ids,
                          std::span<const uint8_t> flags, std::span<const float> embeds) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  DSV41_CHECK(!stopped_, kAborted, "TP follower already stopped");
  MirrorHeader copy = h;
  Status s = comm_.broadcast(std::as_writable_bytes(std::span(&copy, 1)), 0);
  if (s.is_ok() && !ids.empty()) s = broadcast_copy(comm_, ids);
  if (s.is_ok() && h.image_rows > 0) s = broadcast_copy(comm_, flags);
  if (s.is_ok() && h.image_rows > 0) s = broadcast_copy(comm_, embeds);
  if (!s.is_ok())
    throw detail::Failure(s.code(), "TP follower update: " + s.message(), __FILE__, __LINE__);
}

uint64_t SequenceMirror::open(int max_rollback, int64_t max_context) {
  uint64_t id;
  {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    id = next_id_++;
  }
  send({MirrorOp::kNew, 0, id, max_rollback, 0, max_context});
  return id;
}

void SequenceMirror::forward(uint64_t id, int64_t pos0, std::span<const int32_t> ids, bool last_row,
                             std::span<const uint8_t> flags, std::span<const float> embeds) {
  DSV41_CHECK(flags.empty() || flags.size() == ids.size(), kInvalidArgument,
              "{} image flags for {} tokens", flags.size(), ids.size());
  MirrorHeader h{MirrorOp::kForward, static_cast<uint32_t>(ids.size()), id, 0, pos0, 0};
  h.last_row = last_row ? 1 : 0;
  for (uint8_t f : flags) h.image_rows += f != 0 ? 1 : 0;
  DSV41_CHECK(h.image_rows > 0 || embeds.empty(), kInvalidArgument,
              "{} image embedding values for no image position", embeds.size());
  send(h, ids, flags, embeds);
}

void SequenceMirror::rollback(uint64_t id, int64_t n) { send({MirrorOp::kRollback, 0, id, n}); }

void SequenceMirror::draft(uint64_t id, int64_t pos0, int32_t next) {
  send({MirrorOp::kDraft, 0, id, next, pos0});
}

// reset() runs on failure paths (session_append resets after a failed forward): a link error
// here must not replace the error being reported; the poisoned link fails the next op anyway.
void SequenceMirror::reset(uint64_t id) noexcept {
  try {
    send({MirrorOp::kReset, 0, id});
  } catch (const detail::Failure&) {
  }
}

uint64_t SequenceMirror::fork(uint64_t from, int64_t max_context) {
  uint64_t id;
  {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    id = next_id_++;
  }
  send({MirrorOp::kFork, 0, id, static_cast<int64_t>(from), 0, max_context});
  return id;
}

void SequenceMirror::release(uint64_t id) noexcept {
  try {
    send({MirrorOp::kRelease, 0, id});
  } catch (const detail::Failure&) {  // the link is down: the follower is gone or will abort
  }
}

void SequenceMirror::abort(const std::string& reason) noexcept { comm_.abort(reason); }

void SequenceMirror::stop() noexcept {
  try {
    send({MirrorOp::kStop});
  } catch (const detail::Failure&) {
  }
  std::lock_guard<std::recursive_mutex> lock(mu_);
  stopped_ = true;
}

}  // namespace dsv41
