// The one count of the memory this project allocates: every backend buffer is taken with a
// category (what it holds), and the backend's ledger keeps the live bytes and the peak of each
// category and of their sum. "Measured" memory means these bytes: each block as the backend
// really reserves it (rounded up to its allocation granularity). What lives outside the project's
// allocator (oneDNN's packing buffers, MPI's, NCCL's and HDF5's own memory) is not in it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

namespace gpt {

enum class MemoryCategory : int {
  kWeights = 0,  // parameter values
  kGrads,        // parameter gradients
  kOptimizer,    // optimizer state (and fp32 master copies where a precision keeps them)
  kActivations,  // per-microbatch caches and gradient sets the schedule keeps in flight
  kComm,         // buffers that exist only to communicate (staging, padded reduction buffers)
  kWorkspace,    // scratch that no call outlives, library workspaces
};
inline constexpr int kMemoryCategories = 6;
inline constexpr MemoryCategory kAllMemoryCategories[kMemoryCategories] = {
    MemoryCategory::kWeights,     MemoryCategory::kGrads, MemoryCategory::kOptimizer,
    MemoryCategory::kActivations, MemoryCategory::kComm,  MemoryCategory::kWorkspace};

// "weights", "grads", "optimizer", "activations", "comm", "workspace": the names in logs,
// metrics and reports.
const char* memory_category_name(MemoryCategory category);

// Bytes per category.
struct MemoryBytes {
  std::array<int64_t, kMemoryCategories> bytes{};

  int64_t& operator[](MemoryCategory c) { return bytes[static_cast<size_t>(c)]; }
  int64_t operator[](MemoryCategory c) const { return bytes[static_cast<size_t>(c)]; }
  int64_t total() const;
  MemoryCategory largest() const;  // the category with the most bytes (the first of equals)
  MemoryBytes& operator+=(const MemoryBytes& other);
  bool operator==(const MemoryBytes&) const = default;
};

// "weights 1.2 MB, grads 1.2 MB, ..., total 9.9 MB" for logs.
std::string describe(const MemoryBytes& bytes);
// "12.3 GB", "45.6 MB", "789 B": decimal units, as memory limits are given.
std::string format_bytes(int64_t bytes);

class MemoryLedger {
 public:
  void add(const void* ptr, int64_t bytes, MemoryCategory category);
  void remove(const void* ptr);  // throws for a pointer add() never saw

  const MemoryBytes& live() const { return live_; }
  // Each category's own peak, and the peak of the sum (which can be below the sum of the peaks
  // when categories peak at different times).
  const MemoryBytes& peak() const { return peak_; }
  int64_t peak_total() const { return peak_total_; }

 private:
  struct Block {
    int64_t bytes;
    MemoryCategory category;
  };
  std::unordered_map<const void*, Block> blocks_;
  MemoryBytes live_, peak_;
  int64_t peak_total_ = 0;
};

}  // namespace gpt
