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

class PrefixCache {
 public:
  void set_capacity(int entries) { capacity_ = entries; }
  // Keeps `state` (its tokens are the key); replaces an entry with the same tokens. `bytes` is
  // what the entry counts against the state budget. Callers pass a clone sized to its positions
  // (SequenceHandle::clone(pos)) so a CUDA entry holds no unused device capacity.
  void insert(SequenceHandle&& state, int64_t bytes);
  // The entry with the longest token list that is a proper prefix of `prompt` (at least one
  // prompt token must remain to produce logits), or null. Marks it most recently used.
  const SequenceHandle* longest_prefix(std::span<const int32_t> prompt);
  // Drops the least recently used entry; false when empty.
  bool evict_one();
  int64_t bytes() const { return bytes_; }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    SequenceHandle state;
    int64_t bytes = 0;
  };
  std::list<Entry> entries_;  // front = most recently used
  int capacity_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace dsv41
