#include "tokenizer/bpe.hpp"

#include <algorithm>
#include <bit>

namespace dsv41 {
namespace {

inline uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// Heap order: lowest rank first, then leftmost position.
inline bool later(const BpeMerges::Scratch::Candidate& a, const BpeMerges::Scratch::Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

}  // namespace

void BpeMerges::reserve(size_t merges) {
  size_t cap = 16;
  while (cap < merges * 2) cap *= 2;
  if (cap > slots_.size()) grow(cap);
}

void BpeMerges::grow(size_t capacity) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{});
  shift_ = 64 - std::countr_zero(capacity);
  for (const Slot& s : old) {
    if (s.key == kEmpty) continue;
    size_t i = (s.key * 0x9E3779B97F4A7C15ull) >> shift_;
    while (slots_[i].key != kEmpty) i = (i + 1) & (slots_.size() - 1);
    slots_[i] = s;
  }
}

void BpeMerges::add(int32_t left, int32_t right, int32_t merged, int32_t rank) {
  if ((size_ + 1) * 2 > slots_.size()) grow(std::max<size_t>(16, slots_.size() * 2));
  const uint64_t key = pair_key(left, right);
  size_t i = (key * 0x9E3779B97F4A7C15ull) >> shift_;
  while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & (slots_.size() - 1);
  if (slots_[i].key == kEmpty) ++size_;
  slots_[i] = Slot{key, rank, merged};
}

const BpeMerges::Slot* BpeMerges::find(int32_t left, int32_t right) const {
  if (size_ == 0) return nullptr;
  const uint64_t key = pair_key(left, right);
  size_t i = (key * 0x9E3779B97F4A7C15ull) >> shift_;
  while (true) {
    const Slot& s = slots_[i];
    if (s.key == key) return &s;
    if (s.key == kEmpty) return nullptr;
    i = (i + 1) & (slots_.size() - 1);
  }
}

void BpeMerges::encode_word(std::string_view bytes, const int32_t (&byte_ids)[256], int32_t unk_id,
                            bool fuse_unk, Scratch& scratch, std::vector<int32_t>& out) const {
  auto& sym = scratch.symbols;
  auto& heap = scratch.heap;
  sym.clear();
  heap.clear();
  for (char ch : bytes) {
    int32_t id = byte_ids[static_cast<uint8_t>(ch)];
    if (id < 0) {
      if (unk_id < 0) continue;
      if (fuse_unk && !sym.empty() && sym.back().id == unk_id) continue;
      id = unk_id;
    }
    const auto n = static_cast<int32_t>(sym.size());
    sym.push_back({id, n - 1, n + 1});
  }
  if (sym.empty()) return;
  sym.back().next = -1;
  if (sym.size() == 1) {
    out.push_back(sym[0].id);
    return;
  }
  auto push_pair = [&](int32_t pos) {
    const int32_t nx = sym[pos].next;
    if (nx < 0) return;
    if (const Slot* m = find(sym[pos].id, sym[nx].id)) {
      heap.push_back({m->rank, pos, sym[pos].id, sym[nx].id});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) push_pair(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Scratch::Candidate c = heap.back();
    heap.pop_back();
    // Stale if either side changed since the pair was queued (a merged symbol has a new id: its
    // string is longer than either part, and ids are unique per string).
    if (sym[c.pos].id != c.left) continue;
    const int32_t nx = sym[c.pos].next;
    if (nx < 0 || sym[nx].id != c.right) continue;
    sym[c.pos].id = find(c.left, c.right)->merged;
    sym[c.pos].next = sym[nx].next;
    if (sym[nx].next >= 0) sym[sym[nx].next].prev = c.pos;
    sym[nx].id = -1;
    if (sym[c.pos].prev >= 0) push_pair(sym[c.pos].prev);
    push_pair(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace dsv41
