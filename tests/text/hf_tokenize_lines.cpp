// Test helper: encodes each line of a UTF-8 file (its "\n" included) with a tokenizer.json and
// prints one line of space-separated ids per input line, the format hf_reference_lines.js prints,
// so test_hf_vs_reference.py can compare line by line. For byte-level files each line must decode
// back to itself where HfTokenizer::decodes_exactly() (reported, exit code 1, where one does not).
// --decoded FILE writes each line's decoded text as a JSON string per line; --allow-special-tokens
// matches special tokens written in the text. usage: hf_tokenize_lines TOKENIZER INPUT OUTPUT
// [--decoded FILE] [--allow-special-tokens]
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "framework/json.h"
#include "framework/text/hf_tokenizer.h"
#include "tests/text/tokenize_each_line.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: hf_tokenize_lines TOKENIZER INPUT OUTPUT [--decoded FILE] "
                 "[--allow-special-tokens]\n");
    return 2;
  }
  std::string decoded_path;
  bool allow_special = false;
  for (int i = 4; i < argc; ++i) {
    if (std::strcmp(argv[i], "--decoded") == 0 && i + 1 < argc)
      decoded_path = argv[++i];
    else if (std::strcmp(argv[i], "--allow-special-tokens") == 0)
      allow_special = true;
    else {
      std::fprintf(stderr, "hf_tokenize_lines: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  try {
    const gpt::HfTokenizer tokenizer(argv[1]);
    gpt::HfEncoder encoder(tokenizer);
    std::ifstream in(argv[2], std::ios::binary);
    std::ofstream out(argv[3], std::ios::binary);
    std::ofstream decoded;
    if (!decoded_path.empty()) decoded.open(decoded_path, std::ios::binary);
    if (!in || !out || (!decoded_path.empty() && !decoded))
      throw std::runtime_error("cannot open the input or an output");
    // Byte-level files decode to exactly their input; others only as the reference decodes.
    const bool exact = tokenizer.decodes_exactly();
    const int failures = gpt::tokenize_each_line(
        in, out,
        [&](const std::string& line, std::vector<int32_t>& ids) {
          encoder.encode(line, ids, allow_special);
        },
        [&](const std::string& line, const std::vector<int32_t>& ids) {
          const std::string text = tokenizer.decode(ids);
          if (decoded)
            decoded << gpt::Json(text).dump(-1, ' ', false, gpt::Json::error_handler_t::replace)
                    << '\n';
          return !exact || allow_special || text == line;
        });
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
