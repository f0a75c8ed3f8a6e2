// The loop of the two line tokenizers the tokenizer tests drive (tokenize_lines for GPT-2,
// hf_tokenize_lines for tokenizer.json): each line of a UTF-8 file, its "\n" included, encoded and
// printed as one line of space-separated ids, the format the JavaScript references print.
#pragma once

#include <cstdint>
#include <cstdio>
#include <istream>
#include <ostream>
#include <string>
#include <vector>

namespace gpt {

// encode(line, ids) appends a line's ids; decodes_back(line, ids) says whether they give the line
// back (a line that does not is reported on stderr, the first ten of them). Returns how many did
// not.
template <typename Encode, typename DecodesBack>
int tokenize_each_line(std::istream& in, std::ostream& out, Encode encode,
                       DecodesBack decodes_back) {
  std::string line;
  std::vector<int32_t> ids;
  int failures = 0;
  for (long number = 1; std::getline(in, line); ++number) {
    if (!in.eof()) line += '\n';
    ids.clear();
    encode(line, ids);
    for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
    out << '\n';
    if (!decodes_back(line, ids) && ++failures <= 10)
      std::fprintf(stderr, "line %ld: decode(encode(line)) != line\n", number);
  }
  return failures;
}

}  // namespace gpt
