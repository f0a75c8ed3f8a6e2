// Token data sets (docs/DESIGN.md "Data"): one or more HDF5 files (shards) with a 1-D uint16/uint32
// dataset /tokens and attributes vocab_size, tokenizer and optionally eot, read as one stream
// (the shards concatenated) on demand, never loaded whole; the built-in corpus lives in memory.
// Window k is tokens [k*T, k*T + T] of the stream (inputs the first T, targets the last T), so a
// window may span two shards; samples, numbered across the run, map to windows sequentially or
// through the counter RNG keyed by (seed, sample), so the data order is a pure function of the
// seed and survives resumes and layout changes, and splitting a file into shards changes nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "framework/io/token_shards.h"

namespace gpt {

struct TokenDataset {
  std::string path;             // --data as given, or "<built-in train>" for the synthetic corpus
  std::vector<int32_t> tokens;  // in memory: the built-in corpus, or tokens to write; else empty
  std::shared_ptr<const ShardReader> shards;  // files read on demand; null when in memory
  int64_t vocab_size = 0;
  std::string tokenizer;  // "bytes" for the byte-level tokenizer
  int64_t eot = -1;       // end-of-text token when the file names one (attribute "eot")
  int64_t size() const;   // N: tokens in memory or in all shards
  bool empty() const { return size() == 0; }
  // W = floor((N-1)/T): windows of T+1 tokens overlap by one token.
  int64_t num_windows(int64_t seq_len) const;
};

// Opens a data set named by a --data value (one file, several comma-separated, a glob or a
// directory of shards: resolve_data_spec) and validates every shard; no tokens are loaded. Every
// problem (missing file, not HDF5, no /tokens, not 1-D, not uint16/uint32, empty, missing or
// invalid vocab_size, a max_token attribute not below vocab_size or, without one, a token >=
// vocab_size, no tokenizer, shards that differ in vocab_size, tokenizer or eot, a glob matching
// nothing) throws a one-line gpt::Error that names the file and what is wrong.
TokenDataset load_token_dataset(const std::string& spec);

// Tokens [start, start + count) of the data set (from memory or the shards).
void read_tokens(const TokenDataset& dataset, int64_t start, int64_t count, int32_t* out);

// Writes /tokens as uint16 when vocab_size <= 65536, else uint32, with attributes vocab_size
// (int64), tokenizer (string), max_token (int64, the largest token) and eot when >= 0. Written
// under a temporary name and renamed, so an interrupted write never leaves a truncated file under
// the final name.
void write_token_dataset(const std::string& path, const TokenDataset& dataset);

// The same file written piece by piece, for inputs larger than memory: /tokens is chunked and
// grows with each append. finish() writes the attributes and renames; a writer destroyed before
// finish() removes its temporary file.
class TokenFileWriter {
 public:
  TokenFileWriter(const std::string& path, int64_t vocab_size, const std::string& tokenizer,
                  int64_t eot);
  ~TokenFileWriter();
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;

  // Each token must be in [0, vocab_size); else an input error naming the file and position.
  void append(const int32_t* tokens, size_t n);
  int64_t size() const { return size_; }
  void finish();

 private:
  std::string path_, temp_, tokenizer_;
  int64_t vocab_size_, eot_, size_ = 0, max_token_ = -1;
  int64_t file_ = -1, dataset_ = -1;  // HDF5 ids (hid_t), kept out of this header
};

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
