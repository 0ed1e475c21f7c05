// PrefixCache: LRU of sequence states keyed by their token lists.
#include "runtime/prefix_cache.hpp"

#include <algorithm>

namespace dsv41 {

namespace {

// The images of `all` that start before position `end`.
std::vector<ImageKey> starting_before(std::span<const ImageKey> all, int64_t end) {
  std::vector<ImageKey> out;
  for (const ImageKey& k : all)
    if (k.offset < end) out.push_back(k);
  return out;
}

}  // namespace

void PrefixCache::insert(SequenceHandle&& state, int64_t bytes, std::vector<ImageKey> images) {
  if (capacity_ <= 0 || !state || state->tokens().empty()) return;
  images = starting_before(images, static_cast<int64_t>(state->tokens().size()));
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->state->tokens() == state->tokens() && it->images == images) {
      bytes_ -= it->bytes;
      entries_.erase(it);
      break;
    }
  }
  entries_.push_front(Entry{std::move(state), bytes, std::move(images)});
  bytes_ += bytes;
  while (static_cast<int>(entries_.size()) > capacity_) evict_one();
}

const SequenceHandle* PrefixCache::longest_prefix(std::span<const int32_t> prompt,
                                                  std::span<const ImageKey> images) {
  auto best = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const auto& t = it->state->tokens();
    if (t.size() >= prompt.size()) continue;
    if (!std::equal(t.begin(), t.end(), prompt.begin())) continue;
    if (it->images != starting_before(images, static_cast<int64_t>(t.size()))) continue;
    if (best == entries_.end() || t.size() > best->state->tokens().size()) best = it;
  }
  if (best == entries_.end()) return nullptr;
  entries_.splice(entries_.begin(), entries_, best);
  return &entries_.front().state;
}

bool PrefixCache::evict_one() {
  if (entries_.empty()) return false;
  bytes_ -= entries_.back().bytes;
  entries_.pop_back();
  return true;
}

}  // namespace dsv41
