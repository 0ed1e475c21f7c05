// PagePool budget accounting, typed exhaustion, thread safety; SourceCache page tables.
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "core/check.hpp"
#include "kv/page_pool.hpp"
#include "kv/source_cache.hpp"

namespace dsv41::kv {

TEST_CASE("page pool: budget, reservations, typed exhaustion, reuse", "[unit][kv]") {
  PagePool pool(1000, 3500);
  pool.reserve(500, "test windows");
  const int32_t a = pool.allocate("seq A"), b = pool.allocate("seq A"), c = pool.allocate("seq A");
  PoolStats s = pool.stats();
  CHECK(s.pages_used == 3);
  CHECK(s.pages_free == 0);
  CHECK(s.used_bytes == 3500);
  try {
    pool.allocate("KV source layer 7");
    FAIL("no error");
  } catch (const detail::Failure& f) {
    CHECK(f.code() == ErrorCode::kOutOfMemory);
    CHECK_THAT(f.message(), Catch::Contains("KV source layer 7") &&
                                Catch::Contains("page of 1000 B") &&
                                Catch::Contains("3500 of the 3500 B budget"));
  }
  CHECK_THROWS_WITH(pool.reserve(1, "more windows"), Catch::Contains("more windows needs 1 B"));
  pool.data(b)[999] = 42;
  pool.free(b);
  CHECK(pool.stats().pages_free == 1);
  const int32_t d = pool.allocate("seq B");
  CHECK(d == b);  // reused
  pool.free(a);
  pool.free(c);
  pool.free(d);
  pool.unreserve(500);
  CHECK(pool.stats().used_bytes == 0);
  CHECK_THROWS_WITH(pool.unreserve(1), Catch::Contains("releasing 1 B of 0 B"));
  CHECK_THROWS_WITH(pool.free(77), Catch::Contains("freeing page 77"));
}

TEST_CASE("page pool: concurrent allocate/free keeps the count", "[unit][kv]") {
  PagePool pool(64, 64 * 400);
  std::vector<std::thread> th;
  for (int t = 0; t < 4; ++t)
    th.emplace_back([&pool] {
      for (int r = 0; r < 200; ++r) {
        std::vector<int32_t> got;
        for (int i = 0; i < 100; ++i) got.push_back(pool.allocate("thread"));
        for (int32_t p : got) pool.free(p);
      }
    });
  for (std::thread& t : th) t.join();
  CHECK(pool.stats().pages_used == 0);
}

TEST_CASE("source cache: page table grows, truncates, copies deeply", "[unit][kv]") {
  auto pool = std::make_shared<PagePool>(kEntriesPerPage * (288 + 68), PagePool::kUnbounded);
  SourceCache c(pool, 3, 512, 128);
  std::vector<float> e(512), k(128), back(512);
  for (int j = 0; j < 130; ++j) {
    std::fill(e.begin(), e.end(), 0.0f);
    e[j % 512] = static_cast<float>(j % 7) * 0.5f;  // one FP4 code per entry
    std::fill(k.begin(), k.end(), 0.0f);
    k[0] = -static_cast<float>(j % 5);
    c.append_index(k.data());
    c.append_compressed(e.data());
  }
  CHECK(c.pages() == 3);
  CHECK(pool->stats().pages_used == 3);
  c.read_compressed(129, back.data());
  CHECK(back[129] == 1.5f);  // (129 % 7) · 0.5
  SourceCache copy = c;
  CHECK(pool->stats().pages_used == 6);
  c.truncate(64);
  CHECK(c.pages() == 1);
  CHECK(pool->stats().pages_used == 4);
  CHECK_THROWS_WITH(c.read_compressed(64, back.data()),
                    Catch::Contains("compressed entry 64 of 64"));
  copy.read_index(129, k.data());
  CHECK(k[0] == -4.0f);
  auto tiny = std::make_shared<PagePool>(100, PagePool::kUnbounded);
  CHECK_THROWS_WITH(SourceCache(tiny, 1, 512, 128), Catch::Contains("cannot hold 64 entries"));
}

}  // namespace dsv41::kv
