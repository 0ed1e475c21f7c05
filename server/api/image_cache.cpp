#include "api/image_cache.hpp"

#include <functional>
#include <string_view>

namespace dsv41::server {

ImageCache::Key ImageCache::key_of(const ImagePixels& p) {
  const std::string_view bytes(reinterpret_cast<const char*>(p.rgb.data()), p.rgb.size());
  return Key{p.width, p.height, std::hash<std::string_view>{}(bytes)};
}

std::shared_ptr<const ImageEmbedding> ImageCache::find(const Key& key) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (!(it->key == key)) continue;
    entries_.splice(entries_.begin(), entries_, it);
    ++hits_;
    return entries_.front().e;
  }
  return nullptr;
}

void ImageCache::insert(const Key& key, std::shared_ptr<const ImageEmbedding> e) {
  const int64_t bytes = static_cast<int64_t>(e->values().size_bytes());
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > capacity_) return;
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->key == key) {
      bytes_ -= it->bytes;
      entries_.erase(it);
      break;
    }
  while (bytes_ + bytes > capacity_ && !entries_.empty()) {
    bytes_ -= entries_.back().bytes;
    entries_.pop_back();
  }
  entries_.push_front(Entry{key, std::move(e), bytes});
  bytes_ += bytes;
}

int64_t ImageCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

int64_t ImageCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

}  // namespace dsv41::server
