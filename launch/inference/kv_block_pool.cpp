// The paged key/value cache's free list (see kv_block_pool.h).
#include "launch/inference/kv_block_pool.h"

#include "framework/check.h"

namespace gpt {

KvBlockPool::KvBlockPool(int64_t blocks, int64_t block_tokens)
    : total_(blocks), block_tokens_(block_tokens) {
  GPT_CHECK(blocks >= 1 && blocks < (int64_t{1} << 31) && block_tokens >= 1,
            "a key/value pool of " << blocks << " blocks of " << block_tokens << " positions");
  for (int64_t b = 0; b < blocks; ++b) free_.insert(free_.end(), static_cast<int32_t>(b));
}

bool KvBlockPool::reserve(std::vector<int32_t>& table, int64_t positions) {
  const int64_t needed = blocks_for(positions) - static_cast<int64_t>(table.size());
  if (needed <= 0) return true;
  if (needed > free()) return false;
  for (int64_t i = 0; i < needed; ++i) {
    table.push_back(*free_.begin());
    free_.erase(free_.begin());
  }
  return true;
}

void KvBlockPool::release(std::vector<int32_t>& table) {
  for (int32_t block : table) {
    GPT_CHECK(block >= 0 && block < total_ && !free_.contains(block),
              "released block " << block << " is not in use");
    free_.insert(block);
  }
  table.clear();
}

}  // namespace gpt
