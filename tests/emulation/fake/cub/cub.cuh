// Stand-in for CUB in the emulated kernels of test_cuda_emulation: DeviceRadixSort::SortPairs as a
// checked stable sort on the host, with CUB's calling convention (a size query, then the sort in
// caller-provided temporary storage).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "../../emu.h"

namespace cub {

struct DeviceRadixSort {
  // Like CUB's, the storage grows with the digit passes the bit range needs, so a query for all
  // 32 bits covers any narrower sort, and a sort given less than its bits need fails.
  static size_t temp_bytes_needed(int num_items, int begin_bit, int end_bit) {
    const size_t passes = static_cast<size_t>(end_bit - begin_bit + 7) / 8;
    return 256 + passes * 1024 + 8 * static_cast<size_t>(num_items);
  }

  template <typename K, typename V>
  static cudaError_t SortPairs(void* d_temp_storage, size_t& temp_storage_bytes, const K* keys_in,
                               K* keys_out, const V* values_in, V* values_out, int num_items,
                               int begin_bit = 0, int end_bit = sizeof(K) * 8,
                               cudaStream_t = nullptr) {
    if (begin_bit < 0 || end_bit > static_cast<int>(sizeof(K) * 8) || begin_bit >= end_bit ||
        num_items < 0)
      return cudaErrorInvalidValue;
    const size_t needed = temp_bytes_needed(num_items, begin_bit, end_bit);
    if (d_temp_storage == nullptr) {
      temp_storage_bytes = needed;
      return cudaSuccess;
    }
    if (temp_storage_bytes < needed) return cudaErrorInvalidValue;
    // All of the claimed storage is written, so a caller that claims more than it owns is caught.
    std::memset(d_temp_storage, 0xab, temp_storage_bytes);
    const uint64_t bits = static_cast<uint64_t>(end_bit - begin_bit);
    const uint64_t mask = (bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1) << begin_bit;
    // CUB ignores the other bits, leaving such keys only partly ordered: legal, but in this code
    // it means the caller's bit count does not cover its keys.
    for (int i = 0; i < num_items; i++)
      if (static_cast<uint64_t>(keys_in[i]) & ~mask)
        ::emu::die("SortPairs: key " + std::to_string(static_cast<uint64_t>(keys_in[i])) +
                   " has bits outside [" + std::to_string(begin_bit) + ", " +
                   std::to_string(end_bit) + ")");
    std::vector<int> order(static_cast<size_t>(num_items));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return (static_cast<uint64_t>(keys_in[a]) & mask) <
             (static_cast<uint64_t>(keys_in[b]) & mask);
    });
    std::vector<K> keys(order.size());
    std::vector<V> values(order.size());
    for (size_t i = 0; i < order.size(); i++) {
      keys[i] = keys_in[order[i]];
      values[i] = values_in[order[i]];
    }
    std::copy(keys.begin(), keys.end(), keys_out);
    std::copy(values.begin(), values.end(), values_out);
    return cudaSuccess;
  }
};

}  // namespace cub
