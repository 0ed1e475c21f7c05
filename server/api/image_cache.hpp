// ImageCache: encoded images (the vision tower's span embeddings) kept for reuse, keyed by the
// decoded pixels. A chat client resends the whole conversation every turn, images included
// (Pi does); without the cache every turn would run the tower again for every image (minutes on
// the CPU tower). LRU within a byte budget; thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>

#include "dsv41/image.hpp"

namespace dsv41::server {

class ImageCache {
 public:
  explicit ImageCache(int64_t capacity_bytes) : capacity_(capacity_bytes) {}

  // The key of an image: its size and a 64-bit hash of its RGB bytes.
  struct Key {
    int width = 0, height = 0;
    uint64_t hash = 0;
    bool operator==(const Key&) const = default;
  };
  static Key key_of(const ImagePixels& pixels);

  // The cached embedding (marked most recently used) or null.
  std::shared_ptr<const ImageEmbedding> find(const Key& key);
  // Keeps `e` (evicting the least recently used entries to fit); an entry larger than the whole
  // budget is not kept.
  void insert(const Key& key, std::shared_ptr<const ImageEmbedding> e);

  int64_t bytes() const;
  int64_t hits() const;

 private:
  struct Entry {
    Key key;
    std::shared_ptr<const ImageEmbedding> e;
    int64_t bytes = 0;
  };
  const int64_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> entries_;  // front = most recently used
  int64_t bytes_ = 0, hits_ = 0;
};

}  // namespace dsv41::server
