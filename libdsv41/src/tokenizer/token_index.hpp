// String -> token id lookup over keys owned elsewhere (the Tokenizer's entries): open addressing
// with linear probing and the 32-bit hash stored in the slot, so a probe touches one 24-byte slot
// and compares bytes only on a hash hit. Loading the 129,280-entry vocabulary does ~400k lookups
// (3 per merge); std::unordered_map's node chasing made that the largest part of load time.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace dsv41 {

class TokenIndex {
 public:
  void reserve(size_t n);
  // The key's bytes must outlive the index. An existing key keeps its first id.
  void insert(std::string_view key, int32_t id);
  std::optional<int32_t> find(std::string_view key) const;
  size_t size() const { return size_; }

 private:
  struct Slot {
    std::string_view key;
    uint32_t hash = 0;
    int32_t id = -1;  // -1 = empty
  };
  void grow(size_t capacity);
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace dsv41
