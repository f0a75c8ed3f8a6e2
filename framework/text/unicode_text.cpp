// Unicode helpers (see unicode_text.h). Normalisation and lowercasing go through ICU (Debian's
// libicu-dev): the tables are large and versioned, and ICU is the reference implementation.
#include "framework/text/unicode_text.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/unistr.h>

#include "framework/check.h"

namespace gpt {

char32_t utf8_decode(std::string_view text, size_t i, size_t& length) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char c0 = b(0);
  length = utf8_length(c0);
  if (length > text.size() - i) length = text.size() - i;
  switch (length) {
    case 1:
      return c0;
    case 2:
      return (c0 & 0x1Fu) << 6 | (b(1) & 0x3Fu);
    case 3:
      return (c0 & 0x0Fu) << 12 | (b(1) & 0x3Fu) << 6 | (b(2) & 0x3Fu);
    default:
      return (c0 & 0x07u) << 18 | (b(1) & 0x3Fu) << 12 | (b(2) & 0x3Fu) << 6 | (b(3) & 0x3Fu);
  }
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | cp >> 6));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | cp >> 12));
    out.push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | cp >> 18));
    out.push_back(static_cast<char>(0x80 | (cp >> 12 & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t first_invalid_utf8(std::string_view text) {
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const auto c0 = static_cast<unsigned char>(text[i]);
    if (c0 < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    char32_t min = 0;
    if (c0 >= 0xC2 && c0 <= 0xDF)
      len = 2, min = 0x80;
    else if (c0 >= 0xE0 && c0 <= 0xEF)
      len = 3, min = 0x800;
    else if (c0 >= 0xF0 && c0 <= 0xF4)
      len = 4, min = 0x10000;
    else
      return i;
    if (n - i < len) return i;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return i;
    size_t l = 0;
    const char32_t cp = utf8_decode(text, i, l);
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool is_normalization_form(const std::string& form) {
  return form == "NFC" || form == "NFD" || form == "NFKC" || form == "NFKD";
}

void unicode_normalize(const std::string& form, std::string& text) {
  bool ascii = true;
  for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return;
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = form == "NFC"    ? icu::Normalizer2::getNFCInstance(status)
                                       : form == "NFD"  ? icu::Normalizer2::getNFDInstance(status)
                                       : form == "NFKC" ? icu::Normalizer2::getNFKCInstance(status)
                                                        : icu::Normalizer2::getNFKDInstance(status);
  GPT_CHECK(U_SUCCESS(status) && normalizer, "ICU has no " << form << " normalizer");
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  if (normalizer->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return;
  status = U_ZERO_ERROR;
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  normalizer->normalizeUTF8(0, piece, sink, nullptr, status);
  GPT_CHECK(U_SUCCESS(status), "ICU " << form << " normalisation failed: " << u_errorName(status));
  text.swap(out);
}

void unicode_lowercase(std::string& text) {
  std::string out;
  icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())))
      .toLower()
      .toUTF8String(out);
  text.swap(out);
}

std::array<int, 512> byte_alphabet_to_byte() {
  std::array<int, 512> map;
  map.fill(-1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    map[static_cast<size_t>(printable ? b : next++)] = b;
  }
  return map;
}

bool byte_alphabet_decode(std::string_view s, const std::array<int, 512>& map, std::string& bytes) {
  bytes.clear();
  for (size_t i = 0; i < s.size();) {
    const auto c0 = static_cast<unsigned char>(s[i]);
    uint32_t cp = 0;
    if (c0 < 0x80) {
      cp = c0;
      i += 1;
    } else if ((c0 & 0xE0) == 0xC0 && i + 1 < s.size() &&
               (static_cast<unsigned char>(s[i + 1]) & 0xC0) == 0x80) {
      cp = (c0 & 0x1Fu) << 6 | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return false;  // the alphabet ends at U+0143: two UTF-8 bytes at most
    }
    if (cp >= map.size() || map[cp] < 0) return false;
    bytes.push_back(static_cast<char>(map[cp]));
  }
  return true;
}

}  // namespace gpt
