#include "kv/source_cache.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/check.hpp"
#include "kv/packed_formats.hpp"

namespace dsv41::kv {

SourceCache::SourceCache(std::shared_ptr<PagePool> pool, int layer, int64_t dim, int64_t index_dim)
    : pool_(std::move(pool)), layer_(layer), dim_(dim), index_dim_(index_dim) {
  DSV41_CHECK(pool_ != nullptr, kInternal, "layer {}: KV source cache without a pool", layer);
  c_bytes_ = packed_bytes(EntryFormat::kCompressedFp4, dim);
  i_bytes_ = index_dim > 0 ? packed_bytes(EntryFormat::kIndexFp4, index_dim) : 0;
  const uint64_t need = static_cast<uint64_t>(kEntriesPerPage) * (c_bytes_ + i_bytes_);
  DSV41_CHECK(pool_->page_bytes() >= need, kInvalidArgument,
              "layer {}: KV pool pages of {} B cannot hold {} entries of {} + {} B", layer,
              pool_->page_bytes(), kEntriesPerPage, c_bytes_, i_bytes_);
}

SourceCache::SourceCache(const SourceCache& o)
    : pool_(o.pool_),
      layer_(o.layer_),
      dim_(o.dim_),
      index_dim_(o.index_dim_),
      c_bytes_(o.c_bytes_),
      i_bytes_(o.i_bytes_) {
  if (pool_ == nullptr) return;
  ensure_pages(static_cast<int64_t>(o.pages_.size()) * kEntriesPerPage);
  for (size_t k = 0; k < pages_.size(); ++k)
    std::memcpy(pool_->data(pages_[k]), o.pool_->data(o.pages_[k]), pool_->page_bytes());
  n_compressed_ = o.n_compressed_;
  n_index_ = o.n_index_;
}

SourceCache& SourceCache::operator=(const SourceCache& o) {
  if (this != &o) *this = SourceCache(o);
  return *this;
}

SourceCache::SourceCache(SourceCache&& o) noexcept
    : pool_(std::move(o.pool_)),
      layer_(o.layer_),
      dim_(o.dim_),
      index_dim_(o.index_dim_),
      c_bytes_(o.c_bytes_),
      i_bytes_(o.i_bytes_),
      n_compressed_(o.n_compressed_),
      n_index_(o.n_index_),
      pages_(std::move(o.pages_)) {
  o.pages_.clear();
  o.n_compressed_ = o.n_index_ = 0;
}

SourceCache& SourceCache::operator=(SourceCache&& o) noexcept {
  if (this != &o) {
    release_pages_from(0);
    pool_ = std::move(o.pool_);
    layer_ = o.layer_;
    dim_ = o.dim_;
    index_dim_ = o.index_dim_;
    c_bytes_ = o.c_bytes_;
    i_bytes_ = o.i_bytes_;
    n_compressed_ = o.n_compressed_;
    n_index_ = o.n_index_;
    pages_ = std::move(o.pages_);
    o.pages_.clear();
    o.n_compressed_ = o.n_index_ = 0;
  }
  return *this;
}

SourceCache::~SourceCache() { release_pages_from(0); }

void SourceCache::release_pages_from(size_t keep) {
  if (pool_ == nullptr) return;
  while (pages_.size() > keep) {
    pool_->free(pages_.back());
    pages_.pop_back();
  }
}

void SourceCache::ensure_pages(int64_t n) {
  const size_t want = static_cast<size_t>((n + kEntriesPerPage - 1) / kEntriesPerPage);
  if (pages_.size() >= want) return;
  const std::string what = "KV source layer " + std::to_string(layer_);
  pages_.reserve(want);
  while (pages_.size() < want) pages_.push_back(pool_->allocate(what.c_str()));
}

uint8_t* SourceCache::entry(int64_t j, bool index) const {
  uint8_t* page = pool_->data(pages_[static_cast<size_t>(j / kEntriesPerPage)]);
  const int64_t r = j % kEntriesPerPage;
  return index ? page + kEntriesPerPage * c_bytes_ + r * i_bytes_ : page + r * c_bytes_;
}

void SourceCache::append_compressed(const float* x) {
  DSV41_CHECK(pool_ != nullptr, kInternal, "KV source cache used before init");
  ensure_pages(n_compressed_ + 1);
  pack(EntryFormat::kCompressedFp4, x, dim_, entry(n_compressed_, false));
  ++n_compressed_;
}

void SourceCache::append_index(const float* x) {
  DSV41_CHECK(pool_ != nullptr && index_dim_ > 0, kInternal,
              "layer {}: KV source has no index-key storage", layer_);
  ensure_pages(n_index_ + 1);
  pack(EntryFormat::kIndexFp4, x, index_dim_, entry(n_index_, true));
  ++n_index_;
}

void SourceCache::read_compressed(int64_t j, float* out) const {
  DSV41_CHECK(j >= 0 && j < n_compressed_, kInternal, "layer {}: compressed entry {} of {}", layer_,
              j, n_compressed_);
  unpack(EntryFormat::kCompressedFp4, entry(j, false), dim_, out);
}

void SourceCache::read_index(int64_t j, float* out) const {
  DSV41_CHECK(j >= 0 && j < n_index_, kInternal, "layer {}: index key {} of {}", layer_, j,
              n_index_);
  unpack(EntryFormat::kIndexFp4, entry(j, true), index_dim_, out);
}

void SourceCache::truncate(int64_t n) {
  n_compressed_ = std::min(n_compressed_, n);
  n_index_ = std::min(n_index_, n);
  trim();
}

void SourceCache::reserve(int64_t n) {
  if (pool_ != nullptr) ensure_pages(n);
}

void SourceCache::trim() {
  const int64_t n = std::max(n_compressed_, n_index_);
  release_pages_from(static_cast<size_t>((n + kEntriesPerPage - 1) / kEntriesPerPage));
}

}  // namespace dsv41::kv
