// Literal matcher for added tokens (HF AddedVocabulary): non-overlapping, leftmost-longest, as the
// aho-corasick MatchKind::LeftmostLongest that `tokenizers` uses. A byte trie: a token set of ~800
// strings of <= 30 bytes makes a walk from each candidate start cheap.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace dsv41 {

class AddedTokenMatcher {
 public:
  struct Match {
    size_t start;
    size_t length;
    int32_t id;
  };

  AddedTokenMatcher();
  // `content` must be non-empty; a duplicate content keeps the first id.
  void add(std::string_view content, int32_t id, bool special);
  bool empty() const { return count_ == 0; }
  // The leftmost match at or after `from`, longest among those starting there. Special tokens
  // are skipped unless `include_special` (a longer non-special token still matches).
  std::optional<Match> find(std::string_view text, size_t from, bool include_special) const;

 private:
  struct Node {
    int32_t id = -1;
    bool special = false;
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
  };
  int32_t child(int32_t node, uint8_t b) const;

  std::vector<Node> nodes_;             // nodes_[0] is the root
  std::vector<int32_t> root_children_;  // 256 entries, -1 = none
  size_t count_ = 0;
};

}  // namespace dsv41
