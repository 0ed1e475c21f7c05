// TpTcp (tp_tcp.hpp). One stream per rank pair carries framed messages:
//   header 32 B: u32 magic "DSVF", u8 type (1 beat, 2 data, 3 abort), u8 op
//   (TpOp), u8 root, u8 pad, u64 seq, u64 logical_bytes (the op's size, for
//   mismatch checks), u64 payload_bytes.
// Every collective sends exactly one data frame and waits for the peer's frame
// with the same seq; a reader thread files incoming frames by seq and feeds the
// heartbeat. Reductions run in ascending rank order (x_0 + x_1), so both ranks
// hold bit-identical results.
#include "parallel/tp_tcp.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string_view>
#include <thread>
#include <vector>

#include "core/check.hpp"
#include "parallel/heartbeat.hpp"
#include "parallel/rank_sum.hpp"
#include "parallel/tcp_socket.hpp"

namespace dsv41::parallel {
namespace {

constexpr uint32_t kFrameMagic = 0x46565344;         // "DSVF"
constexpr uint64_t kMaxPayload = uint64_t{1} << 34;  // 16 GiB: far above any activation
constexpr uint64_t kMaxAbortReason = 64 * 1024;      // an abort frame's reason text
// A data frame's payload is received in slices, each counted as traffic by the heartbeat: a
// frame longer on the wire than the heartbeat timeout (the head's all-gather of a 4096-token
// chunk is ~1 GB per direction) is a live peer, not a silent one.
constexpr size_t kRecvSlice = size_t{4} << 20;
enum class FrameType : uint8_t { kBeat = 1, kData = 2, kAbort = 3 };

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  FrameType type = FrameType::kBeat;
  TpOp op = TpOp::kBarrier;
  uint8_t root = 0;
  uint8_t pad = 0;
  uint64_t seq = 0;
  uint64_t logical_bytes = 0;
  uint64_t payload_bytes = 0;
};
static_assert(sizeof(FrameHeader) == 32);

struct Frame {
  FrameHeader header;
  std::vector<std::byte> payload;
};

// How long a collective that lost its socket waits for the reader to report the peer's abort
// reason (the reader drains frames already received within microseconds; EOF ends the wait).
constexpr std::chrono::milliseconds kPeerReasonGrace{250};

[[noreturn]] void throw_status(const Status& s) {
  throw detail::Failure(s.code(), s.message(), __FILE__, __LINE__);
}

class TpTcpComm final : public TpComm {
 public:
  TpTcpComm(const TpParams& params, TcpSocket socket)
      : params_(params),
        peer_name_(fmt::format("rank {} ({})", 1 - params.rank, params.peer_address)),
        socket_(std::move(socket)) {
    heartbeat_ = std::make_unique<Heartbeat>(
        params.heartbeat_interval, params.heartbeat_timeout,
        Heartbeat::Hooks{[this] { send_beat(); }, [this](Status s) { fail_link(std::move(s)); }},
        peer_name_);
    reader_ = std::thread([this] { read_loop(); });
  }

  ~TpTcpComm() override {
    stopping_ = true;
    heartbeat_->stop();
    socket_.shutdown_both();
    if (reader_.joinable()) reader_.join();
  }

  int rank() const override { return params_.rank; }
  int world() const override { return 2; }

  Status all_reduce_sum_f32(std::span<float> data, const CallControl& ctl) override {
    return detail::capture_status([&] {
      Frame peer = exchange(TpOp::kAllReduceF32, 0, std::as_bytes(data), data.size_bytes(), ctl);
      sum_rank_order_f32(data, peer.payload.data(), rank());
    });
  }

  Status all_reduce_sum_bf16(std::span<uint16_t> data, const CallControl& ctl) override {
    return detail::capture_status([&] {
      Frame peer = exchange(TpOp::kAllReduceBf16, 0, std::as_bytes(data), data.size_bytes(), ctl);
      sum_rank_order_bf16(data, peer.payload.data(), rank());
    });
  }

  Status all_gather(std::span<const std::byte> mine, std::span<std::byte> out,
                    const CallControl& ctl) override {
    if (out.size() != 2 * mine.size())
      return {ErrorCode::kInvalidArgument,
              fmt::format("all_gather: out has {} bytes, world 2 x {} bytes expected", out.size(),
                          mine.size())};
    return detail::capture_status([&] {
      Frame peer = exchange(TpOp::kAllGather, 0, mine, mine.size(), ctl);
      if (mine.empty()) return;
      std::memmove(out.data() + rank() * mine.size(), mine.data(), mine.size());
      std::memcpy(out.data() + (1 - rank()) * mine.size(), peer.payload.data(), mine.size());
    });
  }

  Status broadcast(std::span<std::byte> data, int root, const CallControl& ctl) override {
    if (root < 0 || root > 1)
      return {ErrorCode::kInvalidArgument, fmt::format("broadcast: root {} outside [0, 2)", root)};
    return detail::capture_status([&] {
      std::span<const std::byte> send =
          root == rank() ? std::span<const std::byte>(data) : std::span<const std::byte>();
      Frame peer = exchange(TpOp::kBroadcast, root, send, data.size(), ctl);
      if (root != rank() && !data.empty())
        std::memcpy(data.data(), peer.payload.data(), data.size());
    });
  }

  Status barrier(const CallControl& ctl) override {
    return detail::capture_status([&] { exchange(TpOp::kBarrier, 0, {}, 0, ctl); });
  }

  void abort(const std::string& reason) override {
    poison(Status(ErrorCode::kAborted, "TP aborted locally: " + reason), reason);
  }

  Status health() override {
    std::lock_guard lock(mu_);
    return failure_;
  }

 private:
  // Sends this rank's frame for the next seq and returns the peer's, checked to
  // be the same op with the same size. The peer's payload is `logical` bytes,
  // or 0 for broadcast non-roots.
  Frame exchange(TpOp op, int root, std::span<const std::byte> payload, uint64_t logical,
                 const CallControl& ctl) {
    uint64_t seq;
    {
      std::lock_guard lock(mu_);
      if (!failure_.is_ok()) throw_status(failure_);
      seq = next_seq_++;
    }
    const auto timeout = ctl.timeout.count() > 0 ? ctl.timeout : params_.op_timeout;
    const auto deadline = Clock::now() + timeout;
    const std::string what =
        fmt::format("{} #{} ({} bytes) with peer {}", tp_op_name(op), seq, logical, peer_name_);
    StopCheck stop = [&]() -> Status {
      if (ctl.abort != nullptr && ctl.abort->load())
        return {ErrorCode::kAborted, what + ": aborted by the caller"};
      std::lock_guard lock(mu_);
      return failure_;
    };
    try {
      FrameHeader h{kFrameMagic, FrameType::kData, op, static_cast<uint8_t>(root), 0, seq,
                    logical,     payload.size()};
      {
        std::lock_guard send_lock(send_mu_);
        mid_frame_ = true;
        socket_.send_all(std::as_bytes(std::span(&h, 1)), deadline, stop, what);
        socket_.send_all(payload, deadline, stop, what);
        mid_frame_ = false;
      }
      Frame peer = wait_frame(seq, deadline, stop, what, timeout);
      const FrameHeader& p = peer.header;
      if (p.op != op || p.logical_bytes != logical || p.root != root) {
        // Rank 0's call first on both ranks, so both print the same message.
        std::string mine = fmt::format("{}({} bytes, root {})", tp_op_name(op), logical, root);
        std::string theirs =
            fmt::format("{}({} bytes, root {})", tp_op_name(p.op), p.logical_bytes, p.root);
        DSV41_FAIL(kInvalidArgument,
                   "TP collective mismatch at #{}: rank 0 issued {}, rank 1 issued {}", seq,
                   rank() == 0 ? mine : theirs, rank() == 0 ? theirs : mine);
      }
      uint64_t want = (op == TpOp::kBroadcast && root == rank()) ? 0 : logical;
      if (op == TpOp::kBarrier) want = 0;
      DSV41_CHECK(peer.payload.size() == want, kCorruptFile,
                  "{}: peer sent {} payload bytes, expected {}", what, peer.payload.size(), want);
      return peer;
    } catch (const detail::Failure& f) {
      // A send that failed because the peer shut the link races the reader, which may still be
      // consuming the peer's abort frame (its reason, sent before the shutdown): give the reader
      // a moment and report the peer's reason instead of "the peer closed the connection"
      // (seen ~1 in 10 runs on a loaded 2-core machine, tests/tp/test_tp_bad_input.cpp).
      if (f.code() == ErrorCode::kIo || f.code() == ErrorCode::kAborted) {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, kPeerReasonGrace, [&] { return !failure_.is_ok(); });
        if (!failure_.is_ok()) {
          const Status s = failure_;
          lock.unlock();
          throw_status(s);
        }
      }
      poison(Status(f.code(), f.message()), f.message());
      throw;
    }
  }

  Frame wait_frame(uint64_t seq, Clock::time_point deadline, const StopCheck& stop,
                   const std::string& what, std::chrono::milliseconds timeout) {
    for (;;) {
      // A frame that arrived before a failure is still answered: a peer that detected a
      // mismatch sends its data frame before its abort frame, so both ranks report the mismatch.
      {
        std::lock_guard lock(mu_);
        auto it = inbox_.find(seq);
        if (it != inbox_.end()) {
          Frame f = std::move(it->second);
          inbox_.erase(it);
          return f;
        }
      }
      Status s = stop();
      if (!s.is_ok()) throw_status(s);
      std::unique_lock lock(mu_);
      if (inbox_.count(seq) != 0) continue;
      auto now = Clock::now();
      DSV41_CHECK(now < deadline, kTimeout, "{}: no reply within {} ms", what, timeout.count());
      cv_.wait_for(lock, std::min<Clock::duration>(kPollSlice, deadline - now));
    }
  }

  // First failure wins; the peer is told why (when the stream is at a frame
  // boundary) and the socket is shut so its reader sees EOF even if the abort
  // frame cannot be sent.
  void poison(Status s, const std::string& reason) {
    {
      std::lock_guard lock(mu_);
      if (!failure_.is_ok()) return;
      failure_ = std::move(s);
    }
    cv_.notify_all();
    // Wait a little for a heartbeat or another rank's frame to leave the wire (never blocks:
    // a sender stuck mid-frame keeps the lock, then only the shutdown below tells the peer).
    std::unique_lock send_lock(send_mu_, std::defer_lock);
    for (int i = 0; i < 200 && !send_lock.try_lock(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (send_lock.owns_lock() && !mid_frame_) {
      const std::string_view text(reason.data(), std::min<size_t>(reason.size(), kMaxAbortReason));
      FrameHeader h{kFrameMagic, FrameType::kAbort, TpOp::kBarrier, 0, 0, 0, 0, text.size()};
      StopCheck none;
      try {
        auto deadline = Clock::now() + std::chrono::milliseconds(200);
        socket_.send_all(std::as_bytes(std::span(&h, 1)), deadline, none, "abort frame");
        socket_.send_all(std::as_bytes(std::span(text.data(), text.size())), deadline, none,
                         "abort reason");
      } catch (const detail::Failure&) {
      }
    }
    socket_.shutdown_both();
  }

  // Failures seen by the reader or the heartbeat: the link, not this rank, is at fault. The peer
  // is told why as for a local failure (a corrupt frame, a silent peer): it reported only "the
  // peer closed the connection".
  void fail_link(Status s) {
    if (stopping_) return;
    const std::string reason = s.message();
    poison(std::move(s), reason);
  }

  void send_beat() {
    std::unique_lock send_lock(send_mu_, std::try_to_lock);
    if (!send_lock.owns_lock()) return;  // a data frame is being sent: that is traffic too
    {
      std::lock_guard lock(mu_);
      if (!failure_.is_ok()) return;
    }
    FrameHeader h;
    try {
      socket_.send_all(std::as_bytes(std::span(&h, 1)), Clock::now() + params_.heartbeat_timeout,
                       StopCheck{}, fmt::format("heartbeat to peer {}", peer_name_));
    } catch (const detail::Failure& f) {
      send_lock.unlock();
      fail_link(Status(f.code(), f.message()));
    }
  }

  void read_loop() {
    StopCheck stop = [this]() -> Status {
      return stopping_ ? Status(ErrorCode::kCancelled, "TP comm closing") : Status::ok();
    };
    const auto forever = Clock::time_point::max();
    const std::string what = fmt::format("frame from peer {}", peer_name_);
    try {
      for (;;) {
        Frame f;
        socket_.recv_all(std::as_writable_bytes(std::span(&f.header, 1)), forever, stop, what);
        const FrameHeader& h = f.header;
        // Type and size before anything is allocated: a beat carries nothing, an abort a short
        // reason (a corrupt beat header declaring 12 GiB was allocated, then terminated the rank).
        const uint64_t cap = h.type == FrameType::kBeat    ? 0
                             : h.type == FrameType::kAbort ? kMaxAbortReason
                             : h.type == FrameType::kData  ? kMaxPayload
                                                           : 0;
        DSV41_CHECK(h.magic == kFrameMagic &&
                        (h.type == FrameType::kBeat || h.type == FrameType::kAbort ||
                         h.type == FrameType::kData) &&
                        h.payload_bytes <= cap,
                    kCorruptFile,
                    "{}: bad header (magic {:#010x}, type {}, {} payload bytes, at most {} for "
                    "its type)",
                    what, h.magic, static_cast<int>(h.type), h.payload_bytes, cap);
        f.payload.resize(h.payload_bytes);
        for (size_t at = 0; at < f.payload.size(); at += kRecvSlice) {
          socket_.recv_all(
              std::span(f.payload).subspan(at, std::min(kRecvSlice, f.payload.size() - at)),
              forever, stop, what);
          heartbeat_->saw_traffic();
        }
        heartbeat_->saw_traffic();
        if (h.type == FrameType::kBeat) continue;
        if (h.type == FrameType::kAbort) {
          std::string reason(reinterpret_cast<const char*>(f.payload.data()), f.payload.size());
          fail_link(Status(ErrorCode::kAborted,
                           fmt::format("TP peer {} aborted: {}", peer_name_, reason)));
          return;
        }
        {
          std::lock_guard lock(mu_);
          DSV41_CHECK(inbox_.count(h.seq) == 0, kCorruptFile, "{}: data frame #{} arrived twice",
                      what, h.seq);
          inbox_[h.seq] = std::move(f);
        }
        cv_.notify_all();
      }
    } catch (const detail::Failure& f) {
      ErrorCode code = f.code() == ErrorCode::kIo ? ErrorCode::kAborted : f.code();
      fail_link(Status(code, fmt::format("TP link to peer {} lost: {}", peer_name_, f.message())));
    } catch (const std::bad_alloc&) {  // a thread's escaping exception would std::terminate
      fail_link(Status(ErrorCode::kOutOfMemory,
                       fmt::format("TP link to peer {} lost: out of host memory receiving a frame",
                                   peer_name_)));
    } catch (const std::exception& e) {
      fail_link(Status(ErrorCode::kInternal,
                       fmt::format("TP link to peer {} lost: {}", peer_name_, e.what())));
    }
  }

  const TpParams params_;
  const std::string peer_name_;
  TcpSocket socket_;
  std::atomic<bool> stopping_{false};
  std::mutex send_mu_;  // one frame at a time on the wire
  bool mid_frame_ = false;
  std::mutex mu_;  // guards failure_, inbox_, next_seq_
  std::condition_variable cv_;
  Status failure_;
  std::map<uint64_t, Frame> inbox_;
  uint64_t next_seq_ = 0;
  std::unique_ptr<Heartbeat> heartbeat_;
  std::thread reader_;
};

}  // namespace

Result<std::unique_ptr<TpComm>> connect_tp_tcp(const TpParams& params, Handshake mine,
                                               const std::atomic<bool>* abort) {
  Status valid = params.validate();
  if (!valid.is_ok()) return valid;
  if (params.world != 2)
    return Status(
        ErrorCode::kInvalidArgument,
        fmt::format("connect_tp_tcp needs world 2, got {} (use make_tp_local)", params.world));
  std::unique_ptr<TpComm> comm;
  Status s = detail::capture_status([&] {
    const auto deadline = Clock::now() + params.connect_timeout;
    StopCheck stop = [abort]() -> Status {
      return abort != nullptr && abort->load()
                 ? Status(ErrorCode::kAborted, "TP connect aborted by the caller")
                 : Status::ok();
    };
    TcpSocket socket;
    if (params.rank == 0) {
      TcpSocket listener = TcpSocket::listen_on(params.bind_address, params.port);
      socket = TcpSocket::accept_from(listener, params.peer_address, deadline, stop);
    } else {
      socket = TcpSocket::connect_to(params.bind_address, params.peer_address, params.port,
                                     deadline, stop);
    }
    mine.rank = params.rank;
    mine.world = params.world;
    exchange_handshake(socket, mine, deadline, stop);
    comm = std::make_unique<TpTcpComm>(params, std::move(socket));
  });
  if (!s.is_ok()) return s;
  return comm;
}

}  // namespace dsv41::parallel
