// CRC-32 as zlib, PNG and gzip compute it (IEEE 802.3 polynomial, reflected, initial and final
// XOR 0xFFFFFFFF), so a checkpoint dataset's checksum can be verified with Python's
// zlib.crc32(dataset[...].astype('<f4').tobytes()). Chaining: crc32(b, n, crc32(a, m)) is the
// checksum of a followed by b.
//
// Crc32Share computes the checksum of a message whose pieces are held apart (the ranks that
// each hold blocks of one tensor): the CRC register is linear over GF(2), so each holder
// computes its pieces' contribution as if the rest were zeros, and the XOR of every holder's
// share, finished by crc32_from_shares, is the checksum of the whole message. One 32-bit value
// per tensor and holder, reducible with MPI_BXOR, whatever the number or order of the pieces.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpt {

uint32_t crc32(const void* data, size_t bytes, uint32_t crc = 0);

class Crc32Share {
 public:
  explicit Crc32Share(uint64_t message_bytes) : message_bytes_(message_bytes) {}
  // The bytes at [offset, offset + bytes) of the message; pieces in increasing offset, not
  // overlapping. Pieces of one message added to different shares must not overlap either.
  void add(uint64_t offset, const void* data, size_t bytes);
  // This holder's contribution; XOR with the other holders' shares of the same message.
  uint32_t share() const;

 private:
  uint64_t message_bytes_;
  uint64_t end_ = 0;       // end of the last piece
  uint32_t register_ = 0;  // the CRC register (no initial or final XOR) at end_
  uint64_t last_gap_ = 0;  // pieces are often evenly spaced (a column block): reuse x^(8*gap)
  uint32_t last_gap_factor_ = 0x80000000u;  // x^0
};

// The crc32 of a message of message_bytes bytes from the XOR of the shares covering it.
uint32_t crc32_from_shares(uint32_t xor_of_shares, uint64_t message_bytes);

}  // namespace gpt
