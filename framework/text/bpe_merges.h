// Byte-pair-encoding merges by rank, the algorithm GPT-2, tiktoken and Hugging Face's BPE models
// share: a word starts as a sequence of symbol ids and the adjacent pair of lowest rank (the
// leftmost of equals) is replaced by its merged token, one pair at a time, until no ranked pair
// is left. Used by the GPT-2 tokenizer and by tokenizer.json's BPE model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace gpt {

class BpeMerges {
 public:
  // Gives (left, right) -> result the next rank. A pair already ranked keeps its first (lowest)
  // rank, as a dictionary built in file order would; returns false then.
  bool add(int32_t left, int32_t right, int32_t result);
  size_t size() const { return result_.size(); }

  // Merges `symbols` in place. A long word is first cut at the symbols that are in no merge, each
  // run merged alone. Short runs (most words) scan their pairs' ranks, kept in an array on the
  // stack; longer ones (runs of spaces) keep a heap of candidate pairs at n log n, entries made
  // stale by a merge skipped when popped. All give the same order.
  void apply(std::vector<int32_t>& symbols) const;

 private:
  void merge_run(std::vector<int32_t>& symbols) const;  // apply's merging of one run
  // Whether the token is the left or right side of some merge: a word can be cut at a token that
  // is not, and its parts merged on their own, with the same result.
  bool mergeable(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < mergeable_.size() &&
           mergeable_[static_cast<size_t>(id)];
  }
  static uint64_t key(int32_t left, int32_t right) {
    return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
  }
  std::unordered_map<uint64_t, int32_t> rank_;  // (left << 32 | right) -> rank
  std::vector<int32_t> result_;                 // rank -> the merged token's id
  std::vector<bool> mergeable_;                 // id -> in some merge's pair
};

}  // namespace gpt
