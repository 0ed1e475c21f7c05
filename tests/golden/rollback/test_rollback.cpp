// rollback(n) is exact: after feeding n tokens, rolling them back and re-feeding, the logits are
// bit-identical to never having rolled back (docs/state.md). Plus the shared pool's typed errors.
#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "../model/golden_case.hpp"
#include "core/check.hpp"
#include "model/attention/attention_state.hpp"

namespace dsv41::test {
namespace {

std::vector<int32_t> slice(const std::vector<int32_t>& v, int64_t a, int64_t b) {
  return std::vector<int32_t>(v.begin() + a, v.begin() + b);
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

ErrorCode code_of(const std::function<void()>& fn, std::string* msg) {
  try {
    fn();
  } catch (const detail::Failure& f) {
    *msg = f.message();
    return f.code();
  }
  return ErrorCode::kOk;
}

// p: position after the n tokens that get rolled back; garbage: feed other tokens one at a
// time before rolling back (instead of the same n tokens as one chunk).
void check_rollback(GoldenCase& g, const std::vector<int32_t>& prompt, int64_t p, int64_t n,
                    bool garbage) {
  Transformer& m = g.model();
  const std::string where = g.dir() + " p=" + std::to_string(p) + " n=" + std::to_string(n) +
                            (garbage ? " (other tokens, one by one)" : " (same chunk)");
  INFO(where);
  const auto head = slice(prompt, 0, p - n), redo = slice(prompt, p - n, p),
             tail = slice(prompt, p, p + 3);
  SequenceState a = m.new_sequence();
  m.forward(a, head);
  const std::vector<float> a1 = m.forward(a, redo), a2 = m.forward(a, tail);

  SequenceState b = m.new_sequence();
  m.forward(b, head);
  if (garbage) {
    for (int64_t i = 0; i < n; ++i) {
      const int32_t other[1] = {prompt[(i * 7 + 3) % prompt.size()]};
      m.forward(b, other);
    }
  } else {
    m.forward(b, redo);
  }
  b.rollback(n);
  REQUIRE(b.pos == p - n);
  REQUIRE(b.tokens == head);
  const std::vector<float> b1 = m.forward(b, redo), b2 = m.forward(b, tail);
  CHECK(bit_equal(a1, b1));
  CHECK(bit_equal(a2, b2));
  CHECK(a.attn.options.pool->stats().pages_used == b.attn.options.pool->stats().pages_used);
}

void rollback_case(const std::string& name) {
  GoldenCase g(name);
  const std::vector<int32_t> prompt = g.i32("prompt1.input_ids");
  REQUIRE(prompt.size() >= 27);
  for (int64_t n : {1, 2, 5, 16})
    for (int64_t p : {int64_t{22}, int64_t{23}})
      for (bool garbage : {false, true}) check_rollback(g, prompt, p, n, garbage);
}

}  // namespace

TEST_CASE("rollback: re-feeding after rollback(n) is bit-identical (tiny8)", "[golden][rollback]") {
  rollback_case("tiny8");
}

TEST_CASE("rollback: re-feeding after rollback(n) is bit-identical (tiny40)",
          "[golden][rollback]") {
  rollback_case("tiny40");
}

TEST_CASE("rollback: limits are named errors", "[golden][rollback]") {
  GoldenCase g("tiny8");
  Transformer& m = g.model();
  const std::vector<int32_t> prompt = g.i32("prompt1.input_ids");
  SequenceState st = m.new_sequence();
  m.forward(st, slice(prompt, 0, 20));
  std::string msg;
  CHECK(code_of([&] { st.rollback(17); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("max_rollback = 16"));
  st.rollback(16);
  CHECK(code_of([&] { st.rollback(1); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("only 0 can be undone"));
  m.forward(st, slice(prompt, 4, 7));
  CHECK(code_of([&] { st.rollback(4); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("only 3 can be undone"));
  st.rollback(3);
  CHECK(st.pos == 4);

  SequenceState small = m.new_sequence({.max_rollback = 2});
  m.forward(small, slice(prompt, 0, 5));
  CHECK(code_of([&] { small.rollback(3); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK_THAT(msg, Catch::Contains("max_rollback = 2"));
}

TEST_CASE("shared pool: exhaustion and over-long prompts are typed, other sequences intact",
          "[golden][rollback]") {
  GoldenCase g("tiny8");
  Transformer& m = g.model();
  const std::vector<int32_t> prompt = g.i32("prompt1.input_ids");
  // Reference logits from a private pool.
  SequenceState ref = m.new_sequence();
  const std::vector<float> want = m.forward(ref, prompt);
  const uint64_t windows = ref.attn.window_bytes();
  const uint64_t pages_needed = ref.attn.options.pool->stats().pages_used;
  REQUIRE(pages_needed > 0);

  // Room for one sequence (windows + its pages) and a second sequence's windows only.
  auto pool = make_kv_pool(m.config(), 0);
  const uint64_t page = pool->page_bytes();
  pool = make_kv_pool(m.config(), 2 * windows + pages_needed * page);
  SequenceState a = m.new_sequence({.pool = pool});
  SequenceState b = m.new_sequence({.pool = pool});
  CHECK(pool->stats().reserved_bytes == 2 * windows);
  const std::vector<float> a_logits = m.forward(a, prompt);
  CHECK(bit_equal(a_logits, want));
  CHECK(pool->stats().pages_used == pages_needed);
  std::string msg;
  CHECK(code_of([&] { m.forward(b, prompt); }, &msg) == ErrorCode::kOutOfMemory);
  CHECK_THAT(msg, Catch::Contains("KV pool exhausted") && Catch::Contains("budget"));
  CHECK(b.pos == 0);  // nothing was fed
  CHECK(pool->stats().pages_used == pages_needed);
  CHECK(code_of([&] { SequenceState c = m.new_sequence({.pool = pool}); }, &msg) ==
        ErrorCode::kOutOfMemory);
  CHECK_THAT(msg, Catch::Contains("window rings"));
  // a is intact: continuing it equals continuing the private reference.
  const int32_t next[1] = {prompt[3]};
  CHECK(bit_equal(m.forward(a, next), m.forward(ref, next)));
  // Ending a returns its pages; b now fits and matches the reference.
  a = SequenceState();
  CHECK(pool->stats().reserved_bytes == windows);
  CHECK(pool->stats().pages_used == 0);
  CHECK(bit_equal(m.forward(b, prompt), want));

  SequenceState shortctx = m.new_sequence({.max_context = 10});
  CHECK(code_of([&] { m.forward(shortctx, prompt); }, &msg) == ErrorCode::kContextOverflow);
  CHECK_THAT(msg, Catch::Contains("maximum context of 10"));
}

}  // namespace dsv41::test
