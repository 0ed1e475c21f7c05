#include "model/sequence_mirror.hpp"

#include <vector>

#include "core/check.hpp"
#include "parallel/tp_comm.hpp"

namespace dsv41 {

MirrorHandle::MirrorHandle(const MirrorHandle& other) : mirror(other.mirror) {
  if (mirror != nullptr) id = mirror->fork(other.id);
}

MirrorHandle& MirrorHandle::operator=(const MirrorHandle& other) {
  if (this == &other) return *this;
  release();
  mirror = other.mirror;
  id = mirror != nullptr ? mirror->fork(other.id) : 0;
  return *this;
}

MirrorHandle::MirrorHandle(MirrorHandle&& other) noexcept : mirror(other.mirror), id(other.id) {
  other.mirror = nullptr;
  other.id = 0;
}

MirrorHandle& MirrorHandle::operator=(MirrorHandle&& other) noexcept {
  if (this == &other) return *this;
  release();
  mirror = other.mirror;
  id = other.id;
  other.mirror = nullptr;
  other.id = 0;
  return *this;
}

MirrorHandle::~MirrorHandle() { release(); }

void MirrorHandle::release() noexcept {
  if (mirror != nullptr) mirror->release(id);
  mirror = nullptr;
  id = 0;
}

SequenceMirror::~SequenceMirror() { stop(); }

void SequenceMirror::send(const MirrorHeader& h, std::span<const int32_t> ids,
                          std::span<const uint8_t> flags) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  DSV41_CHECK(!stopped_, kAborted, "TP follower already stopped");
  MirrorHeader copy = h;
  Status s = comm_.broadcast(std::as_writable_bytes(std::span(&copy, 1)), 0);
  if (s.is_ok() && !ids.empty()) {
    std::vector<int32_t> buf(ids.begin(), ids.end());
    s = comm_.broadcast(std::as_writable_bytes(std::span(buf)), 0);
  }
  if (s.is_ok() && !flags.empty()) {
    std::vector<uint8_t> buf(flags.begin(), flags.end());
    s = comm_.broadcast(std::as_writable_bytes(std::span(buf)), 0);
  }
  if (!s.is_ok())
    throw detail::Failure(s.code(), "TP follower update: " + s.message(), __FILE__, __LINE__);
}

MirrorHandle SequenceMirror::open(int max_rollback, int64_t max_context) {
  uint64_t id;
  {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    id = next_id_++;
  }
  send({MirrorOp::kNew, 0, id, max_rollback, 0, max_context});
  MirrorHandle h;
  h.mirror = this;
  h.id = id;
  return h;
}

void SequenceMirror::forward(uint64_t id, int64_t pos0, std::span<const int32_t> ids,
                             std::span<const uint8_t> image_flags) {
  MirrorHeader h{MirrorOp::kForward, static_cast<uint32_t>(ids.size()), id, 0, pos0, 0};
  h.has_flags = image_flags.empty() ? 0 : 1;
  send(h, ids, image_flags);
}

void SequenceMirror::rollback(uint64_t id, int64_t n) { send({MirrorOp::kRollback, 0, id, n}); }

// reset() runs on failure paths (session_append resets after a failed forward): a link error
// here must not replace the error being reported; the poisoned link fails the next op anyway.
void SequenceMirror::reset(uint64_t id) noexcept {
  try {
    send({MirrorOp::kReset, 0, id});
  } catch (const detail::Failure&) {
  }
}

uint64_t SequenceMirror::fork(uint64_t from) {
  uint64_t id;
  {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    id = next_id_++;
  }
  send({MirrorOp::kFork, 0, id, static_cast<int64_t>(from)});
  return id;
}

void SequenceMirror::release(uint64_t id) noexcept {
  try {
    send({MirrorOp::kRelease, 0, id});
  } catch (const detail::Failure&) {  // the link is down: the follower is gone or will abort
  }
}

void SequenceMirror::stop() noexcept {
  try {
    send({MirrorOp::kStop});
  } catch (const detail::Failure&) {
  }
  std::lock_guard<std::recursive_mutex> lock(mu_);
  stopped_ = true;
}

}  // namespace dsv41
