// Token files of two other projects, imported as this project's data sets (docs/DATA.md):
//  - llm.c's .bin shards: a header of 256 int32 (magic 20240520, version 1, the token count),
//    then the tokens as little-endian uint16 (llm.c's dev/data/data_common.py, write_datafile);
//  - nanoGPT's train.bin / val.bin: the tokens alone, little-endian uint16, no header.
// A file is llm.c's when it starts with the magic: as a headerless file those bytes would be
// token 54600, outside GPT-2's 50257, so GPT-2 data cannot be mistaken for it.
#pragma once

#include <cstdint>
#include <string>

namespace gpt {

struct BinImport {
  int64_t tokens = 0;
  bool llmc_header = false;  // false: headerless (nanoGPT)
};

// Writes `input` as an HDF5 data set at `output` (write_token_dataset's format) with the given
// vocabulary, tokenizer name and eot (-1: none), streaming a million tokens at a time. A damaged
// file (a header that claims more or fewer tokens than the file holds, an odd size, another
// version) or a token outside the vocabulary is a one-line error naming the file; nothing is
// written then.
BinImport import_bin_tokens(const std::string& input, const std::string& output, int64_t vocab_size,
                            const std::string& tokenizer, int64_t eot);

}  // namespace gpt
