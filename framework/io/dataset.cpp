// Loading, writing and sampling token data sets (see dataset.h).
#include "framework/io/dataset.h"

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
  h5::silence_errors();
  GPT_INPUT_CHECK(
      data.vocab_size >= 1 && data.vocab_size <= std::numeric_limits<int32_t>::max(),
      "cannot write " << path << ": vocab_size " << data.vocab_size << " is not in [1, 2^31-1]");
  GPT_INPUT_CHECK(!data.tokens.empty(), "cannot write " << path << ": no tokens");
  GPT_INPUT_CHECK(!data.tokenizer.empty(), "cannot write " << path << ": no tokenizer name");
  for (size_t i = 0; i < data.tokens.size(); ++i)
    GPT_INPUT_CHECK(data.tokens[i] >= 0 && data.tokens[i] < data.vocab_size,
                    "cannot write " << path << ": token " << data.tokens[i] << " at position " << i
                                    << " is not in [0, vocab_size " << data.vocab_size << ")");
  const fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  GPT_INPUT_CHECK(
      parent.empty() || fs::is_directory(parent, ec),
      "cannot write " << path << ": directory " << parent.string() << " does not exist");

  const std::string temp = path + ".tmp";
  {
    h5::Handle file(H5Fcreate(temp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    GPT_INPUT_CHECK(file.valid(),
                    "cannot create " << temp << " (" << h5::last_error_message() << ")");
    const hsize_t n = data.tokens.size();
    h5::Handle space(GPT_H5_CHECK(H5Screate_simple(1, &n, nullptr)));
    const bool narrow = data.vocab_size <= 65536;
    h5::Handle tokens(
        GPT_H5_CHECK(H5Dcreate2(file.id(), "/tokens", narrow ? H5T_STD_U16LE : H5T_STD_U32LE,
                                space.id(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
    // HDF5 converts int32 to the stored width; the tokens were range-checked above.
    GPT_H5_CHECK(
        H5Dwrite(tokens.id(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.tokens.data()));
    h5::write_int64_attribute(file.id(), "vocab_size", data.vocab_size);
    h5::write_string_attribute(file.id(), "tokenizer", data.tokenizer);
    if (data.eot >= 0) h5::write_int64_attribute(file.id(), "eot", data.eot);
    tokens.close();
    file.close();
  }
  fs::rename(temp, path, ec);
  GPT_INPUT_CHECK(!ec, "cannot rename " << temp << " to " << path << ": " << ec.message());
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
