// MemoryLedger and the category names (see memory_ledger.h).
#include "framework/memory_ledger.h"

#include <algorithm>
#include <iomanip>
#include <iterator>
#include <sstream>

#include "framework/check.h"

namespace gpt {

// The names reports and metrics print, in the enum's order.
constexpr const char* kMemoryCategoryNames[] = {"weights",     "grads", "optimizer",
                                                "activations", "comm",  "workspace"};
static_assert(std::size(kMemoryCategoryNames) ==
              static_cast<size_t>(MemoryCategory::kWorkspace) + 1);

const char* memory_category_name(MemoryCategory category) {
  return kMemoryCategoryNames[static_cast<size_t>(category)];
}

int64_t MemoryBytes::total() const {
  int64_t sum = 0;
  for (int64_t b : bytes) sum += b;
  return sum;
}

MemoryCategory MemoryBytes::largest() const {
  const auto it = std::max_element(bytes.begin(), bytes.end());
  return static_cast<MemoryCategory>(it - bytes.begin());
}

MemoryBytes& MemoryBytes::operator+=(const MemoryBytes& other) {
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] += other.bytes[i];
  return *this;
}

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1000.0 && unit < 4) {
    value /= 1000.0;
    ++unit;
  }
  std::ostringstream os;
  if (unit == 0)
    os << bytes << " B";
  else
    os << std::fixed << std::setprecision(value < 10 ? 2 : 1) << value << " " << units[unit];
  return os.str();
}

std::string describe(const MemoryBytes& bytes) {
  std::ostringstream os;
  for (MemoryCategory c : kAllMemoryCategories)
    os << memory_category_name(c) << " " << format_bytes(bytes[c]) << ", ";
  os << "total " << format_bytes(bytes.total());
  return os.str();
}

void MemoryLedger::add(const void* ptr, int64_t bytes, MemoryCategory category) {
  GPT_CHECK(blocks_.emplace(ptr, Block{bytes, category}).second,
            "a memory block was recorded twice");
  live_[category] += bytes;
  peak_[category] = std::max(peak_[category], live_[category]);
  peak_total_ = std::max(peak_total_, live_.total());
}

void MemoryLedger::remove(const void* ptr) {
  const auto it = blocks_.find(ptr);
  GPT_CHECK(it != blocks_.end(), "a memory block released that was never allocated");
  live_[it->second.category] -= it->second.bytes;
  blocks_.erase(it);
}

}  // namespace gpt
