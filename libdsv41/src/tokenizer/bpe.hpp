// BPE merging over token ids (HF `tokenizers` BPE::merge_word semantics): start from one symbol
// per byte (the byte-level alphabet token), repeatedly apply the lowest-rank merge, leftmost first
// among equal ranks, until no adjacent pair has a merge. O(n log n) per word with a lazy heap, so
// a multi-megabyte piece (one long letter run) cannot stall encode.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace dsv41 {

class BpeMerges {
 public:
  struct Scratch;

  // Called once per merge, in file order; rank = index. A repeated pair keeps the later rank and
  // result (a Rust HashMap collected from the list).
  void add(int32_t left, int32_t right, int32_t merged, int32_t rank);
  void reserve(size_t merges);
  size_t size() const { return size_; }
  // Ids of `bytes` appended to `out`. byte_ids[b] is the alphabet token of byte b or -1; a byte
  // without one becomes `unk_id` (consecutive ones fused if `fuse_unk`) or is dropped if
  // unk_id < 0, as `tokenizers` does.
  void encode_word(std::string_view bytes, const int32_t (&byte_ids)[256], int32_t unk_id,
                   bool fuse_unk, Scratch& scratch, std::vector<int32_t>& out) const;

 private:
  struct Slot {
    uint64_t key = kEmpty;  // left << 32 | right
    int32_t rank = 0;
    int32_t merged = 0;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  const Slot* find(int32_t left, int32_t right) const;
  void grow(size_t capacity);

  std::vector<Slot> slots_;  // open addressing, linear probing, power-of-two size
  size_t size_ = 0;
  int shift_ = 64;
};

struct BpeMerges::Scratch {
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t left;
    int32_t right;
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

}  // namespace dsv41
