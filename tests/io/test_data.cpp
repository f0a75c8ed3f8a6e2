// Tests of crc32, token data set files (round trips, every kind of bad file, files written by
// h5py), windows and the sample-to-window map, the built-in arithmetic corpus, and shards: --data
// resolution, shards read as the single file, disagreeing or bad shards, the recorded shard list
// and memory that stays small however large the data set; and files that are not what they claim
// (a FIFO, data stored outside the file, a max_token attribute that lies).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "framework/check.h"
#include "framework/io/crc32.h"
#include "framework/io/dataset.h"
#include "framework/io/hdf5_util.h"
#include "framework/io/shard_record.h"
#include "framework/io/synthetic_corpus.h"
#include "framework/rng.h"
#include "framework/user_files.h"
#include "tests/test_util.h"

namespace {

namespace fs = std::filesystem;
using gpt::expect_error;
using gpt::h5::Handle;

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "gpt_io_data_XXXXXX").string();
    GPT_CHECK(mkdtemp(pattern.data()) != nullptr, "mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

uint32_t crc32_bitwise(const unsigned char* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
  }
  return ~c;
}

// A raw file for the bad-input cases: one dataset `name` of file type `type`, any attributes.
struct RawAttrs {
  bool vocab_size = true;
  int64_t vocab = 256;
  bool vocab_as_string = false;
  bool tokenizer = true;
  int64_t max_token = -1;  // written when >= 0
};

void write_raw(const std::string& path, const std::string& name, hid_t type,
               const std::vector<hsize_t>& dims, const void* data, hid_t mem_type,
               const RawAttrs& attrs = {}) {
  gpt::h5::silence_errors();
  Handle file(GPT_H5_CHECK(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
  Handle space(GPT_H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
  Handle dataset(GPT_H5_CHECK(H5Dcreate2(file.id(), name.c_str(), type, space.id(), H5P_DEFAULT,
                                         H5P_DEFAULT, H5P_DEFAULT)));
  if (data != nullptr)
    GPT_H5_CHECK(H5Dwrite(dataset.id(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
  if (attrs.vocab_size && attrs.vocab_as_string)
    gpt::h5::write_string_attribute(file.id(), "vocab_size", "256");
  else if (attrs.vocab_size)
    gpt::h5::write_int64_attribute(file.id(), "vocab_size", attrs.vocab);
  if (attrs.tokenizer) gpt::h5::write_string_attribute(file.id(), "tokenizer", "bytes");
  if (attrs.max_token >= 0) gpt::h5::write_int64_attribute(file.id(), "max_token", attrs.max_token);
}

gpt::TokenDataset make_dataset(int64_t vocab, size_t n, int64_t eot) {
  gpt::TokenDataset data;
  data.vocab_size = vocab;
  data.tokenizer = "test-tok";
  data.eot = eot;
  std::mt19937 rng(42);
  for (size_t i = 0; i < n; ++i)
    data.tokens.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab)));
  data.tokens.back() = static_cast<int32_t>(vocab - 1);  // the largest token survives too
  return data;
}

// Every token of a data set, read through the on-demand reader.
std::vector<int32_t> all_tokens(const gpt::TokenDataset& data) {
  std::vector<int32_t> out(static_cast<size_t>(data.size()));
  gpt::read_tokens(data, 0, data.size(), out.data());
  return out;
}

size_t stored_token_bytes(const std::string& path) {
  Handle file(GPT_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  Handle dataset(GPT_H5_CHECK(H5Dopen2(file.id(), "/tokens", H5P_DEFAULT)));
  Handle type(GPT_H5_CHECK(H5Dget_type(dataset.id())));
  return H5Tget_size(type.id());
}

// A Python with h5py ("" if none): the system one first, since a pyenv python3 on PATH may lack it.
std::string python_with_h5py() {
  for (std::string python : {"/usr/bin/python3", "python3"})
    if (std::system((python + " -c 'import h5py' > /dev/null 2>&1").c_str()) == 0) return python;
  return "";
}

// ---------------------------------------------------------------------------------------------

TEST(Crc32, StandardCheckValue) {
  const char* text = "123456789";
  EXPECT_EQ(gpt::crc32(text, 9), 0xCBF43926u);
  EXPECT_EQ(gpt::crc32(nullptr, 0), 0u);
  EXPECT_EQ(gpt::crc32("a", 1), 0xE8B7BE43u);
}

TEST(Crc32, MatchesBitwiseReferenceAndChains) {
  std::mt19937 rng(1);
  std::vector<unsigned char> bytes(1000);
  for (auto& b : bytes) b = static_cast<unsigned char>(rng());
  for (size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 999, 1000}) {
    EXPECT_EQ(gpt::crc32(bytes.data(), n), crc32_bitwise(bytes.data(), n)) << "n=" << n;
    for (size_t split : {size_t{0}, n / 3, n})
      EXPECT_EQ(gpt::crc32(bytes.data() + split, n - split, gpt::crc32(bytes.data(), split)),
                crc32_bitwise(bytes.data(), n));
  }
  // Unaligned starts take the same path.
  EXPECT_EQ(gpt::crc32(bytes.data() + 3, 100), crc32_bitwise(bytes.data() + 3, 100));
}

// Shares of pieces dealt out to several holders, in any pattern (runs of several lengths, gaps,
// holders with nothing), combine to the checksum of the whole message.
TEST(Crc32, SharesOfScatteredPiecesCombineToTheWhole) {
  std::mt19937 rng(2);
  for (size_t n : {0, 1, 5, 64, 1000, 4097}) {
    std::vector<unsigned char> bytes(n);
    for (auto& b : bytes) b = static_cast<unsigned char>(rng());
    for (int holders : {1, 2, 3, 7}) {
      std::vector<gpt::Crc32Share> shares(static_cast<size_t>(holders), gpt::Crc32Share(n));
      for (size_t offset = 0; offset < n;) {
        const size_t piece = std::min<size_t>(n - offset, 1 + rng() % 300);
        shares[rng() % shares.size()].add(offset, bytes.data() + offset, piece);
        offset += piece;
      }
      uint32_t combined = 0;
      for (const gpt::Crc32Share& s : shares) combined ^= s.share();
      EXPECT_EQ(gpt::crc32_from_shares(combined, n), crc32_bitwise(bytes.data(), n))
          << "n=" << n << " holders=" << holders;
    }
  }
}

TEST(TokenDataset, RoundTripUint16) {
  TempDir dir;
  for (int64_t vocab : {256, 65536}) {
    const std::string path = dir.file("u16_" + std::to_string(vocab) + ".h5");
    gpt::TokenDataset data = make_dataset(vocab, 1001, 10);
    gpt::write_token_dataset(path, data);
    EXPECT_EQ(stored_token_bytes(path), 2u);
    gpt::TokenDataset back = gpt::load_token_dataset(path);
    EXPECT_EQ(back.path, path);
    EXPECT_EQ(all_tokens(back), data.tokens);
    EXPECT_EQ(back.vocab_size, vocab);
    EXPECT_EQ(back.tokenizer, "test-tok");
    EXPECT_EQ(back.eot, 10);
    EXPECT_FALSE(fs::exists(path + ".tmp"));
  }
}

TEST(TokenDataset, RoundTripUint32WithoutEot) {
  TempDir dir;
  const std::string path = dir.file("u32.h5");
  gpt::TokenDataset data = make_dataset(70000, 5000, -1);
  gpt::write_token_dataset(path, data);
  EXPECT_EQ(stored_token_bytes(path), 4u);
  gpt::TokenDataset back = gpt::load_token_dataset(path);
  EXPECT_EQ(all_tokens(back), data.tokens);
  EXPECT_EQ(back.vocab_size, 70000);
  EXPECT_EQ(back.eot, -1);
}

// The writer prepare-data streams into: appends in pieces equal one write, max_token is recorded,
// and a writer dropped before finish() leaves no file under either name.
TEST(TokenDataset, StreamedWriterAppendsAndRecordsMaxToken) {
  TempDir dir;
  const gpt::TokenDataset data = make_dataset(50257, 3000, 50256);
  const std::string path = dir.file("streamed.h5");
  {
    gpt::TokenFileWriter writer(path, data.vocab_size, data.tokenizer, data.eot);
    for (size_t i = 0; i < data.tokens.size(); i += 700)
      writer.append(data.tokens.data() + i, std::min<size_t>(700, data.tokens.size() - i));
    EXPECT_EQ(writer.size(), 3000);
    writer.finish();
  }
  const gpt::TokenDataset back = gpt::load_token_dataset(path);
  EXPECT_EQ(all_tokens(back), data.tokens);
  EXPECT_EQ(back.eot, 50256);
  Handle file(GPT_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  EXPECT_EQ(gpt::h5::read_int64_attribute(file.id(), "max_token"),
            *std::max_element(data.tokens.begin(), data.tokens.end()));
  const std::string dropped = dir.file("dropped.h5");
  {
    gpt::TokenFileWriter writer(dropped, 256, "bytes", -1);
    writer.append(data.tokens.data(), 0);
  }
  EXPECT_FALSE(fs::exists(dropped));
  EXPECT_FALSE(fs::exists(dropped + ".tmp"));
}

TEST(TokenDataset, WriteRejectsBadData) {
  TempDir dir;
  gpt::TokenDataset data = make_dataset(256, 10, -1);
  data.tokens[3] = 256;
  expect_error([&] { gpt::write_token_dataset(dir.file("bad.h5"), data); }, {"bad.h5", "256"});
  data.tokens[3] = 1;
  expect_error([&] { gpt::write_token_dataset(dir.file("nodir/x.h5"), data); },
               {"nodir", "does not exist"});
}

TEST(TokenDataset, BadFilesNameTheFileAndTheProblem) {
  TempDir dir;
  const std::vector<uint16_t> tokens = {1, 2, 3, 4, 5, 6};
  const std::vector<float> floats = {1, 2, 3};
  const std::vector<int32_t> ints = {1, 2, 3};

  const std::string missing = dir.file("missing.h5");
  expect_error([&] { gpt::load_token_dataset(missing); }, {missing, "no such file"});

  const std::string garbage = dir.file("garbage.h5");
  std::ofstream(garbage) << "this is not an HDF5 file, just some text\n";
  expect_error([&] { gpt::load_token_dataset(garbage); }, {garbage, "not an HDF5 file"});

  const std::string no_tokens = dir.file("no_tokens.h5");
  write_raw(no_tokens, "/other", H5T_STD_U16LE, {6}, tokens.data(), H5T_NATIVE_UINT16);
  expect_error([&] { gpt::load_token_dataset(no_tokens); }, {no_tokens, "no /tokens"});

  const std::string two_d = dir.file("two_d.h5");
  write_raw(two_d, "/tokens", H5T_STD_U16LE, {2, 3}, tokens.data(), H5T_NATIVE_UINT16);
  expect_error([&] { gpt::load_token_dataset(two_d); }, {two_d, "1-D", "[2, 3]"});

  const std::string float_type = dir.file("float.h5");
  write_raw(float_type, "/tokens", H5T_IEEE_F32LE, {3}, floats.data(), H5T_NATIVE_FLOAT);
  expect_error([&] { gpt::load_token_dataset(float_type); }, {float_type, "uint16 or uint32"});

  const std::string signed_type = dir.file("int32.h5");
  write_raw(signed_type, "/tokens", H5T_STD_I32LE, {3}, ints.data(), H5T_NATIVE_INT32);
  expect_error([&] { gpt::load_token_dataset(signed_type); }, {signed_type, "uint16 or uint32"});

  const std::string empty = dir.file("empty.h5");
  write_raw(empty, "/tokens", H5T_STD_U16LE, {0}, nullptr, H5T_NATIVE_UINT16);
  expect_error([&] { gpt::load_token_dataset(empty); }, {empty, "empty"});

  // Six uint16 tokens 1..6 with one attribute made wrong each: the error names the file and it.
  struct BadAttributes {
    std::string name;
    RawAttrs attrs;
    std::vector<std::string> parts;
  };
  std::vector<BadAttributes> cases = {
      {"too_big.h5", {}, {"token 5", "position 4", "vocab_size 5"}},
      {"no_vocab.h5", {}, {"vocab_size"}},
      {"bad_vocab.h5", {}, {"vocab_size 0"}},
      {"string_vocab.h5", {}, {"vocab_size", "expected an integer"}},
      {"no_tokenizer.h5", {}, {"tokenizer"}},
      {"max_token.h5", {}, {"max_token 6", "not below vocab_size 6"}},
  };
  cases[0].attrs.vocab = 5;
  cases[1].attrs.vocab_size = false;
  cases[2].attrs.vocab = 0;
  cases[3].attrs.vocab_as_string = true;
  cases[4].attrs.tokenizer = false;
  cases[5].attrs.vocab = 6;  // the tokens fit; the attribute alone is wrong, and found unscanned
  cases[5].attrs.max_token = 6;
  for (BadAttributes& c : cases) {
    const std::string path = dir.file(c.name);
    write_raw(path, "/tokens", H5T_STD_U16LE, {6}, tokens.data(), H5T_NATIVE_UINT16, c.attrs);
    c.parts.insert(c.parts.begin(), path);
    expect_error([&] { gpt::load_token_dataset(path); }, c.parts);
  }

  // A directory names its *.h5 files as shards (TokenShards below); one with none is an error.
  const std::string directory = dir.file("no_shards");
  fs::create_directory(directory);
  expect_error([&] { gpt::load_token_dataset(directory); }, {directory, "has no .h5 files"});
}

// Tokens come only from the regular file named: a FIFO is refused before anything opens it (an
// open would block until a writer came), /tokens stored in an external file is refused, and a
// token at or above vocab_size is an error where it is read even when the max_token attribute
// hid it from the scan at open.
TEST(TokenDataset, TokensComeOnlyFromTheNamedFileAndBelowTheVocabulary) {
  TempDir dir;
  const std::string fifo = dir.file("fifo.h5");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_error([&] { gpt::load_token_dataset(fifo); }, {"data set " + fifo, "FIFO"});
  expect_error([&] { gpt::require_regular_file(dir.file(""), "--config"); }, {"is a directory"});
  expect_error([&] { gpt::require_writable_file(fifo, "--metrics"); }, {"--metrics " + fifo});
  gpt::require_writable_file("/dev/null", "--metrics");  // a character device is fine

  const std::vector<uint16_t> tokens = {1, 2, 3, 4, 5, 6};
  const std::string external = dir.file("external.h5"), raw = dir.file("tokens.raw");
  std::ofstream(raw, std::ios::binary)
      .write(reinterpret_cast<const char*>(tokens.data()), sizeof(uint16_t) * tokens.size());
  {
    gpt::h5::silence_errors();
    Handle file(GPT_H5_CHECK(H5Fcreate(external.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
    const hsize_t n = tokens.size();
    Handle space(GPT_H5_CHECK(H5Screate_simple(1, &n, nullptr)));
    Handle props(GPT_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
    GPT_H5_CHECK(H5Pset_external(props.id(), raw.c_str(), 0, n * sizeof(uint16_t)));
    Handle data(GPT_H5_CHECK(H5Dcreate2(file.id(), "/tokens", H5T_STD_U16LE, space.id(),
                                        H5P_DEFAULT, props.id(), H5P_DEFAULT)));
    gpt::h5::write_int64_attribute(file.id(), "vocab_size", 256);
    gpt::h5::write_string_attribute(file.id(), "tokenizer", "bytes");
  }
  expect_error([&] { gpt::load_token_dataset(external); }, {external, "external files"});

  RawAttrs lying;
  lying.vocab = 6;
  lying.max_token = 5;  // token 6 at position 5 is not below vocab_size 6
  const std::string path = dir.file("lying.h5");
  write_raw(path, "/tokens", H5T_STD_U16LE, {6}, tokens.data(), H5T_NATIVE_UINT16, lying);
  const gpt::TokenDataset data = gpt::load_token_dataset(path);
  std::vector<int32_t> out(6);
  gpt::read_tokens(data, 0, 5, out.data());  // the tokens below it read as usual
  expect_error([&] { gpt::read_tokens(data, 0, 6, out.data()); },
               {path, "token 6 at position 5", "vocab_size 6"});
}

TEST(TokenDataset, ReadsWhatH5pyWrites) {
  const std::string python = python_with_h5py();
  if (python.empty()) GTEST_SKIP() << "python3 with h5py not available";
  TempDir dir;
  const std::string path = dir.file("from_python.h5");
  const std::string script =
      "import h5py, numpy as np\n"
      "with h5py.File('" +
      path +
      "', 'w') as f:\n"
      "    f['tokens'] = np.arange(300, dtype=np.uint16) % 100\n"
      "    f.attrs['vocab_size'] = 100\n"
      "    f.attrs['tokenizer'] = 'bytes'\n"
      "    f.attrs['eot'] = np.int32(99)\n"
      "with h5py.File('" +
      path +
      ".fixed', 'w') as f:\n"
      "    f['tokens'] = np.arange(10, dtype=np.uint32)\n"
      "    f.attrs['vocab_size'] = np.uint16(10)\n"
      "    f.attrs['tokenizer'] = np.bytes_(b'bytes')\n";
  const std::string script_path = dir.file("write.py");
  std::ofstream(script_path) << script;
  ASSERT_EQ(std::system((python + " " + script_path).c_str()), 0);
  gpt::TokenDataset data = gpt::load_token_dataset(path);
  ASSERT_EQ(data.size(), 300);
  EXPECT_EQ(all_tokens(data)[150], 50);
  EXPECT_EQ(data.vocab_size, 100);
  EXPECT_EQ(data.tokenizer, "bytes");
  EXPECT_EQ(data.eot, 99);
  gpt::TokenDataset fixed = gpt::load_token_dataset(path + ".fixed");
  EXPECT_EQ(fixed.tokenizer, "bytes");
  EXPECT_EQ(fixed.vocab_size, 10);
  EXPECT_EQ(all_tokens(fixed).back(), 9);
}

TEST(TokenDataset, WindowsAndFit) {
  gpt::TokenDataset data;
  data.path = "mem.h5";
  data.vocab_size = 100;
  for (int i = 0; i < 21; ++i) data.tokens.push_back(i);
  EXPECT_EQ(data.num_windows(4), 5);  // floor(20 / 4)
  EXPECT_EQ(data.num_windows(20), 1);
  EXPECT_EQ(data.num_windows(21), 0);
  gpt::check_dataset_fits(data, 20);
  expect_error([&] { gpt::check_dataset_fits(data, 21); }, {"mem.h5", "21 tokens", "--seq-len 21"});
  std::vector<int32_t> inputs(4), targets(4);
  gpt::read_window(data, 2, 4, inputs.data(), targets.data());
  EXPECT_EQ(inputs, (std::vector<int32_t>{8, 9, 10, 11}));
  EXPECT_EQ(targets, (std::vector<int32_t>{9, 10, 11, 12}));
  gpt::read_window(data, 4, 4, inputs.data(), targets.data());
  EXPECT_EQ(targets.back(), 20);  // the last window reaches the last token
  EXPECT_THROW(gpt::read_window(data, 5, 4, inputs.data(), targets.data()), gpt::Error);
}

TEST(SampleWindow, SequentialIsModulo) {
  for (int64_t j = 0; j < 50; ++j)
    EXPECT_EQ(gpt::sample_window(j, 7, gpt::DataOrder::kSequential, 123), j % 7);
}

TEST(SampleWindow, RandomIsDeterministicInRangeAndSeeded) {
  const int64_t w = 37;
  std::set<int64_t> seen;
  int same_as_sequential = 0, same_across_seeds = 0;
  for (int64_t j = 0; j < 2000; ++j) {
    const int64_t k = gpt::sample_window(j, w, gpt::DataOrder::kRandom, 5);
    EXPECT_EQ(k, gpt::sample_window(j, w, gpt::DataOrder::kRandom, 5));
    ASSERT_GE(k, 0);
    ASSERT_LT(k, w);
    seen.insert(k);
    same_as_sequential += k == j % w;
    same_across_seeds += k == gpt::sample_window(j, w, gpt::DataOrder::kRandom, 6);
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), w);  // every window gets drawn
  EXPECT_LT(same_as_sequential, 200);               // about 2000/37 by chance
  EXPECT_LT(same_across_seeds, 200);
  // The documented formula, so other code (and docs) can rely on it.
  EXPECT_EQ(gpt::sample_window(12345, w, gpt::DataOrder::kRandom, 9),
            static_cast<int64_t>(gpt::CounterRng(9, "data-order").bits(12345) % w));
  EXPECT_THROW(gpt::sample_window(0, 0, gpt::DataOrder::kRandom, 1), gpt::Error);
}

// Parses every line "a+b=c" of the corpus; returns the number of lines.
int64_t check_arithmetic(const gpt::TokenDataset& data) {
  std::string text(data.tokens.begin(), data.tokens.end());
  EXPECT_EQ(text.back(), '\n');
  int64_t lines = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find('\n', pos);
    const std::string line = text.substr(pos, end - pos);
    int a = -1, b = -1, c = -1;
    char tail = 0;
    EXPECT_EQ(std::sscanf(line.c_str(), "%d+%d=%d%c", &a, &b, &c, &tail), 3) << line;
    EXPECT_TRUE(a >= 100 && a <= 499 && b >= 100 && b <= 499) << line;
    EXPECT_EQ(line.size(), 11u) << line;  // "ddd+ddd=ddd" without its newline
    EXPECT_EQ(a + b, c) << line;
    EXPECT_EQ(line, std::to_string(a) + "+" + std::to_string(b) + "=" + std::to_string(c));
    if (a + b != c) break;
    ++lines;
    pos = end + 1;
  }
  return lines;
}

TEST(SyntheticCorpus, DeterministicCorrectAndSized) {
  const auto start = std::chrono::steady_clock::now();
  gpt::TokenDataset train = gpt::synthetic_arithmetic_corpus(false);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("train corpus: %zu tokens in %.3f s\n", train.tokens.size(), seconds);
  EXPECT_LT(seconds, 1.0);  // about 0.02 s; generous for loaded CI machines
  gpt::TokenDataset val = gpt::synthetic_arithmetic_corpus(true);
  EXPECT_EQ(train.path, "<built-in train>");
  EXPECT_EQ(val.path, "<built-in validation>");
  EXPECT_EQ(train.tokenizer, "bytes");
  EXPECT_EQ(train.vocab_size, 256);
  EXPECT_EQ(train.eot, -1);
  EXPECT_NEAR(static_cast<double>(train.tokens.size()), 1.5e6, 1e3);
  EXPECT_NEAR(static_cast<double>(val.tokens.size()), 1e5, 1e2);
  EXPECT_EQ(train.tokens, gpt::synthetic_arithmetic_corpus(false).tokens);
  EXPECT_GT(check_arithmetic(train), 100000);
  EXPECT_GT(check_arithmetic(val), 7000);
  // The held-out split is different text, not a prefix of the training text.
  EXPECT_NE(std::vector<int32_t>(train.tokens.begin(), train.tokens.begin() + 1000),
            std::vector<int32_t>(val.tokens.begin(), val.tokens.begin() + 1000));
  gpt::check_dataset_fits(train, 1024);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Shards: --data naming several files, read on demand as one stream.

// Writes tokens [begin, end) of data as one file.
void write_part(const std::string& path, const gpt::TokenDataset& data, size_t begin, size_t end) {
  gpt::TokenDataset part = data;
  part.tokens.assign(data.tokens.begin() + static_cast<std::ptrdiff_t>(begin),
                     data.tokens.begin() + static_cast<std::ptrdiff_t>(end));
  gpt::write_token_dataset(path, part);
}

TEST(TokenShards, SpecResolvesListsGlobsAndDirectoriesInOrder) {
  TempDir dir;
  const gpt::TokenDataset data = make_dataset(256, 100, -1);
  fs::create_directory(dir.file("set"));
  for (const char* name : {"set/b.h5", "set/a.h5", "set/c.h5", "x.h5"})
    write_part(dir.file(name), data, 0, 10);
  std::ofstream(dir.file("set/notes.txt")) << "not a shard";
  const std::vector<std::string> sorted = {dir.file("set/a.h5"), dir.file("set/b.h5"),
                                           dir.file("set/c.h5")};
  EXPECT_EQ(gpt::resolve_data_spec(dir.file("set")), sorted);
  EXPECT_EQ(gpt::resolve_data_spec(dir.file("set/*.h5")), sorted);
  EXPECT_EQ(gpt::resolve_data_spec(dir.file("x.h5") + "," + dir.file("set/[ab].h5")),
            (std::vector<std::string>{dir.file("x.h5"), sorted[0], sorted[1]}));
  expect_error([&] { gpt::resolve_data_spec(dir.file("nothing*.h5")); },
               {"glob", dir.file("nothing*.h5"), "matches no file"});
  fs::create_directory(dir.file("empty"));
  expect_error([&] { gpt::resolve_data_spec(dir.file("empty")); },
               {dir.file("empty"), "has no .h5 files"});
  expect_error([&] { gpt::resolve_data_spec(dir.file("x.h5") + ","); }, {"empty item"});
  expect_error([&] { gpt::resolve_data_spec(dir.file("set/a.h5") + "," + dir.file("set")); },
               {dir.file("set/a.h5"), "twice"});
}

// The same tokens as one file and as shards of uneven sizes (one shorter than a window, so
// windows span up to three shards): every token range and every window read the same.
TEST(TokenShards, ShardsReadExactlyAsTheSingleFile) {
  TempDir dir;
  const gpt::TokenDataset data = make_dataset(50257, 5000, 50256);
  write_part(dir.file("whole.h5"), data, 0, 5000);
  const size_t cuts[] = {0, 1234, 1240, 3000, 5000};
  std::string spec;
  for (size_t i = 0; i + 1 < std::size(cuts); ++i) {
    const std::string path = dir.file("part-" + std::to_string(i) + ".h5");
    write_part(path, data, cuts[i], cuts[i + 1]);
    spec += (i ? "," : "") + path;
  }
  const gpt::TokenDataset whole = gpt::load_token_dataset(dir.file("whole.h5"));
  const gpt::TokenDataset sharded = gpt::load_token_dataset(spec);
  ASSERT_EQ(sharded.shards->shards().size(), 4u);
  EXPECT_EQ(sharded.size(), 5000);
  EXPECT_EQ(sharded.vocab_size, 50257);
  EXPECT_EQ(sharded.eot, 50256);
  EXPECT_EQ(all_tokens(sharded), data.tokens);
  for (int64_t T : {1, 7, 64, 1024}) {
    ASSERT_EQ(sharded.num_windows(T), whole.num_windows(T));
    std::vector<int32_t> a(static_cast<size_t>(2 * T)), b(a.size());
    for (int64_t k = 0; k < whole.num_windows(T); k += std::max<int64_t>(1, T / 8)) {
      gpt::read_window(whole, k, T, a.data(), a.data() + T);
      gpt::read_window(sharded, k, T, b.data(), b.data() + T);
      ASSERT_EQ(a, b) << "T=" << T << " window " << k;
    }
  }
}

// More shards than may be open at once: reads reopen closed shards and still read exactly.
TEST(TokenShards, ManyShardsReopenAsNeeded) {
  TempDir dir;
  const gpt::TokenDataset data = make_dataset(256, 4000, -1);
  fs::create_directory(dir.file("many"));
  for (size_t i = 0; i < 40; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "many/%03zu.h5", i);
    write_part(dir.file(name), data, i * 100, i * 100 + 100);
  }
  const gpt::TokenDataset sharded = gpt::load_token_dataset(dir.file("many"));
  ASSERT_EQ(sharded.shards->shards().size(), 40u);
  EXPECT_EQ(sharded.shards->opens(), 40);  // each opened once to be checked
  const int64_t T = 150;
  std::vector<int32_t> window(2 * T), expected(2 * T);
  for (int64_t j = 0; j < 300; ++j) {
    const int64_t k = gpt::sample_window(j, sharded.num_windows(T), gpt::DataOrder::kRandom, 3);
    gpt::read_window(sharded, k, T, window.data(), window.data() + T);
    std::copy_n(data.tokens.begin() + k * T, T, expected.begin());
    std::copy_n(data.tokens.begin() + k * T + 1, T, expected.begin() + T);
    ASSERT_EQ(window, expected) << "window " << k;
  }
  EXPECT_GT(sharded.shards->opens(), 40);
  EXPECT_EQ(all_tokens(sharded), data.tokens);
}

TEST(TokenShards, ShardsThatDisagreeOrAreBadNameTheFile) {
  TempDir dir;
  const gpt::TokenDataset data = make_dataset(256, 100, -1);
  write_part(dir.file("a.h5"), data, 0, 100);
  gpt::TokenDataset other = data;
  other.vocab_size = 300;
  gpt::write_token_dataset(dir.file("vocab.h5"), other);
  other = data;
  other.tokenizer = "gpt2";
  gpt::write_token_dataset(dir.file("tok.h5"), other);
  other = data;
  other.eot = 0;
  gpt::write_token_dataset(dir.file("eot.h5"), other);
  const std::string a = dir.file("a.h5") + ",";
  expect_error([&] { gpt::load_token_dataset(a + dir.file("vocab.h5")); },
               {dir.file("vocab.h5"), "vocab_size 300 differs from 256", dir.file("a.h5")});
  expect_error([&] { gpt::load_token_dataset(a + dir.file("tok.h5")); },
               {dir.file("tok.h5"), "tokenizer gpt2 differs from test-tok"});
  expect_error([&] { gpt::load_token_dataset(a + dir.file("eot.h5")); },
               {dir.file("eot.h5"), "eot 0 differs from (none)"});
  expect_error([&] { gpt::load_token_dataset(a + dir.file("gone.h5")); },
               {dir.file("gone.h5"), "no such file"});
  // A truncated copy: the HDF5 superblock survives, the data does not.
  fs::copy_file(dir.file("a.h5"), dir.file("cut.h5"));
  fs::resize_file(dir.file("cut.h5"), fs::file_size(dir.file("a.h5")) / 2);
  expect_error([&] { gpt::load_token_dataset(a + dir.file("cut.h5")); }, {dir.file("cut.h5")});
}

TEST(TokenShards, RecordedListMatchesOrNamesTheDifference) {
  TempDir dir;
  const gpt::TokenDataset data = make_dataset(256, 100, -1);
  for (const char* name : {"a.h5", "b.h5", "c.h5"}) write_part(dir.file(name), data, 0, 50);
  fs::create_directory(dir.file("long"));
  write_part(dir.file("long/b.h5"), data, 0, 60);  // same name elsewhere, other length
  const gpt::TokenDataset two = gpt::load_token_dataset(dir.file("[ab].h5"));
  const std::string config = gpt::config_with_shards("{\"seed\": 1}", two, nullptr);
  EXPECT_NE(config.find("\"data_shards\":[{\"path\":\"" + dir.file("a.h5") +
                        "\",\"tokens\":50,\"bytes\":"),
            std::string::npos)
      << config;
  gpt::check_recorded_shards(config, "ck.h5", gpt::load_token_dataset(dir.file("[ab].h5")));
  gpt::check_recorded_shards("{\"seed\": 1}", "old.h5", two);  // written before shards were kept
  expect_error(
      [&] {
        gpt::check_recorded_shards(config, "ck.h5", gpt::load_token_dataset(dir.file("*.h5")));
      },
      {"ck.h5", "extra shard " + dir.file("c.h5") + " (50 tokens)"});
  expect_error(
      [&] {
        gpt::check_recorded_shards(config, "ck.h5", gpt::load_token_dataset(dir.file("a.h5")));
      },
      {"ck.h5", "recorded shard " + dir.file("b.h5") + " (50 tokens) is missing"});
  expect_error(
      [&] {
        gpt::check_recorded_shards(
            config, "ck.h5",
            gpt::load_token_dataset(dir.file("a.h5") + "," + dir.file("long/b.h5")));
      },
      {"shard 2 is now " + dir.file("long/b.h5") + " (60 tokens)", "recorded " + dir.file("b.h5")});
  // A copy at another path stands for the shard; a shard of the same length with other tokens
  // does not.
  fs::copy_file(dir.file("b.h5"), dir.file("long/copy.h5"));
  gpt::check_recorded_shards(
      config, "ck.h5", gpt::load_token_dataset(dir.file("a.h5") + "," + dir.file("long/copy.h5")));
  write_part(dir.file("long/other.h5"), data, 50, 100);
  expect_error(
      [&] {
        gpt::check_recorded_shards(
            config, "ck.h5",
            gpt::load_token_dataset(dir.file("a.h5") + "," + dir.file("long/other.h5")));
      },
      {"shard 2 is now " + dir.file("long/other.h5")});
}

// Peak resident memory (VmHWM) in kB, after `reset` restarted it at the current size.
int64_t peak_rss_kb(bool reset) {
  if (reset) std::ofstream("/proc/self/clear_refs") << "5";
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
  return -1;
}

// A data set far larger than what the reader may hold: opening it and reading windows all over
// it grows the peak resident memory by far less than the tokens would take (48M tokens: 96 MB on
// disk, 192 MB as int32 in memory).
TEST(TokenShards, ReadingOnDemandKeepsMemorySmall) {
  TempDir dir;
  constexpr int64_t kShardTokens = 16 << 20, kShards = 3, T = 1024, kWindows = 4000;
  {
    std::vector<int32_t> piece(1 << 20);
    for (int64_t s = 0; s < kShards; ++s) {
      gpt::TokenFileWriter writer(dir.file("big-" + std::to_string(s) + ".h5"), 50257, "gpt2", -1);
      for (int64_t done = 0; done < kShardTokens; done += static_cast<int64_t>(piece.size())) {
        for (size_t i = 0; i < piece.size(); ++i)
          piece[i] = static_cast<int32_t>((done + static_cast<int64_t>(i) + s) % 50257);
        writer.append(piece.data(), piece.size());
      }
      writer.finish();
    }
  }
  const int64_t before = peak_rss_kb(true);
  if (before < 0) GTEST_SKIP() << "no /proc/self/status";
  const gpt::TokenDataset data = gpt::load_token_dataset(dir.file("big-*.h5"));
  ASSERT_EQ(data.size(), kShards * kShardTokens);
  std::vector<int32_t> inputs(T), targets(T);
  const int64_t windows = data.num_windows(T);
  for (int64_t j = 0; j < kWindows; ++j) {
    const int64_t k = gpt::sample_window(j, windows, gpt::DataOrder::kRandom, 7);
    gpt::read_window(data, k, T, inputs.data(), targets.data());
    const int64_t shard = k * T / kShardTokens, local = k * T % kShardTokens;
    ASSERT_EQ(inputs[0], static_cast<int32_t>((local + shard) % 50257)) << "window " << k;
  }
  const int64_t growth_kb = peak_rss_kb(false) - before;
  std::printf("%lld tokens in %zu shards: %lld reads, %lld tokens read, peak RSS +%lld kB\n",
              static_cast<long long>(data.size()), data.shards->shards().size(),
              static_cast<long long>(data.shards->reads()),
              static_cast<long long>(data.shards->tokens_read()),
              static_cast<long long>(growth_kb));
  EXPECT_EQ(data.shards->tokens_read(), kWindows * (T + 1));
  EXPECT_LT(growth_kb, 16 * 1024);  // the tokens alone would be 196608 kB
}
