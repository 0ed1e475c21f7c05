#include "runtime/tp_follower.hpp"

#include <map>
#include <memory>
#include <vector>

#include "core/check.hpp"
#include "model/sequence_mirror.hpp"
#include "parallel/tp_comm.hpp"
#include "runtime/forward_backend.hpp"

namespace dsv41 {
namespace {

// The follower waits for rank 0's next op as long as the link lives (idle servers); the
// heartbeat, not this timeout, detects a dead or stalled rank 0.
constexpr std::chrono::hours kIdleWait{24 * 365};

using Sequences = std::map<uint64_t, std::unique_ptr<BackendSequence>>;

BackendSequence& find(Sequences& seqs, uint64_t id, const char* op) {
  auto it = seqs.find(id);
  DSV41_CHECK(it != seqs.end(), kInternal, "TP follower: {} of unknown sequence {}", op, id);
  return *it->second;
}

template <typename T>
void recv(parallel::TpComm& comm, std::vector<T>& buf) {
  const Status s = comm.broadcast(std::as_writable_bytes(std::span(buf)), 0);
  if (!s.is_ok()) throw detail::Failure(s.code(), s.message(), __FILE__, __LINE__);
}

}  // namespace

Status run_follower(const ForwardBackend& backend, parallel::TpComm& comm, int64_t hidden_size,
                    const std::atomic<bool>* stop) {
  Sequences seqs;
  for (;;) {
    MirrorHeader h;
    Status s =
        comm.broadcast(std::as_writable_bytes(std::span(&h, 1)), 0,
                       {std::chrono::duration_cast<std::chrono::milliseconds>(kIdleWait), stop});
    if (!s.is_ok()) {
      if (stop != nullptr && stop->load()) {
        comm.abort("follower rank stopped");
        return Status(ErrorCode::kCancelled, "TP follower stopped");
      }
      return s;
    }
    if (h.op == MirrorOp::kStop) return Status::ok();
    Status applied = detail::capture_status([&] {
      switch (h.op) {
        case MirrorOp::kNew: {
          DSV41_CHECK(!seqs.count(h.id), kInternal, "TP follower: sequence {} exists", h.id);
          seqs.emplace(h.id,
                       backend.new_sequence(StateOptions{.max_rollback = static_cast<int>(h.arg),
                                                         .max_context = h.max_context}));
          break;
        }
        case MirrorOp::kFork: {
          // As kNew: an id that exists means the two ranks' sequence tables disagree (a silent
          // replace hid the desynchronisation).
          DSV41_CHECK(!seqs.count(h.id), kInternal,
                      "TP follower: fork onto sequence {}, which exists", h.id);
          const BackendSequence& from = find(seqs, static_cast<uint64_t>(h.arg), "fork");
          seqs.emplace(h.id, from.clone(h.max_context > 0 ? h.max_context : from.max_context()));
          break;
        }
        case MirrorOp::kRelease:
          DSV41_CHECK(seqs.erase(h.id) == 1, kInternal,
                      "TP follower: release of sequence {}, which does not exist", h.id);
          break;
        case MirrorOp::kReset:
          find(seqs, h.id, "reset").reset();
          break;
        case MirrorOp::kRollback:
          find(seqs, h.id, "rollback").rollback(h.arg);
          break;
        case MirrorOp::kForward: {
          // Sizes before anything is allocated for them (n_tokens and image_rows are 32-bit: a
          // corrupt header asked for up to 16 GiB of ids and image_rows x hidden floats). An
          // unknown sequence is refused after its payload, below, as before.
          if (const auto it = seqs.find(h.id); it != seqs.end()) {
            const int64_t room = it->second->max_context() - it->second->pos();
            DSV41_CHECK(h.n_tokens <= room && h.image_rows <= h.n_tokens, kCorruptFile,
                        "TP follower: forward of sequence {} announces {} tokens and {} image "
                        "rows, with room for {} tokens",
                        h.id, h.n_tokens, h.image_rows, room);
          }
          std::vector<int32_t> ids(h.n_tokens);
          recv(comm, ids);
          // Image rows: every payload is received before any check, so a refusal below aborts
          // the link at an op boundary (rank 0 then fails with the reason, not a mismatch).
          std::vector<uint8_t> flags(h.image_rows > 0 ? h.n_tokens : 0);
          std::vector<float> embeds(static_cast<size_t>(h.image_rows) *
                                    static_cast<size_t>(hidden_size));
          if (h.image_rows > 0) {
            recv(comm, flags);
            recv(comm, embeds);
          }
          BackendSequence& st = find(seqs, h.id, "forward");
          DSV41_CHECK(st.pos() == h.pos0, kInternal,
                      "TP follower: sequence {} is at position {}, rank 0 forwards from {}", h.id,
                      st.pos(), h.pos0);
          if (h.image_rows == 0) {
            (void)backend.forward(st, ids, h.last_row == 0);
            break;
          }
          uint32_t flagged = 0;
          for (uint8_t f : flags) flagged += f != 0 ? 1 : 0;
          DSV41_CHECK(flagged == h.image_rows, kCorruptFile,
                      "TP follower: forward of sequence {} flags {} image positions, its header "
                      "says {}",
                      h.id, flagged, h.image_rows);
          (void)backend.forward_image(st, ids, flags, embeds, h.last_row == 0);
          break;
        }
        case MirrorOp::kDraft: {
          BackendSequence& st = find(seqs, h.id, "draft");
          DSV41_CHECK(st.pos() == h.pos0, kInternal,
                      "TP follower: sequence {} is at position {}, rank 0 drafts at {}", h.id,
                      st.pos(), h.pos0);
          (void)backend.dspark_draft(st, static_cast<int32_t>(h.arg), 1, 0.0f);
          break;
        }
        default:
          DSV41_FAIL(kCorruptFile, "TP follower: unknown op {}", static_cast<uint32_t>(h.op));
      }
    });
    if (!applied.is_ok()) {
      Status link = comm.health();
      if (!link.is_ok()) return link;  // the link failed inside the op
      comm.abort(applied.message());
      return applied;
    }
  }
}

}  // namespace dsv41
