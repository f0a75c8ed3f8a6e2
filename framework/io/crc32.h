// CRC-32 as zlib, PNG and gzip compute it (IEEE 802.3 polynomial, reflected, initial and final
// XOR 0xFFFFFFFF), so a checkpoint dataset's checksum can be verified with Python's
// zlib.crc32(dataset[...].astype('<f4').tobytes()). Chaining: crc32(b, n, crc32(a, m)) is the
// checksum of a followed by b.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpt {

uint32_t crc32(const void* data, size_t bytes, uint32_t crc = 0);

}  // namespace gpt
