// BlockAllocator (see the header).
#include "framework/block_allocator.h"

#include <iterator>

#include "framework/check.h"

namespace gpt {

BlockAllocator::BlockAllocator(size_t capacity, size_t alignment)
    : capacity_(capacity / alignment * alignment), alignment_(alignment) {
  GPT_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0,
            "block alignment " << alignment << " is not a power of two");
  if (capacity_ > 0) free_[0] = capacity_;
}

std::optional<size_t> BlockAllocator::allocate(size_t bytes) {
  const size_t size = rounded(bytes);
  if (size == 0) return capacity_;  // an empty block: any offset will do, none is kept
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const size_t offset = it->first, left = it->second - size;
    free_.erase(it);
    if (left > 0) free_[offset + size] = left;
    allocated_[offset] = size;
    in_use_ += size;
    if (in_use_ > peak_) peak_ = in_use_;
    return offset;
  }
  return std::nullopt;
}

void BlockAllocator::release(size_t offset) {
  auto found = allocated_.find(offset);
  GPT_CHECK(found != allocated_.end(), "releasing offset " << offset << ", which is not allocated");
  size_t size = found->second;
  allocated_.erase(found);
  in_use_ -= size;
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      return;
    }
  }
  free_[offset] = size;
}

}  // namespace gpt
