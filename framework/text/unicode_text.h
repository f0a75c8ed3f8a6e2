// Unicode helpers the tokenizers share: UTF-8 stepping, the White_Space property, Unicode
// normalisation forms and lowercasing (ICU), and GPT-2's byte-to-unicode alphabet in which
// byte-level BPE files write their tokens.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gpt {

// The length of the UTF-8 sequence starting with byte `lead` (1 for a stray continuation byte,
// so loops over unchecked text always advance).
inline size_t utf8_length(unsigned char lead) {
  return lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// The start of the character that byte i of `text` belongs to, not before `begin`: UTF-8 is
// self-synchronising, so stepping back over continuation bytes finds it.
inline size_t utf8_char_start(std::string_view text, size_t i, size_t begin = 0) {
  while (i > begin && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  return i;
}

// The code point at text[i] (text already valid UTF-8) and its length in bytes.
char32_t utf8_decode(std::string_view text, size_t i, size_t& length);
void utf8_append(std::string& out, char32_t cp);

// The byte offset of the first invalid UTF-8 sequence in text (overlong forms, surrogates and
// code points past U+10FFFF are invalid), or npos when it is all valid.
size_t first_invalid_utf8(std::string_view text);

// Unicode's White_Space property (what `\s` means in Hugging Face's and tiktoken's regexes).
bool is_white_space(char32_t cp);

// NFC, NFD, NFKC or NFKD of valid UTF-8 text, through ICU; `form` is one of those names.
// ASCII text is returned unchanged without a call.
void unicode_normalize(const std::string& form, std::string& text);
bool is_normalization_form(const std::string& form);
void unicode_lowercase(std::string& text);

// GPT-2's byte-to-unicode alphabet (OpenAI encoder.py bytes_to_unicode): the printable bytes
// '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves; the other 68 bytes, in increasing
// order, for code points 256, 257, ... Inverted: code point -> byte, -1 where none.
std::array<int, 512> byte_alphabet_to_byte();

// A token string written in the byte alphabet -> its raw bytes; false if it has a character
// outside the alphabet.
bool byte_alphabet_decode(std::string_view s, const std::array<int, 512>& map, std::string& bytes);

}  // namespace gpt
