// The host side of the paged key/value cache: which of the pool's blocks are free, and handing
// them to sequences as they grow (layers/decode_rows.h). Every rank's pool of device blocks is
// laid out alike; only the ranks that plan steps (generate's, serve's scheduler) keep this book.
// Blocks are handed out lowest id first, so a run's placement is reproducible.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

namespace gpt {

class KvBlockPool {
 public:
  KvBlockPool(int64_t blocks, int64_t block_tokens);
  int64_t block_tokens() const { return block_tokens_; }
  int64_t total() const { return total_; }
  int64_t free() const { return static_cast<int64_t>(free_.size()); }
  // Blocks that `positions` positions need.
  int64_t blocks_for(int64_t positions) const {
    return (positions + block_tokens_ - 1) / block_tokens_;
  }
  // Grows `table` to hold positions [0, positions); false (table unchanged) when too few are free.
  bool reserve(std::vector<int32_t>& table, int64_t positions);
  // Returns all of the table's blocks and clears it.
  void release(std::vector<int32_t>& table);

 private:
  int64_t total_, block_tokens_;
  std::set<int32_t> free_;
};

}  // namespace gpt
