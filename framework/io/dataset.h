// Token data sets (DESIGN.md "Data"): an HDF5 file with a 1-D uint16/uint32 dataset /tokens and
// attributes vocab_size, tokenizer and optionally eot, loaded whole into memory. Window k is
// tokens [k*T, k*T + T] (inputs the first T, targets the last T); samples, numbered across the
// run, map to windows sequentially or through the counter RNG keyed by (seed, sample), so the
// data order is a pure function of the seed and survives resumes and layout changes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpt {

struct TokenDataset {
  std::string path;  // the file, or "<built-in train>" for the synthetic corpus
  std::vector<int32_t> tokens;
  int64_t vocab_size = 0;
  std::string tokenizer;  // "bytes" for the byte-level tokenizer
  int64_t eot = -1;       // end-of-text token when the file names one (attribute "eot")
  // W = floor((N-1)/T): windows of T+1 tokens overlap by one token.
  int64_t num_windows(int64_t seq_len) const;
};

// Reads and validates a data set. Every problem (missing file, not HDF5, no /tokens, not 1-D,
// not uint16/uint32, empty, missing or invalid vocab_size, a token >= vocab_size, no tokenizer)
// throws a one-line gpt::Error that names the file and what is wrong.
TokenDataset load_token_dataset(const std::string& path);

// Writes /tokens as uint16 when vocab_size <= 65536, else uint32, with attributes vocab_size
// (int64), tokenizer (string) and eot when >= 0. Written under a temporary name and renamed, so
// an interrupted write never leaves a truncated file under the final name.
void write_token_dataset(const std::string& path, const TokenDataset& dataset);

// At least one window: N >= T+1; else a one-line error naming the file, N and --seq-len.
void check_dataset_fits(const TokenDataset& dataset, int64_t seq_len);

enum class DataOrder { kSequential, kRandom };
inline constexpr DataOrder kDataOrders[] = {DataOrder::kRandom, DataOrder::kSequential};
const char* data_order_name(DataOrder order);  // "sequential", "random" (--data-order)

// The window of global sample j: j mod W (sequential) or CounterRng(seed, "data-order").bits(j)
// mod W (random).
int64_t sample_window(int64_t sample, int64_t num_windows, DataOrder order, uint64_t seed);

// inputs (T) = tokens [k*T, k*T + T), targets (T) = tokens [k*T + 1, k*T + T].
void read_window(const TokenDataset& dataset, int64_t window, int64_t seq_len, int32_t* inputs,
                 int32_t* targets);

}  // namespace gpt
