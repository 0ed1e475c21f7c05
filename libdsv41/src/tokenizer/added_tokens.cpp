#include "tokenizer/added_tokens.hpp"

#include <algorithm>

namespace dsv41 {

AddedTokenMatcher::AddedTokenMatcher() : nodes_(1), root_children_(256, -1) {}

int32_t AddedTokenMatcher::child(int32_t node, uint8_t b) const {
  if (node == 0) return root_children_[b];
  const auto& ch = nodes_[node].children;
  auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(b, int32_t{-1}));
  return it != ch.end() && it->first == b ? it->second : -1;
}

void AddedTokenMatcher::add(std::string_view content, int32_t id, bool special) {
  int32_t node = 0;
  for (char ch : content) {
    const auto b = static_cast<uint8_t>(ch);
    int32_t next = child(node, b);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
      if (node == 0) {
        root_children_[b] = next;
      } else {
        auto& ch_list = nodes_[node].children;
        ch_list.insert(std::lower_bound(ch_list.begin(), ch_list.end(), std::make_pair(b, next)),
                       std::make_pair(b, next));
      }
    }
    node = next;
  }
  if (node == 0 || nodes_[node].id >= 0) return;
  nodes_[node].id = id;
  nodes_[node].special = special;
  ++count_;
}

std::optional<AddedTokenMatcher::Match> AddedTokenMatcher::find(std::string_view text, size_t from,
                                                                bool include_special) const {
  if (count_ == 0) return std::nullopt;
  for (size_t start = from; start < text.size(); ++start) {
    int32_t node = root_children_[static_cast<uint8_t>(text[start])];
    std::optional<Match> best;
    for (size_t i = start + 1; node >= 0; ++i) {
      const Node& n = nodes_[node];
      if (n.id >= 0 && (include_special || !n.special)) best = Match{start, i - start, n.id};
      if (i >= text.size()) break;
      node = child(node, static_cast<uint8_t>(text[i]));
    }
    if (best) return best;
  }
  return std::nullopt;
}

}  // namespace dsv41
