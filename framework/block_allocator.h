// First-fit placement of aligned blocks in one range [0, capacity): the bookkeeping behind the
// CUDA backend's device arena (framework/cuda/device_arena.h), kept free of CUDA so the CPU
// tests can check it. Freed blocks merge with free neighbours, so the range never fragments
// into pieces that add up to a block but cannot hold it.
#pragma once

#include <cstddef>
#include <map>
#include <optional>

namespace gpt {

class BlockAllocator {
 public:
  BlockAllocator(size_t capacity, size_t alignment);

  // The offset of a block of at least `bytes` (rounded up to the alignment), or nullopt when no
  // free piece is large enough. Zero bytes take no space: nullopt is not returned for them, and
  // their offset is never released.
  std::optional<size_t> allocate(size_t bytes);
  // Throws gpt::Error for an offset that allocate() did not return (or released twice).
  void release(size_t offset);

  size_t capacity() const { return capacity_; }
  size_t in_use() const { return in_use_; }
  size_t peak() const { return peak_; }
  size_t free_pieces() const { return free_.size(); }
  size_t rounded(size_t bytes) const { return (bytes + alignment_ - 1) / alignment_ * alignment_; }

 private:
  size_t capacity_, alignment_;
  size_t in_use_ = 0, peak_ = 0;
  std::map<size_t, size_t> free_;       // offset -> size, ordered for merging
  std::map<size_t, size_t> allocated_;  // offset -> size
};

}  // namespace gpt
