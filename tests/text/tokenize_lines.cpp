// Test helper: encodes each line of a UTF-8 file (its "\n" included) with the GPT-2 tokenizer and
// prints one line of space-separated ids per input line, the format tiktoken_lines.js prints, so
// test_gpt2_vs_tiktoken.py can compare line by line. Each line must decode back to itself;
// a line that does not is reported and the exit code is 1.
// usage: tokenize_lines VOCAB MERGES INPUT OUTPUT
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "framework/text/gpt2_tokenizer.h"
#include "tests/text/tokenize_each_line.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: tokenize_lines VOCAB MERGES INPUT OUTPUT\n");
    return 2;
  }
  try {
    gpt::Gpt2Tokenizer tokenizer(argv[1], argv[2]);
    std::ifstream in(argv[3], std::ios::binary);
    std::ofstream out(argv[4], std::ios::binary);
    if (!in || !out) throw std::runtime_error("cannot open the input or the output");
    const int failures = gpt::tokenize_each_line(
        in, out,
        [&](const std::string& line, std::vector<int32_t>& ids) { tokenizer.encode(line, ids); },
        [&](const std::string& line, const std::vector<int32_t>& ids) {
          return tokenizer.decode(ids) == line;
        });
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
