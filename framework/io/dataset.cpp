// Loading, writing and sampling token data sets (see dataset.h).
#include "framework/io/dataset.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <optional>

#include "framework/check.h"
#include "framework/io/hdf5_util.h"
#include "framework/rng.h"

namespace gpt {
namespace {

namespace fs = std::filesystem;

// The checks behind load_token_dataset; messages leave out the file, which the caller prefixes.
TokenDataset read_token_file(const std::string& path) {
  std::error_code ec;
  GPT_INPUT_CHECK(fs::exists(path, ec), "no such file");
  GPT_INPUT_CHECK(!fs::is_directory(path, ec), "is a directory, not a data file");
  htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  GPT_INPUT_CHECK(is_hdf5 > 0, "not an HDF5 file (or not readable)");
  h5::Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  GPT_INPUT_CHECK(file.valid(), "cannot be opened as HDF5 (" << h5::last_error_message() << ")");

  GPT_INPUT_CHECK(h5::has_link(file.id(), "/tokens") && h5::is_dataset(file.id(), "/tokens"),
                  "has no /tokens dataset");
  h5::Handle tokens(GPT_H5_CHECK(H5Dopen2(file.id(), "/tokens", H5P_DEFAULT)));
  std::vector<int64_t> shape = h5::dataset_shape(tokens.id());
  GPT_INPUT_CHECK(shape.size() == 1,
                  "/tokens must be 1-D but has shape " << h5::shape_string(shape));
  h5::Handle type(GPT_H5_CHECK(H5Dget_type(tokens.id())));
  const bool unsigned_int = GPT_H5_CHECK(H5Tget_class(type.id())) == H5T_INTEGER &&
                            GPT_H5_CHECK(H5Tget_sign(type.id())) == H5T_SGN_NONE;
  const size_t type_size = H5Tget_size(type.id());
  GPT_INPUT_CHECK(unsigned_int && (type_size == 2 || type_size == 4),
                  "/tokens must be uint16 or uint32 (numpy: tokens.astype(np.uint16))");
  GPT_INPUT_CHECK(shape[0] > 0, "/tokens is empty");

  TokenDataset data;
  data.path = path;
  std::optional<int64_t> vocab_size = h5::read_int64_attribute(file.id(), "vocab_size");
  GPT_INPUT_CHECK(vocab_size.has_value(), "has no vocab_size attribute");
  GPT_INPUT_CHECK(*vocab_size >= 1 && *vocab_size <= std::numeric_limits<int32_t>::max(),
                  "vocab_size " << *vocab_size << " is not in [1, 2^31-1]");
  data.vocab_size = *vocab_size;
  std::optional<std::string> tokenizer = h5::read_string_attribute(file.id(), "tokenizer");
  GPT_INPUT_CHECK(tokenizer.has_value() && !tokenizer->empty(),
                  "has no tokenizer attribute (e.g. \"bytes\")");
  data.tokenizer = *tokenizer;
  if (std::optional<int64_t> eot = h5::read_int64_attribute(file.id(), "eot")) {
    GPT_INPUT_CHECK(*eot >= 0 && *eot < data.vocab_size,
                    "eot " << *eot << " is not a token below vocab_size " << data.vocab_size);
    data.eot = *eot;
  }

  // Read as uint32 straight into the int32 storage (same size; signed and unsigned views of one
  // object may alias); every valid token is below vocab_size <= 2^31-1, so the bits agree.
  data.tokens.resize(static_cast<size_t>(shape[0]));
  GPT_H5_CHECK(H5Dread(tokens.id(), H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                       reinterpret_cast<uint32_t*>(data.tokens.data())));
  // max_token (written by prepare-data) settles the range without a scan; files without it
  // (written by hand, with h5py) are scanned.
  if (std::optional<int64_t> max_token = h5::read_int64_attribute(file.id(), "max_token")) {
    GPT_INPUT_CHECK(*max_token < data.vocab_size,
                    "max_token " << *max_token << " is not below vocab_size " << data.vocab_size);
    return data;
  }
  const auto* raw = reinterpret_cast<const uint32_t*>(data.tokens.data());
  for (size_t i = 0; i < data.tokens.size(); ++i)
    GPT_INPUT_CHECK(raw[i] < static_cast<uint64_t>(data.vocab_size),
                    "token " << raw[i] << " at position " << i << " is not below vocab_size "
                             << data.vocab_size);
  return data;
}

}  // namespace

int64_t TokenDataset::num_windows(int64_t seq_len) const {
  GPT_CHECK(seq_len > 0, "seq_len " << seq_len << " must be positive");
  const auto n = static_cast<int64_t>(tokens.size());
  return n < 1 ? 0 : (n - 1) / seq_len;
}

TokenDataset load_token_dataset(const std::string& path) {
  h5::silence_errors();
  try {
    return read_token_file(path);
  } catch (const Error& e) {
    fail_input("data set " + path + ": " + e.what());
  }
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
  const auto n = static_cast<int64_t>(data.tokens.size());
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
  const int32_t* first = data.tokens.data() + window * seq_len;
  for (int64_t t = 0; t < seq_len; ++t) {
    inputs[t] = first[t];
    targets[t] = first[t + 1];
  }
}

}  // namespace gpt
