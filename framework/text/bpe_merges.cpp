// BPE merging by rank (see bpe_merges.h).
#include "framework/text/bpe_merges.h"

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <queue>

namespace gpt {

namespace {
constexpr size_t kScanLimit = 64;  // words up to this many symbols merge by scanning
constexpr int32_t kNoRank = std::numeric_limits<int32_t>::max();
}  // namespace

bool BpeMerges::add(int32_t left, int32_t right, int32_t result) {
  if (!rank_.emplace(key(left, right), static_cast<int32_t>(result_.size())).second) return false;
  result_.push_back(result);
  const auto top = static_cast<size_t>(std::max(left, right));
  if (top >= mergeable_.size()) mergeable_.resize(top + 1, false);
  mergeable_[static_cast<size_t>(left)] = mergeable_[static_cast<size_t>(right)] = true;
  return true;
}

void BpeMerges::apply(std::vector<int32_t>& symbols) const {
  if (symbols.size() <= kScanLimit) return merge_run(symbols);
  // A symbol in no merge cuts the word: each run between such symbols merges on its own, with
  // the same result (a SentencePiece text without a pre-tokenizer is one word; its "\n" byte
  // tokens cut it into lines).
  std::vector<int32_t> out, run;
  out.reserve(symbols.size());
  for (size_t i = 0; i <= symbols.size(); ++i) {
    if (i < symbols.size() && mergeable(symbols[i])) {
      run.push_back(symbols[i]);
      continue;
    }
    merge_run(run);
    out.insert(out.end(), run.begin(), run.end());
    run.clear();
    if (i < symbols.size()) out.push_back(symbols[i]);
  }
  symbols.swap(out);
}

void BpeMerges::merge_run(std::vector<int32_t>& symbols) const {
  const auto n = static_cast<int32_t>(symbols.size());
  if (n < 2) return;
  if (symbols.size() <= kScanLimit) {
    // rank[i]: the rank of the pair (symbols[i], symbols[i+1]); the lowest, leftmost first.
    std::array<int32_t, kScanLimit> rank;
    auto rank_of = [&](size_t i) {
      const auto it = rank_.find(key(symbols[i], symbols[i + 1]));
      return it == rank_.end() ? kNoRank : it->second;
    };
    size_t m = symbols.size();
    for (size_t i = 0; i + 1 < m; ++i) rank[i] = rank_of(i);
    while (m > 1) {
      size_t best = 0;
      for (size_t i = 1; i + 1 < m; ++i)
        if (rank[i] < rank[best]) best = i;
      if (rank[best] == kNoRank) break;
      symbols[best] = result_[static_cast<size_t>(rank[best])];
      symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
      std::copy(rank.begin() + static_cast<std::ptrdiff_t>(best) + 1,
                rank.begin() + static_cast<std::ptrdiff_t>(m) - 1,
                rank.begin() + static_cast<std::ptrdiff_t>(best));
      --m;
      if (best + 1 < m) rank[best] = rank_of(best);
      if (best > 0) rank[best - 1] = rank_of(best - 1);
    }
    return;
  }
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
  for (int32_t i = 0; i >= 0; i = next[static_cast<size_t>(i)])
    token[out++] = token[static_cast<size_t>(i)];
  token.resize(out);
}

}  // namespace gpt
