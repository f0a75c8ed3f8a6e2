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
    std::string line;
    std::vector<int32_t> ids;
    int failures = 0;
    for (long number = 1; std::getline(in, line); ++number) {
      if (!in.eof()) line += '\n';
      ids.clear();
      tokenizer.encode(line, ids);
      for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
      out << '\n';
      if (tokenizer.decode(ids) != line && ++failures <= 10)
        std::fprintf(stderr, "line %ld: decode(encode(line)) != line\n", number);
    }
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
