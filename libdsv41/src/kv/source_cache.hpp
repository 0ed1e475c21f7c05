// SourceCache: the packed compressed-KV entries and index keys of one KV-source layer of one
// sequence (spec model-architecture.md §2.3/§2.4/§2.8), stored in PagePool pages through a page
// table. Page k holds entries [64k, 64k+64): first 64 compressed entries (FP4 block 16 + e4m3,
// 288 B released), then 64 index keys (FP4 block 32 + ue8m0, 68 B released; absent when the
// source has no indexer keys, the space stays unused). Copying allocates new pages from the same
// pool (a deep copy); destruction returns the pages.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kv/page_pool.hpp"

namespace dsv41::kv {

class SourceCache {
 public:
  SourceCache() = default;
  // dim: compressed entry width (head_dim); index_dim: index-key width (0 = no index keys).
  SourceCache(std::shared_ptr<PagePool> pool, int layer, int64_t dim, int64_t index_dim);
  SourceCache(const SourceCache& o);
  SourceCache& operator=(const SourceCache& o);
  SourceCache(SourceCache&& o) noexcept;
  SourceCache& operator=(SourceCache&& o) noexcept;
  ~SourceCache();

  int64_t n_compressed() const { return n_compressed_; }
  int64_t n_index() const { return n_index_; }
  int64_t pages() const { return static_cast<int64_t>(pages_.size()); }
  const std::shared_ptr<PagePool>& pool() const { return pool_; }

  // Packs the fake-quantised fp32 entry (kInternal if not representable) at the end.
  void append_compressed(const float* x);
  void append_index(const float* x);
  // Unpack entry j (j < n_compressed() / n_index()).
  void read_compressed(int64_t j, float* out) const;
  void read_index(int64_t j, float* out) const;
  // Keeps entries [0, n) of both kinds and frees the pages past them.
  void truncate(int64_t n);
  // Allocates pages for n entries ahead of time (kOutOfMemory before anything changes).
  void reserve(int64_t n);
  // Frees pages that no entry uses (after a failed reserve()).
  void trim();

 private:
  uint8_t* entry(int64_t j, bool index) const;
  void ensure_pages(int64_t n);
  void release_pages_from(size_t keep);

  std::shared_ptr<PagePool> pool_;
  int layer_ = -1;
  int64_t dim_ = 0, index_dim_ = 0;
  int64_t c_bytes_ = 0, i_bytes_ = 0;  // packed bytes per compressed entry / index key
  int64_t n_compressed_ = 0, n_index_ = 0;
  std::vector<int32_t> pages_;  // page table: page k covers entries [64k, 64k+64)
};

}  // namespace dsv41::kv
