// Loading, writing and sampling token data sets (see dataset.h).
#include "framework/io/dataset.h"

#include <algorithm>
#include <filesystem>
#include <limits>

#include "framework/check.h"
#include "framework/io/hdf5_util.h"
#include "framework/rng.h"

namespace gpt {
namespace {

namespace fs = std::filesystem;

}  // namespace

int64_t TokenDataset::size() const {
  return shards ? shards->size() : static_cast<int64_t>(tokens.size());
}

int64_t TokenDataset::num_windows(int64_t seq_len) const {
  GPT_CHECK(seq_len > 0, "seq_len " << seq_len << " must be positive");
  const int64_t n = size();
  return n < 1 ? 0 : (n - 1) / seq_len;
}

TokenDataset load_token_dataset(const std::string& spec) {
  TokenDataset data;
  data.path = spec;
  data.shards = std::make_shared<const ShardReader>(resolve_data_spec(spec));
  const TokenShard& first = data.shards->shards().front();
  data.vocab_size = first.vocab_size;
  data.tokenizer = first.tokenizer;
  data.eot = first.eot;
  return data;
}

void read_tokens(const TokenDataset& data, int64_t start, int64_t count, int32_t* out) {
  if (data.shards) return data.shards->read(start, count, out);
  GPT_CHECK(start >= 0 && count >= 0 && start + count <= data.size(),
            "token range [" << start << ", " << start + count << ") outside [0, " << data.size()
                            << ") of " << data.path);
  std::copy_n(data.tokens.data() + start, count, out);
}

void write_token_dataset(const std::string& path, const TokenDataset& data) {
  GPT_INPUT_CHECK(!data.tokens.empty(), "cannot write " << path << ": no tokens");
  TokenFileWriter writer(path, data.vocab_size, data.tokenizer, data.eot);
  writer.append(data.tokens.data(), data.tokens.size());
  writer.finish();
}

TokenFileWriter::TokenFileWriter(const std::string& path, int64_t vocab_size,
                                 const std::string& tokenizer, int64_t eot)
    : path_(path), temp_(path + ".tmp"), tokenizer_(tokenizer), vocab_size_(vocab_size), eot_(eot) {
  h5::silence_errors();
  GPT_INPUT_CHECK(
      vocab_size >= 1 && vocab_size <= std::numeric_limits<int32_t>::max(),
      "cannot write " << path << ": vocab_size " << vocab_size << " is not in [1, 2^31-1]");
  GPT_INPUT_CHECK(!tokenizer.empty(), "cannot write " << path << ": no tokenizer name");
  const fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  GPT_INPUT_CHECK(
      parent.empty() || fs::is_directory(parent, ec),
      "cannot write " << path << ": directory " << parent.string() << " does not exist");
  file_ = H5Fcreate(temp_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  GPT_INPUT_CHECK(file_ >= 0, "cannot create " << temp_ << " (" << h5::last_error_message() << ")");
  // Chunks of 1M tokens: appends cost one chunk write each, and a window read touches one or two.
  const hsize_t zero = 0, unlimited = H5S_UNLIMITED, chunk = 1 << 20;
  h5::Handle space(GPT_H5_CHECK(H5Screate_simple(1, &zero, &unlimited)));
  h5::Handle props(GPT_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  GPT_H5_CHECK(H5Pset_chunk(props.id(), 1, &chunk));
  const bool narrow = vocab_size <= 65536;
  dataset_ = GPT_H5_CHECK(H5Dcreate2(file_, "/tokens", narrow ? H5T_STD_U16LE : H5T_STD_U32LE,
                                     space.id(), H5P_DEFAULT, props.id(), H5P_DEFAULT));
}

TokenFileWriter::~TokenFileWriter() {
  if (dataset_ >= 0) H5Dclose(dataset_);
  if (file_ >= 0) {
    H5Fclose(file_);
    std::error_code ec;
    fs::remove(temp_, ec);  // not finished: no file under either name
  }
}

void TokenFileWriter::append(const int32_t* tokens, size_t n) {
  GPT_CHECK(dataset_ >= 0, "append to " << path_ << " after finish");
  if (n == 0) return;
  for (size_t i = 0; i < n; ++i) {
    GPT_INPUT_CHECK(tokens[i] >= 0 && tokens[i] < vocab_size_,
                    "cannot write " << path_ << ": token " << tokens[i] << " at position "
                                    << size_ + static_cast<int64_t>(i)
                                    << " is not in [0, vocab_size " << vocab_size_ << ")");
    max_token_ = std::max<int64_t>(max_token_, tokens[i]);
  }
  const auto start = static_cast<hsize_t>(size_), count = static_cast<hsize_t>(n),
             total = start + count;
  GPT_H5_CHECK(H5Dset_extent(dataset_, &total));
  h5::Handle file_space(GPT_H5_CHECK(H5Dget_space(dataset_)));
  GPT_H5_CHECK(
      H5Sselect_hyperslab(file_space.id(), H5S_SELECT_SET, &start, nullptr, &count, nullptr));
  h5::Handle memory_space(GPT_H5_CHECK(H5Screate_simple(1, &count, nullptr)));
  // HDF5 converts int32 to the stored width; the tokens were range-checked above.
  GPT_H5_CHECK(H5Dwrite(dataset_, H5T_NATIVE_INT32, memory_space.id(), file_space.id(), H5P_DEFAULT,
                        tokens));
  size_ = static_cast<int64_t>(total);
}

void TokenFileWriter::finish() {
  GPT_CHECK(dataset_ >= 0, "finish of " << path_ << " twice");
  GPT_INPUT_CHECK(size_ > 0, "cannot write " << path_ << ": no tokens");
  h5::write_int64_attribute(file_, "vocab_size", vocab_size_);
  h5::write_string_attribute(file_, "tokenizer", tokenizer_);
  h5::write_int64_attribute(file_, "max_token", max_token_);
  if (eot_ >= 0) h5::write_int64_attribute(file_, "eot", eot_);
  GPT_H5_CHECK(H5Dclose(dataset_));
  dataset_ = -1;
  GPT_H5_CHECK(H5Fclose(file_));
  file_ = -1;
  std::error_code ec;
  fs::rename(temp_, path_, ec);
  GPT_INPUT_CHECK(!ec, "cannot rename " << temp_ << " to " << path_ << ": " << ec.message());
}

void check_dataset_fits(const TokenDataset& data, int64_t seq_len) {
  const int64_t n = data.size();
  GPT_INPUT_CHECK(seq_len >= 1, "--seq-len " << seq_len << " must be at least 1");
  GPT_INPUT_CHECK(n >= seq_len + 1, "data set " << data.path << " has " << n
                                                << " tokens, too few for --seq-len " << seq_len
                                                << " (one window needs " << seq_len + 1 << ")");
}

const char* data_order_name(DataOrder order) {
  return order == DataOrder::kSequential ? "sequential" : "random";
}

int64_t sample_window(int64_t sample, int64_t num_windows, DataOrder order, uint64_t seed) {
  GPT_CHECK(num_windows > 0, "sample_window with no windows");
  GPT_CHECK(sample >= 0, "negative sample index " << sample);
  const auto w = static_cast<uint64_t>(num_windows);
  if (order == DataOrder::kSequential)
    return static_cast<int64_t>(static_cast<uint64_t>(sample) % w);
  return static_cast<int64_t>(CounterRng(seed, "data-order").bits(static_cast<uint64_t>(sample)) %
                              w);
}

void read_window(const TokenDataset& data, int64_t window, int64_t seq_len, int32_t* inputs,
                 int32_t* targets) {
  const int64_t w = data.num_windows(seq_len);
  GPT_CHECK(window >= 0 && window < w,
            "window " << window << " out of range [0, " << w << ") of " << data.path);
  // One read of the T+1 tokens (one or two hyperslabs from disk), then split.
  std::vector<int32_t> span(static_cast<size_t>(seq_len + 1));
  read_tokens(data, window * seq_len, seq_len + 1, span.data());
  std::copy_n(span.begin(), seq_len, inputs);
  std::copy_n(span.begin() + 1, seq_len, targets);
}

}  // namespace gpt
