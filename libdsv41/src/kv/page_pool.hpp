// PagePool: the byte budget for per-sequence KV state, shared by every sequence of a model
// (spec model-architecture.md §2.6/§2.8). It hands out fixed-size pages for the growing caches
// (compressed KV + index keys of the KV sources, see source_cache.hpp) and accounts fixed-size
// reservations (the window rings) against the same budget. Thread-safe: sessions on different
// threads allocate and free concurrently. Exhaustion throws kOutOfMemory naming the budget, what
// is in use and the request; nothing is allocated in that case.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace dsv41::kv {

// Entries per page. 64 × (288 + 68) B = 22,784 B with the released widths: small enough that
// a short sequence wastes < 23 KB per KV source, large enough that a 262,144-token sequence
// needs only 1,024 pages per ratio-4 source (page tables stay tiny, allocation rare).
inline constexpr int kEntriesPerPage = 64;

struct PoolStats {
  uint64_t budget_bytes = 0;  // UINT64_MAX = unbounded
  uint64_t page_bytes = 0;
  uint64_t pages_used = 0;
  uint64_t pages_free = 0;      // pages that still fit in the budget (incl. cached free pages)
  uint64_t reserved_bytes = 0;  // fixed reservations (window rings)
  uint64_t used_bytes = 0;      // pages_used × page_bytes + reserved_bytes
};

class PagePool {
 public:
  static constexpr uint64_t kUnbounded = UINT64_MAX;

  // page_bytes > 0; budget_bytes = kUnbounded for a private pool without a limit.
  PagePool(uint64_t page_bytes, uint64_t budget_bytes);
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  uint64_t page_bytes() const { return page_bytes_; }
  uint64_t budget_bytes() const { return budget_; }

  // A page of page_bytes() bytes (contents unspecified) and its id; kOutOfMemory when the budget
  // cannot hold another page. `what` names the requester in the error.
  int32_t allocate(const char* what);
  void free(int32_t page);
  uint8_t* data(int32_t page);
  const uint8_t* data(int32_t page) const;

  // Fixed-size accounting (no memory is handed out): kOutOfMemory when it does not fit.
  void reserve(uint64_t bytes, const char* what);
  void unreserve(uint64_t bytes);

  PoolStats stats() const;

 private:
  uint64_t used_locked() const { return pages_used_ * page_bytes_ + reserved_; }

  const uint64_t page_bytes_;
  const uint64_t budget_;
  mutable std::mutex mu_;
  // Page storage is created on first use and kept for reuse; pointers stay valid while the pool
  // lives (each page is its own allocation).
  std::vector<std::unique_ptr<uint8_t[]>> pages_;
  std::vector<int32_t> free_list_;
  uint64_t pages_used_ = 0;
  uint64_t reserved_ = 0;
};

}  // namespace dsv41::kv
