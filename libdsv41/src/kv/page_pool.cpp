#include "kv/page_pool.hpp"

#include "core/check.hpp"

namespace dsv41::kv {

PagePool::PagePool(uint64_t page_bytes, uint64_t budget_bytes)
    : page_bytes_(page_bytes), budget_(budget_bytes) {
  DSV41_CHECK(page_bytes > 0, kInvalidArgument, "KV page pool: page size must be positive");
}

int32_t PagePool::allocate(const char* what) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t used = used_locked();
  DSV41_CHECK(budget_ == kUnbounded || used + page_bytes_ <= budget_, kOutOfMemory,
              "KV pool exhausted: {} needs a page of {} B but {} of the {} B budget are in use "
              "({} pages + {} B window rings); raise the KV byte budget or end sequences",
              what, page_bytes_, used, budget_, pages_used_, reserved_);
  int32_t id;
  if (!free_list_.empty()) {
    id = free_list_.back();
    free_list_.pop_back();
  } else {
    DSV41_CHECK(pages_.size() < static_cast<size_t>(INT32_MAX), kOutOfMemory,
                "KV pool: {} needs more than 2^31 pages", what);
    id = static_cast<int32_t>(pages_.size());
    pages_.push_back(std::make_unique<uint8_t[]>(page_bytes_));
  }
  ++pages_used_;
  return id;
}

void PagePool::free(int32_t page) {
  std::lock_guard<std::mutex> lock(mu_);
  DSV41_CHECK(page >= 0 && static_cast<size_t>(page) < pages_.size() && pages_used_ > 0, kInternal,
              "KV pool: freeing page {} of {}", page, pages_.size());
  free_list_.push_back(page);
  --pages_used_;
}

uint8_t* PagePool::data(int32_t page) {
  std::lock_guard<std::mutex> lock(mu_);  // pages_ may grow concurrently
  return pages_.at(static_cast<size_t>(page)).get();
}

const uint8_t* PagePool::data(int32_t page) const {
  std::lock_guard<std::mutex> lock(mu_);
  return pages_.at(static_cast<size_t>(page)).get();
}

void PagePool::reserve(uint64_t bytes, const char* what) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t used = used_locked();
  DSV41_CHECK(budget_ == kUnbounded || (bytes <= budget_ && used <= budget_ - bytes), kOutOfMemory,
              "KV pool exhausted: {} needs {} B but {} of the {} B budget are in use ({} pages + "
              "{} B window rings); raise the KV byte budget or end sequences",
              what, bytes, used, budget_, pages_used_, reserved_);
  reserved_ += bytes;
}

void PagePool::unreserve(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  DSV41_CHECK(bytes <= reserved_, kInternal, "KV pool: releasing {} B of {} B reserved", bytes,
              reserved_);
  reserved_ -= bytes;
}

PoolStats PagePool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  PoolStats s;
  s.budget_bytes = budget_;
  s.page_bytes = page_bytes_;
  s.pages_used = pages_used_;
  s.reserved_bytes = reserved_;
  s.used_bytes = used_locked();
  s.pages_free = budget_ == kUnbounded ? UINT64_MAX : (budget_ - s.used_bytes) / page_bytes_;
  return s;
}

}  // namespace dsv41::kv
