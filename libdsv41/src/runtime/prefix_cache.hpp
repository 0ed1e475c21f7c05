// PrefixCache: states of finished prefixes (a prompt after prefill, a whole finished sequence),
// so a request whose prompt extends one of them skips the shared part. Agents such as Pi resend
// the whole conversation every turn. LRU with a fixed number of entries; not thread-safe (the
// Engine holds its lock).
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <vector>

#include "runtime/forward_backend.hpp"

namespace dsv41 {

// An image span in a sequence: where it starts and a digest of its pixels. Every span position
// carries the same token id, so the tokens alone cannot tell two images apart.
struct ImageKey {
  int64_t offset = 0;
  int64_t length = 0;
  uint64_t digest = 0;
  bool operator==(const ImageKey&) const = default;
};

class PrefixCache {
 public:
  void set_capacity(int entries) { capacity_ = entries; }
  // Keeps `state` (its tokens and the image spans that start inside them are the key); replaces
  // an entry with the same key. `bytes` is what the entry counts against the state budget.
  // Callers pass a clone sized to its positions (SequenceHandle::clone(pos)) so a CUDA entry
  // holds no unused device capacity.
  void insert(SequenceHandle&& state, int64_t bytes, std::vector<ImageKey> images = {});
  // The entry with the longest token list that is a proper prefix of `prompt` (at least one
  // prompt token must remain to produce logits) and holds exactly the prompt's images that start
  // before its end, or null. Marks it most recently used.
  const SequenceHandle* longest_prefix(std::span<const int32_t> prompt,
                                       std::span<const ImageKey> images = {});
  // Drops the least recently used entry; false when empty.
  bool evict_one();
  int64_t bytes() const { return bytes_; }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    SequenceHandle state;
    int64_t bytes = 0;
    std::vector<ImageKey> images;  // spans starting before the state's end, in order
  };
  std::list<Entry> entries_;  // front = most recently used
  int capacity_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace dsv41
