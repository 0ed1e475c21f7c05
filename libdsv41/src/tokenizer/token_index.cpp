#include "tokenizer/token_index.hpp"

#include <functional>

namespace dsv41 {
namespace {
inline uint64_t hash_of(std::string_view s) { return std::hash<std::string_view>{}(s); }
}  // namespace

void TokenIndex::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap *= 2;  // load factor <= 0.5
  if (cap > slots_.size()) grow(cap);
}

void TokenIndex::grow(size_t capacity) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{});
  for (const Slot& s : old) {
    if (s.id < 0) continue;
    size_t i = s.hash & (capacity - 1);
    while (slots_[i].id >= 0) i = (i + 1) & (capacity - 1);
    slots_[i] = s;
  }
}

void TokenIndex::insert(std::string_view key, int32_t id) {
  if ((size_ + 1) * 2 > slots_.size()) grow(slots_.empty() ? 16 : slots_.size() * 2);
  const auto h = static_cast<uint32_t>(hash_of(key));
  size_t i = h & (slots_.size() - 1);
  while (slots_[i].id >= 0) {
    if (slots_[i].hash == h && slots_[i].key == key) return;
    i = (i + 1) & (slots_.size() - 1);
  }
  slots_[i] = Slot{key, h, id};
  ++size_;
}

std::optional<int32_t> TokenIndex::find(std::string_view key) const {
  if (size_ == 0) return std::nullopt;
  const auto h = static_cast<uint32_t>(hash_of(key));
  size_t i = h & (slots_.size() - 1);
  while (slots_[i].id >= 0) {
    if (slots_[i].hash == h && slots_[i].key == key) return slots_[i].id;
    i = (i + 1) & (slots_.size() - 1);
  }
  return std::nullopt;
}

}  // namespace dsv41
