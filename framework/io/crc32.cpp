// Table-driven CRC-32, eight bytes per step ("slicing by 8"): checkpoints are verified in full on
// every load, so the checksum should run at memory speed rather than a byte per table lookup.
// Shares (crc32.h) move the register over the zeros between pieces by multiplying it by
// x^(8*zeros) modulo the polynomial, in the same bit-reflected representation as the register
// (bit 31 is the coefficient of x^0), with x^(2^j) tabulated: O(log zeros), not O(zeros).
#include "framework/io/crc32.h"

#include <array>

#include "framework/check.h"

namespace gpt {
namespace {

constexpr uint32_t kPolynomial = 0xEDB88320u;  // 0x04C11DB7 bit-reversed

using CrcTables = std::array<std::array<uint32_t, 256>, 8>;

// tables[0] is the classic byte table; tables[k][b] advances tables[k-1][b] by one more zero
// byte, so eight lookups fold in eight bytes at once.
constexpr CrcTables make_tables() {
  CrcTables tables{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1u) ? (c >> 1) ^ kPolynomial : c >> 1;
    tables[0][b] = c;
  }
  for (size_t k = 1; k < 8; ++k)
    for (uint32_t b = 0; b < 256; ++b)
      tables[k][b] = (tables[k - 1][b] >> 8) ^ tables[0][tables[k - 1][b] & 0xFFu];
  return tables;
}

constexpr CrcTables kTables = make_tables();

// a * b mod P, both bit-reflected.
constexpr uint32_t multiply_mod(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t bit = 0x80000000u; bit != 0; bit >>= 1) {  // a's x^0, x^1, ... x^31
    if (a & bit) product ^= b;
    b = (b & 1u) ? (b >> 1) ^ kPolynomial : b >> 1;  // b *= x; x^32 = the low terms of P
  }
  return product;
}

// kPowers[j] = x^(2^j) mod P.
constexpr std::array<uint32_t, 64> make_powers() {
  std::array<uint32_t, 64> powers{};
  powers[0] = 0x40000000u;  // x^1
  for (size_t j = 1; j < powers.size(); ++j) powers[j] = multiply_mod(powers[j - 1], powers[j - 1]);
  return powers;
}

constexpr std::array<uint32_t, 64> kPowers = make_powers();

// x^(8 * bytes) mod P: the factor that moves the register over `bytes` zero bytes.
uint32_t zeros_factor(uint64_t bytes) {
  uint32_t factor = 0x80000000u;  // x^0
  for (size_t j = 3; bytes != 0; bytes >>= 1, ++j)
    if (bytes & 1u) factor = multiply_mod(factor, kPowers[j]);
  return factor;
}

}  // namespace

uint32_t crc32(const void* data, size_t bytes, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  const auto& t = kTables;
  for (; bytes >= 8; bytes -= 8, p += 8) {
    // Assemble little-endian words by hand so the result does not depend on host byte order.
    uint32_t lo = (static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
                   static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24) ^
                  c;
    c = t[7][lo & 0xFFu] ^ t[6][(lo >> 8) & 0xFFu] ^ t[5][(lo >> 16) & 0xFFu] ^ t[4][lo >> 24] ^
        t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
  }
  for (; bytes > 0; --bytes, ++p) c = (c >> 8) ^ t[0][(c ^ *p) & 0xFFu];
  return ~c;
}

void Crc32Share::add(uint64_t offset, const void* data, size_t bytes) {
  GPT_CHECK(offset >= end_ && offset + bytes <= message_bytes_,
            "crc32 share: piece [" << offset << ", " << offset + bytes << ") is before the end "
                                   << end_ << " of the last one or past the message's "
                                   << message_bytes_ << " bytes");
  if (offset != end_) {
    if (offset - end_ != last_gap_) {
      last_gap_ = offset - end_;
      last_gap_factor_ = zeros_factor(last_gap_);
    }
    register_ = multiply_mod(register_, last_gap_factor_);
  }
  // crc32() applies the initial and final XOR around the bare register update; undo both.
  register_ = ~crc32(data, bytes, ~register_);
  end_ = offset + bytes;
}

uint32_t Crc32Share::share() const {
  return multiply_mod(register_, zeros_factor(message_bytes_ - end_));
}

uint32_t crc32_from_shares(uint32_t xor_of_shares, uint64_t message_bytes) {
  // The register is affine in the message: crc32(m) = crc32(zeros) ^ bare register of m, and
  // crc32(zeros) is the initial all-ones register moved over the message's length.
  return ~multiply_mod(0xFFFFFFFFu, zeros_factor(message_bytes)) ^ xor_of_shares;
}

}  // namespace gpt
