// BPE merging by rank (see bpe_merges.h).
#include "framework/text/bpe_merges.h"

#include <functional>
#include <queue>

namespace gpt {

bool BpeMerges::add(int32_t left, int32_t right, int32_t result) {
  if (!rank_.emplace(key(left, right), static_cast<int32_t>(result_.size())).second) return false;
  result_.push_back(result);
  return true;
}

void BpeMerges::apply(std::vector<int32_t>& symbols) const {
  const auto n = static_cast<int32_t>(symbols.size());
  if (n < 2) return;
  std::vector<int32_t>& token = symbols;
  std::vector<int32_t> next(static_cast<size_t>(n)), prev(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    next[static_cast<size_t>(i)] = i + 1 < n ? i + 1 : -1;
    prev[static_cast<size_t>(i)] = i - 1;
  }
  struct Candidate {
    int32_t rank, left, left_token, right_token;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto offer = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = next[static_cast<size_t>(left)];
    if (right < 0) return;
    const int32_t lt = token[static_cast<size_t>(left)], rt = token[static_cast<size_t>(right)];
    const auto it = rank_.find(key(lt, rt));
    if (it != rank_.end()) heap.push({it->second, left, lt, rt});
  };
  for (int32_t i = 0; i + 1 < n; ++i) offer(i);
  bool merged = false;
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const auto left = static_cast<size_t>(c.left);
    const int32_t right = next[left];
    if (token[left] != c.left_token || right < 0 ||
        token[static_cast<size_t>(right)] != c.right_token)
      continue;  // a merge since it was offered changed one side
    token[left] = result_[static_cast<size_t>(c.rank)];
    token[static_cast<size_t>(right)] = -1;
    next[left] = next[static_cast<size_t>(right)];
    if (next[left] >= 0) prev[static_cast<size_t>(next[left])] = c.left;
    offer(prev[left]);
    offer(c.left);
    merged = true;
  }
  if (!merged) return;
  size_t out = 0;
  for (int32_t i = 0; i >= 0; i = next[static_cast<size_t>(i)]) token[out++] = token[static_cast<size_t>(i)];
  token.resize(out);
}

}  // namespace gpt
