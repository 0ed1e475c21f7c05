// One-shot all-reduce protocol over an in-process fake RDMA transport: two
// threads, two regions, post_write = copy into the peer's region (8-byte flags
// as release stores, like an RC QP that delivers writes in order). Covers slot
// reuse, rank-order sums, timeout, abort, mismatch.
#include <fmt/format.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "parallel/oneshot_allreduce.hpp"
#include "quant/dtype.hpp"

using namespace dsv41;
using namespace dsv41::parallel;
using namespace std::chrono_literals;

namespace {

class FakeRdma final : public OneShotTransport {
 public:
  explicit FakeRdma(size_t bytes)
      : storage_(static_cast<std::byte*>(std::aligned_alloc(kOneShotAlign, bytes))), bytes_(bytes) {
    std::memset(storage_.get(), 0, bytes);
  }
  void connect(FakeRdma* peer) { peer_ = peer; }
  std::span<std::byte> local_region() override { return {storage_.get(), bytes_}; }
  void post_write(size_t local_offset, size_t remote_offset, size_t bytes) override {
    ++posted;
    if (drop_writes) return;
    REQUIRE(local_offset + bytes <= bytes_);
    REQUIRE(remote_offset + bytes <= peer_->bytes_);
    std::byte* dst = peer_->storage_.get() + remote_offset;
    const std::byte* src = storage_.get() + local_offset;
    if (bytes == sizeof(uint64_t) && remote_offset % 8 == 0) {
      uint64_t v;
      std::memcpy(&v, src, 8);
      std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(dst))
          .store(v, std::memory_order_release);
    } else {
      std::memcpy(dst, src, bytes);
    }
  }
  void post_flag(size_t remote_offset, uint64_t value) override {
    ++posted;
    if (drop_writes) return;
    REQUIRE(remote_offset % 8 == 0);
    REQUIRE(remote_offset + 8 <= peer_->bytes_);
    REQUIRE(value == ++flags_posted);  // the contract the ibverbs transport relies on
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(peer_->storage_.get() + remote_offset))
        .store(value, std::memory_order_release);
  }
  Status poll() override { return poll_status; }

  std::atomic<bool> drop_writes{false};
  std::atomic<int> posted{0};
  Status poll_status;

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> storage_;
  size_t bytes_;
  FakeRdma* peer_ = nullptr;
  uint64_t flags_posted = 0;
};

struct Pair {
  explicit Pair(size_t max_bytes)
      : plan(*plan_oneshot(max_bytes)),
        t0(plan.total_bytes),
        t1(plan.total_bytes),
        r0(plan, t0, 0),
        r1(plan, t1, 1) {
    t0.connect(&t1);
    t1.connect(&t0);
  }
  OneShotPlan plan;
  FakeRdma t0, t1;
  OneShotAllReduce r0, r1;
};

}  // namespace

TEST_CASE("one-shot plan: aligned, disjoint slots, bounded size", "[unit][parallel]") {
  auto p = plan_oneshot(48 * 1024);  // one decode all-reduce: 4 rows x 5120 x fp32 = 80 KiB max
  REQUIRE(p.is_ok());
  REQUIRE(p->recv_stride % kOneShotAlign == 0);
  REQUIRE(p->recv_stride >= kOneShotHeaderBytes + 48 * 1024 + kOneShotFlagBytes);
  REQUIRE(p->recv_stride == 53248);  // 64 + 49152 + 64 rounded up to 13 pages
  REQUIRE(p->total_bytes == 4 * p->recv_stride);
  REQUIRE(p->send_slot(0) == 2 * p->recv_stride);
  REQUIRE(p->flag_offset() + kOneShotFlagBytes == p->recv_stride);
  REQUIRE(p->flag_offset() >= kOneShotHeaderBytes + 48 * 1024);
  REQUIRE(plan_oneshot(0).status().code() == ErrorCode::kInvalidArgument);
  auto big = plan_oneshot(kOneShotMaxBytes + 1);
  REQUIRE(big.status().message().find("max_bytes 16777217") != std::string::npos);
}

TEST_CASE("one-shot all-reduce: 200 ops, both ranks bit-identical rank-order sums",
          "[unit][parallel]") {
  Pair p(4096 * sizeof(float));
  auto body = [&](OneShotAllReduce& r, int rank, std::vector<std::string>* errors) {
    for (int op = 0; op < 200; ++op) {
      size_t n = 1 + (op * 37) % 4096;
      std::vector<float> f(n);
      for (size_t i = 0; i < n; ++i) f[i] = 0.1f * static_cast<float>(i + op) * (rank ? -3.f : 1.f);
      Status s = r.all_reduce_sum_f32(f, 5000ms);
      if (!s.is_ok()) {
        errors->push_back(s.to_string());
        return;
      }
      for (size_t i = 0; i < n; ++i) {
        float a = 0.1f * static_cast<float>(i + op), b = a * -3.f;
        if (f[i] != a + b) {
          errors->push_back(fmt::format("op {} elem {}: {} != {}", op, i, f[i], a + b));
          return;
        }
      }
    }
  };
  std::vector<std::string> e0, e1;
  std::thread t([&] { body(p.r1, 1, &e1); });
  body(p.r0, 0, &e0);
  t.join();
  INFO((e0.empty() ? "" : e0[0]) << (e1.empty() ? "" : e1[0]));
  REQUIRE(e0.empty());
  REQUIRE(e1.empty());
  REQUIRE(p.r0.completed_ops() == 200);
  REQUIRE(p.r1.state() == OneShotState::kIdle);
  REQUIRE(p.t0.posted == 400);  // data + flag per op: one round trip, nothing else
}

TEST_CASE("one-shot all-reduce bf16: round once after an fp32 sum", "[unit][parallel]") {
  Pair p(1024);
  // 1 + 2^-8 is not a bf16; each operand is exact, the sum rounds once (to even
  // -> 1.0).
  std::vector<uint16_t> a{f32_to_bf16(1.0f), f32_to_bf16(3.0f)};
  std::vector<uint16_t> b{f32_to_bf16(0.00390625f), f32_to_bf16(-1.0f)};
  Status s1;
  std::thread t([&] { s1 = p.r1.all_reduce_sum_bf16(b, 5000ms); });
  Status s0 = p.r0.all_reduce_sum_bf16(a, 5000ms);
  t.join();
  REQUIRE(s0.is_ok());
  REQUIRE(s1.is_ok());
  REQUIRE(a == b);
  REQUIRE(bf16_to_f32(a[0]) == 1.0f);
  REQUIRE(bf16_to_f32(a[1]) == 2.0f);
}

TEST_CASE("one-shot all-reduce: silent peer -> kTimeout, then failed for good",
          "[unit][parallel]") {
  Pair p(256);
  p.t1.drop_writes = true;  // rank 1 posts but nothing arrives (cut link)
  std::vector<float> x(8, 1.f), y(8, 2.f);
  std::thread t([&] { (void)p.r1.all_reduce_sum_f32(y, 200ms); });
  auto t0 = std::chrono::steady_clock::now();
  Status s = p.r0.all_reduce_sum_f32(x, 200ms);
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  t.join();
  REQUIRE(s.code() == ErrorCode::kTimeout);
  REQUIRE(s.message().find("no flag from peer rank 1 within 200 ms") != std::string::npos);
  REQUIRE(ms.count() < 2000);
  REQUIRE(p.r0.state() == OneShotState::kFailed);
  Status again = p.r0.all_reduce_sum_f32(x, 200ms);
  REQUIRE(again.code() == ErrorCode::kTimeout);
  REQUIRE(p.t0.posted == 2);  // the failed op's writes only
}

TEST_CASE("one-shot all-reduce: abort flag and transport errors end the wait", "[unit][parallel]") {
  Pair p(256);
  std::vector<float> x(4, 1.f);
  std::atomic<bool> cancel{true};
  Status s = p.r0.all_reduce_sum_f32(x, 10000ms, &cancel);
  REQUIRE(s.code() == ErrorCode::kAborted);
  REQUIRE(s.message().find("aborted by the caller") != std::string::npos);

  Pair q(256);
  q.t0.poll_status = Status(ErrorCode::kIo, "completion error: IBV_WC_RETRY_EXC_ERR");
  s = q.r0.all_reduce_sum_f32(x, 10000ms);
  REQUIRE(s.code() == ErrorCode::kIo);
  REQUIRE(s.message().find("RETRY_EXC") != std::string::npos);
}

TEST_CASE("one-shot all-reduce: oversize and mismatched ops are named", "[unit][parallel]") {
  Pair p(64);
  std::vector<float> big(17);
  Status s = p.r0.all_reduce_sum_f32(big, 100ms);
  REQUIRE(s.code() == ErrorCode::kInvalidArgument);
  REQUIRE(s.message().find("68 bytes exceeds the planned 64") != std::string::npos);
  REQUIRE(p.r0.state() == OneShotState::kIdle);  // nothing posted
  REQUIRE(p.t0.posted == 0);

  std::vector<float> x(4, 1.f);
  std::vector<uint16_t> y(4, 0);
  Status s1;
  std::thread t([&] { s1 = p.r1.all_reduce_sum_bf16(y, 5000ms); });
  Status s0 = p.r0.all_reduce_sum_f32(x, 5000ms);
  t.join();
  REQUIRE(s0.code() == ErrorCode::kInvalidArgument);
  REQUIRE(s1.code() == ErrorCode::kInvalidArgument);
  REQUIRE(s0.message().find("rank 1 sent bf16 8 bytes") != std::string::npos);
  REQUIRE(s1.message().find("rank 0 sent f32 16 bytes") != std::string::npos);
}
