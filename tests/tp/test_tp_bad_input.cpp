// Bad tensor-parallel input gets a clear error naming what is wrong (docs/tp.md): server flags,
// ModelParams.tp, a follower receiving ops it cannot apply (it aborts the link with the
// reason, so rank 0 fails at once instead of waiting for a collective), and image rows that do
// not fit their flags (refused on rank 0 before the follower is told).
#include <catch2/catch.hpp>
#include <future>

#include "config.hpp"
#include "core/check.hpp"
#include "dsv41/model.hpp"
#include "golden/model/golden_case.hpp"
#include "kv/page_pool.hpp"
#include "model/moe.hpp"
#include "model/sequence_mirror.hpp"
#include "model/transformer.hpp"
#include "parallel/tp_tcp.hpp"
#include "runtime/forward_backend.hpp"
#include "runtime/mirrored_backend.hpp"
#include "runtime/tp_follower.hpp"
#include "support/fixtures.hpp"
#include "tp_script.hpp"

using namespace dsv41;

namespace {

Status parse(std::vector<std::string> args) {
  args.insert(args.begin(), {"dsv41-server", "--model", "m"});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  Result<server::ParsedArgs> r = server::parse_args(static_cast<int>(argv.size()), argv.data());
  if (!r) return r.status();
  return r->config.validate();
}

// Rank 1 of tiny8 on loopback port `port`, in a thread: a follower over its CPU backend; the
// future holds run_follower's Status.
std::future<Status> start_follower(const std::string& dir, uint16_t port) {
  return std::async(std::launch::async, [dir, port]() -> Status {
    auto comm =
        parallel::connect_tp_tcp(tp_test::loopback_params(1, port), tp_test::test_handshake());
    if (!comm) return comm.status();
    std::unique_ptr<Transformer> m = Transformer::load(dir, 1, comm->get());
    return run_follower(*make_cpu_backend(*m), **comm, m->config().text.hidden_size, nullptr);
  });
}

// Rank 0 of tiny8 (its link and shard, on this thread) and rank 1 as start_follower's thread.
struct RankPair {
  std::future<Status> follower;
  std::unique_ptr<parallel::TpComm> comm;
  std::unique_ptr<Transformer> model;
};
RankPair start_pair(const std::string& dir) {
  const uint16_t port = tp_test::free_port();
  RankPair p;
  p.follower = start_follower(dir, port);
  auto comm =
      parallel::connect_tp_tcp(tp_test::loopback_params(0, port), tp_test::test_handshake());
  REQUIRE(comm.is_ok());
  p.comm = std::move(*comm);
  p.model = Transformer::load(dir, 1, p.comm.get());
  return p;
}

}  // namespace

TEST_CASE("tp bad input: server flags are checked, naming the flag", "[tp][server]") {
  REQUIRE(parse({}).is_ok());
  REQUIRE(parse({"--rank", "0", "--peer", "10.231.0.2", "--tp-bind", "10.231.0.1"}).is_ok());
  REQUIRE(parse({"--rank", "1"}).message() == "--rank (DSV41_RANK) = 1 needs --peer");
  REQUIRE(parse({"--rank", "2", "--peer", "10.231.0.1", "--tp-bind", "10.231.0.2"}).message() ==
          "--rank (DSV41_RANK) = 2 must be 0 or 1");
  REQUIRE(parse({"--rank", "1", "--peer", "10.231.0.1:29500"}).message() ==
          "--tp-bind (DSV41_TP_BIND) is required with --peer (this rank's address)");
  REQUIRE(parse({"--peer", "10.231.0.1:x", "--tp-bind", "10.231.0.2"}).message() ==
          "--peer (DSV41_PEER) = '10.231.0.1:x': port 'x' must be in [1, 65535]");
  REQUIRE(parse({"--peer", "10.231.0.1", "--tp-bind", "10.231.0.2", "--tp-port", "0"}).message() ==
          "--tp-port (DSV41_TP_PORT) = 0 must be in [1, 65535]");
  REQUIRE(
      parse({"--peer", "10.231.0.1", "--tp-bind", "10.231.0.2", "--tp-heartbeat-timeout-ms", "50"})
          .message() ==
      "--tp-heartbeat-timeout-ms (DSV41_TP_HEARTBEAT_TIMEOUT_MS) = 50 must "
      "be >= 100");
}

TEST_CASE("tp bad input: ModelParams.tp is validated before anything loads", "[tp][runtime]") {
  ModelParams mp;
  mp.model_dir = test::fixture("golden/tiny8");
  mp.tp.world = 0;
  REQUIRE(Model::load(mp).status().message() == "ModelParams.tp.world = 0 must be 1 or 2");
  mp.tp.world = 2;
  mp.tp.rank = 1;
  mp.tp.bind_address = "0.0.0.0";
  mp.tp.peer_address = "10.231.0.1";
  const Status s = Model::load(mp).status();
  REQUIRE(s.code() == ErrorCode::kInvalidArgument);
  REQUIRE_THAT(s.message(), Catch::StartsWith("ModelParams.tp: "));
  REQUIRE_THAT(s.message(), Catch::Contains("bind_address"));
  mp.tp = {};
  REQUIRE(Model::load(mp)->run_tp_follower().code() == ErrorCode::kInvalidArgument);
}

namespace {

// Rank 0 as raw broadcasts to a follower thread on tiny8: hand-made ops the runtime would never
// send, and the follower's refusal.
struct RawRank0 {
  std::future<Status> follower;
  std::unique_ptr<parallel::TpComm> comm;

  RawRank0() {
    const uint16_t port = tp_test::free_port();
    follower = start_follower(test::fixture("golden/tiny8"), port);
    auto c = parallel::connect_tp_tcp(tp_test::loopback_params(0, port), tp_test::test_handshake());
    REQUIRE(c.is_ok());
    comm = std::move(*c);
  }
  template <typename T>
  void send(std::span<T> values) {
    const Status st = comm->broadcast(std::as_writable_bytes(values), 0);
    INFO(st.to_string());
    REQUIRE(st.is_ok());
  }
  void send(MirrorHeader h) { send(std::span(&h, 1)); }
  void open_sequence(uint64_t id) {
    MirrorHeader open;
    open.op = MirrorOp::kNew;
    open.id = id;
    open.max_context = 64;
    send(open);
  }
  // The follower ends with `message`; rank 0's next call fails with it.
  void expect_refusal(const std::string& message) {
    const Status fs = follower.get();
    REQUIRE(fs.message() == message);
    const Status s0 = comm->barrier();
    REQUIRE(s0.code() == ErrorCode::kAborted);
    REQUIRE_THAT(s0.message(), Catch::Contains(message.substr(message.find(": ") + 2)));
  }
};

}  // namespace

TEST_CASE("tp bad input: a follower refuses an op it cannot apply and aborts the link",
          "[tp][model]") {
  RawRank0 r;
  // A forward of a sequence the follower never saw created.
  MirrorHeader h;
  h.op = MirrorOp::kForward;
  h.id = 42;
  h.n_tokens = 1;
  r.send(h);
  int32_t tok = 5;
  r.send(std::span(&tok, 1));
  r.expect_refusal("TP follower: forward of unknown sequence 42");
}

TEST_CASE("tp bad input: a follower refuses a fork onto a live id and a release of an unknown one",
          "[tp][model]") {
  {  // The two ranks' sequence tables disagree: named, not a silent replace.
    RawRank0 r;
    r.open_sequence(7);
    r.open_sequence(8);
    MirrorHeader fork;
    fork.op = MirrorOp::kFork;
    fork.id = 8;
    fork.arg = 7;
    r.send(fork);
    r.expect_refusal("TP follower: fork onto sequence 8, which exists");
  }
  {
    RawRank0 r;
    MirrorHeader release;
    release.op = MirrorOp::kRelease;
    release.id = 9;
    r.send(release);
    r.expect_refusal("TP follower: release of sequence 9, which does not exist");
  }
  // A forward announcing more tokens than the sequence can hold (or more image rows than
  // tokens): refused from the header, before 4 GiB of ids would be allocated.
  RawRank0 r;
  r.open_sequence(3);
  MirrorHeader h;
  h.op = MirrorOp::kForward;
  h.id = 3;
  h.n_tokens = 1u << 30;
  r.send(h);
  r.expect_refusal(
      "TP follower: forward of sequence 3 announces 1073741824 tokens and 0 image rows, with room "
      "for 64 tokens");
}

TEST_CASE("tp bad input: a follower refuses image rows that disagree with their flags",
          "[tp][model]") {
  RawRank0 r;
  r.open_sequence(1);
  // The header announces 2 image rows; the flags mark 1 position.
  MirrorHeader h;
  h.op = MirrorOp::kForward;
  h.id = 1;
  h.n_tokens = 3;
  h.image_rows = 2;
  r.send(h);
  std::vector<int32_t> ids{5, 6, 7};
  std::vector<uint8_t> flags{0, 1, 0};
  std::vector<float> rows(2 * 96, 0.5f);  // tiny8 hidden_size 96
  r.send(std::span(ids));
  r.send(std::span(flags));
  r.send(std::span(rows));
  r.expect_refusal("TP follower: forward of sequence 1 flags 1 image positions, its header says 2");
}

TEST_CASE("tp bad input: a follower refuses a draft round at the wrong position", "[tp][model]") {
  RawRank0 r;
  r.open_sequence(1);
  MirrorHeader h;
  h.op = MirrorOp::kDraft;
  h.id = 1;
  h.arg = 5;  // next
  h.pos0 = 3;
  r.send(h);
  r.expect_refusal("TP follower: sequence 1 is at position 0, rank 0 drafts at 3");
}

TEST_CASE("tp bad input: image rows that do not fit their flags fail on rank 0 alone",
          "[tp][runtime]") {
  // The mirrored backend checks the flags and the embedding rows before the follower is told;
  // the link then still carries a good image forward, whose logits match one unsharded model's.
  const std::string dir = test::fixture("golden/tiny8");
  RankPair pair = start_pair(dir);
  Transformer* m = pair.model.get();
  const int64_t V = m->config().text.vocab_size, D = m->config().text.hidden_size;
  std::unique_ptr<Transformer> whole = Transformer::load(dir, 1);
  {
    std::unique_ptr<ForwardBackend> b =
        make_mirrored_backend(make_cpu_backend(*m), *pair.comm, V, D);
    REQUIRE(b->takes_image_embeddings());
    std::unique_ptr<BackendSequence> seq = b->new_sequence(StateOptions{});
    const std::vector<int32_t> ids{5, 6, 7};
    const std::vector<uint8_t> two{1, 1}, flags{0, 1, 1};
    std::vector<float> rows(static_cast<size_t>(2 * D));
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = 0.01f * static_cast<float>(i % 17) - 0.08f;
    REQUIRE_THROWS_WITH(b->forward_image(*seq, ids, two, rows, true),
                        "forward: 2 image flags for 3 tokens");
    REQUIRE_THROWS_WITH(
        b->forward_image(*seq, ids, flags, std::span(rows).first(static_cast<size_t>(D)), true),
        "forward: 96 image embedding values for 2 image positions of width 96");
    REQUIRE(seq->pos() == 0);
    REQUIRE(pair.comm->health().is_ok());
    const std::vector<float> got = b->forward_image(*seq, ids, flags, rows, true);
    SequenceState st = whole->new_sequence();
    const std::vector<float> want = whole->forward(st, ids, flags, rows);
    REQUIRE(got.size() == want.size());
    REQUIRE(test::max_abs_diff(got.data(), want.data(), want.size()) <= 2e-3);
    // The follower's state advanced with rank 0's: a text forward from position 3 pairs up.
    const std::vector<float> next = b->forward(*seq, std::vector<int32_t>{8}, true);
    const std::vector<float> want_next = whole->forward(st, std::vector<int32_t>{8});
    REQUIRE(test::max_abs_diff(next.data(), want_next.data(), want_next.size()) <= 2e-3);
  }
  REQUIRE(pair.follower.get().is_ok());
}

TEST_CASE("tp bad input: rank 0's mirrored backend fails a bad forward alone and keeps the link",
          "[tp][runtime]") {
  // Rank 0 = the runtime's wrapping (make_mirrored_backend over the CPU backend), rank 1 =
  // run_follower over its CPU backend. Calls that would fail (bad id, past the context, a
  // rollback past the depth) must fail on rank 0 before the follower is told; the link then
  // still serves a forward whose logits match one unsharded model's.
  const std::string dir = test::fixture("golden/tiny8");
  RankPair pair = start_pair(dir);
  std::future<Status>& follower = pair.follower;
  parallel::TpComm* comm = pair.comm.get();
  Transformer* m = pair.model.get();
  const int64_t V = m->config().text.vocab_size;
  std::unique_ptr<Transformer> whole = Transformer::load(dir, 1);
  {
    std::unique_ptr<ForwardBackend> b =
        make_mirrored_backend(make_cpu_backend(*m), *comm, V, m->config().text.hidden_size);
    std::unique_ptr<BackendSequence> seq = b->new_sequence(StateOptions{.max_context = 8});
    const std::vector<int32_t> bad{1, static_cast<int32_t>(V)};
    REQUIRE_THROWS_WITH(b->forward(*seq, bad, true),
                        "forward: token id 600 at position 1 (ids[1]) is outside the vocabulary "
                        "of 600");
    const std::vector<int32_t> nine(9, 3);
    REQUIRE_THROWS_WITH(b->forward(*seq, nine, true),
                        "forward: positions up to 9 exceed the maximum context of 8 tokens");
    REQUIRE_THROWS(seq->rollback(1));  // nothing to undo: local error, nothing sent
    REQUIRE_THROWS_WITH(b->forward_sample(*seq, bad, sampling::SamplePlan{}),
                        "the cpu backend does not sample on a device");
    // The KV budget runs out on rank 0 (the follower's pool is private): refused before the
    // follower is told. Budget = what 3 tokens take; 70 tokens need more compressed pages.
    const std::vector<int32_t> ids{5, 6, 7};
    uint64_t need = 0;
    {
      auto probe = make_kv_pool(m->config(), kv::PagePool::kUnbounded);
      SequenceState p = whole->new_sequence(StateOptions{.pool = probe});
      (void)whole->forward(p, ids);
      need = probe->stats().used_bytes;
    }
    std::unique_ptr<BackendSequence> tight =
        b->new_sequence(StateOptions{.pool = make_kv_pool(m->config(), need)});
    const std::vector<int32_t> seventy(70, 4);
    try {
      (void)b->forward(*tight, seventy, true);
      FAIL("a forward past the KV budget succeeded");
    } catch (const detail::Failure& e) {
      REQUIRE(e.code() == ErrorCode::kOutOfMemory);
    }
    REQUIRE(tight->pos() == 0);
    const std::vector<float> got = b->forward(*tight, ids, true);
    // A fork with more room than its source (the follower's twin must get it too: positions
    // past 8 follow).
    (void)b->forward(*seq, ids, true);
    std::unique_ptr<BackendSequence> wide = seq->clone(16);
    const std::vector<int32_t> more{8, 9, 10, 11, 12, 13, 14};  // positions 3..9 > 8
    const std::vector<float> got2 = b->forward(*wide, more, false);
    SequenceState st = whole->new_sequence();
    const std::vector<float> want = whole->forward(st, ids);
    const std::vector<float> want2 = whole->forward(st, more);
    REQUIRE(got.size() == want.size());
    REQUIRE(test::max_abs_diff(got.data(), want.data(), want.size()) <= 2e-3);
    REQUIRE(got2.size() == static_cast<size_t>(V));
    REQUIRE(test::max_abs_diff(got2.data(), want2.data() + (more.size() - 1) * V, got2.size()) <=
            2e-3);
  }  // the mirrored backend's destruction tells the follower to stop
  REQUIRE(follower.get().is_ok());
}

namespace {

// Routed experts that fail (rank 0 only): a forward fails after the follower started it.
struct FailingExperts final : ExpertProvider {
  void forward(int, int, const float*, int64_t, const float*, float*, ThreadPool*) const override {
    throw detail::Failure(ErrorCode::kInternal, "test: expert failure", __FILE__, __LINE__);
  }
};

}  // namespace

TEST_CASE("tp bad input: rank 0 failing a forward mid-pass aborts the link with the reason",
          "[tp][runtime]") {
  const std::string dir = test::fixture("golden/tiny8");
  RankPair pair = start_pair(dir);
  std::future<Status>& follower = pair.follower;
  parallel::TpComm* comm = pair.comm.get();
  Transformer* m = pair.model.get();
  FailingExperts failing;
  m->set_expert_provider(&failing);
  std::unique_ptr<ForwardBackend> b = make_mirrored_backend(
      make_cpu_backend(*m), *comm, m->config().text.vocab_size, m->config().text.hidden_size);
  std::unique_ptr<BackendSequence> seq = b->new_sequence(StateOptions{});
  REQUIRE_THROWS_WITH(b->forward(*seq, std::vector<int32_t>{5, 6}, true),
                      Catch::Contains("test: expert failure"));
  // The follower ends at once with the reason instead of waiting for a collective.
  const Status fs = follower.get();
  INFO(fs.to_string());
  REQUIRE(fs.code() == ErrorCode::kAborted);
  REQUIRE_THAT(fs.message(), Catch::Contains("TP rank 0 failed a forward after the follower "
                                             "started it") &&
                                 Catch::Contains("test: expert failure"));
  seq.reset();
  b.reset();  // release / stop on a dead link: swallowed
}
