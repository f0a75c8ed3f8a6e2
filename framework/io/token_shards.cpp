// Resolving --data into shard files, opening and validating them, and reading token ranges on
// demand (see token_shards.h).
#include "framework/io/token_shards.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>

#include "framework/check.h"
#include "framework/checked_size.h"
#include "framework/io/hdf5_util.h"
#include "framework/json.h"
#include "framework/user_files.h"

namespace gpt {

namespace fs = std::filesystem;

struct ShardReader::Open {
  h5::Handle file, tokens;
};

namespace {

// A scan of a file without max_token reads this many tokens at a time: memory stays bounded.
constexpr int64_t kScanTokens = 1 << 20;

bool is_glob(const std::string& item) {
  return item.find_first_of("*?[") != std::string::npos;
}

std::vector<std::string> glob_matches(const std::string& pattern) {
  glob_t g{};
  const int rc = glob(pattern.c_str(), 0, nullptr, &g);  // matches come sorted
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  GPT_INPUT_CHECK(rc == 0 || rc == GLOB_NOMATCH, "--data glob " << pattern << " cannot be read");
  GPT_INPUT_CHECK(!out.empty(), "--data glob " << pattern << " matches no file");
  return out;
}

std::vector<std::string> directory_shards(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".h5" && !e.is_directory(ec)) out.push_back(e.path().string());
  GPT_INPUT_CHECK(!ec, "--data directory " << dir << " cannot be listed: " << ec.message());
  GPT_INPUT_CHECK(!out.empty(), "--data directory " << dir << " has no .h5 files");
  std::sort(out.begin(), out.end());
  return out;
}

// Reads [start, start + count) of one open /tokens dataset as uint32 into out (int32 storage:
// same size, and every valid token is below vocab_size <= 2^31-1, so the bits agree).
void read_range(hid_t tokens, int64_t start, int64_t count, int32_t* out) {
  const auto first = static_cast<hsize_t>(start), n = static_cast<hsize_t>(count);
  h5::Handle file_space(GPT_H5_CHECK(H5Dget_space(tokens)));
  GPT_H5_CHECK(H5Sselect_hyperslab(file_space.id(), H5S_SELECT_SET, &first, nullptr, &n, nullptr));
  h5::Handle memory_space(GPT_H5_CHECK(H5Screate_simple(1, &n, nullptr)));
  GPT_H5_CHECK(H5Dread(tokens, H5T_NATIVE_UINT32, memory_space.id(), file_space.id(), H5P_DEFAULT,
                       reinterpret_cast<uint32_t*>(out)));
}

// Every filter /tokens was written through must be one this HDF5 library can decode: h5py's own
// LZF (filter 32000) is not, nor is any other plugin filter Debian's libhdf5 lacks, and reading
// would fail inside HDF5 with a message naming no filter.
void check_filters_available(hid_t creation) {
  const int filters = GPT_H5_CHECK(H5Pget_nfilters(creation));
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0, config = 0;
    size_t values = 0;
    char name[64] = {};
    const H5Z_filter_t id = H5Pget_filter2(creation, static_cast<unsigned>(i), &flags, &values,
                                           nullptr, sizeof name, name, &config);
    GPT_INPUT_CHECK(id >= 0, "/tokens has a filter HDF5 cannot describe (" << i << ")");
    const htri_t available = H5Zfilter_avail(id);
    if (available > 0) continue;
    name[sizeof name - 1] = '\0';
    const std::string shown = name[0] != '\0' ? quoted_excerpt(name) : std::string("(unnamed)");
    fail_input(GPT_MSG("/tokens is compressed with the filter "
                       << shown << " (HDF5 filter id " << id << (id == 32000 ? ", h5py's LZF" : "")
                       << "), which this HDF5 library cannot decode: rewrite it with "
                          "compression=\"gzip\" or none (h5py: f.create_dataset(\"tokens\", "
                          "data=tokens))"));
  }
}

// /tokens without a chunk cache (see the header), its data in the file itself: external storage
// or a virtual dataset would have HDF5 open other files the user never named (a FIFO among them
// blocks the read forever).
h5::Handle open_tokens(hid_t file) {
  h5::Handle access(GPT_H5_CHECK(H5Pcreate(H5P_DATASET_ACCESS)));
  GPT_H5_CHECK(H5Pset_chunk_cache(access.id(), 0, 0, 1.0));
  h5::Handle tokens(H5Dopen2(file, "/tokens", access.id()));
  GPT_INPUT_CHECK(tokens.valid(), "/tokens cannot be opened (" << h5::last_error_message() << ")");
  h5::Handle creation(GPT_H5_CHECK(H5Dget_create_plist(tokens.id())));
  GPT_INPUT_CHECK(GPT_H5_CHECK(H5Pget_external_count(creation.id())) == 0,
                  "/tokens keeps its data in external files; only data stored in the file is read");
  GPT_INPUT_CHECK(GPT_H5_CHECK(H5Pget_layout(creation.id())) != H5D_VIRTUAL,
                  "/tokens is a virtual dataset; only data stored in the file is read");
  check_filters_available(creation.id());
  return tokens;
}

// Tokens read from a shard at its position `start` onwards, each below its vocab_size; the
// message leaves out the file, which the caller prefixes.
void check_tokens(int64_t vocab_size, int64_t start, int64_t count, const int32_t* tokens) {
  const auto* raw = reinterpret_cast<const uint32_t*>(tokens);
  const auto limit = static_cast<uint64_t>(vocab_size);
  for (int64_t i = 0; i < count; ++i)
    GPT_INPUT_CHECK(raw[i] < limit, "token " << raw[i] << " at position " << start + i
                                             << " is not below vocab_size " << vocab_size);
}

// Opens one shard and checks it; messages leave out the file, which the caller prefixes.
TokenShard open_shard(const std::string& path, h5::Handle& file, h5::Handle& tokens) {
  htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  GPT_INPUT_CHECK(is_hdf5 > 0, "not an HDF5 file (or not readable)");
  file = h5::Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  GPT_INPUT_CHECK(file.valid(), "cannot be opened as HDF5 (" << h5::last_error_message() << ")");
  GPT_INPUT_CHECK(h5::has_link(file.id(), "/tokens") && h5::is_dataset(file.id(), "/tokens"),
                  "has no /tokens dataset");
  tokens = open_tokens(file.id());
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
  // Every token must be in the file: a /tokens declared long but never written (or cut short)
  // would read as fill values, scanned below for as long as its shape claims. Compressed data
  // stores less than it declares, so only unfiltered data is held to this.
  h5::Handle creation(GPT_H5_CHECK(H5Dget_create_plist(tokens.id())));
  if (GPT_H5_CHECK(H5Pget_nfilters(creation.id())) == 0) {
    const std::optional<int64_t> declared = checked_numel(shape, static_cast<int64_t>(type_size));
    const auto stored = static_cast<int64_t>(H5Dget_storage_size(tokens.id()));
    GPT_INPUT_CHECK(declared && stored >= *declared,
                    "/tokens declares " << shape[0] << " tokens but stores " << stored
                                        << " bytes of them (never written or truncated)");
  }

  TokenShard shard;
  shard.path = path;
  shard.tokens = shape[0];
  std::optional<int64_t> vocab_size = h5::read_int64_attribute(file.id(), "vocab_size");
  GPT_INPUT_CHECK(vocab_size.has_value(), "has no vocab_size attribute");
  GPT_INPUT_CHECK(*vocab_size >= 1 && *vocab_size <= std::numeric_limits<int32_t>::max(),
                  "vocab_size " << *vocab_size << " is not in [1, 2^31-1]");
  shard.vocab_size = *vocab_size;
  std::optional<std::string> tokenizer = h5::read_string_attribute(file.id(), "tokenizer");
  GPT_INPUT_CHECK(tokenizer.has_value() && !tokenizer->empty(),
                  "has no tokenizer attribute (e.g. \"bytes\")");
  shard.tokenizer = *tokenizer;
  if (std::optional<int64_t> eot = h5::read_int64_attribute(file.id(), "eot")) {
    GPT_INPUT_CHECK(*eot >= 0 && *eot < shard.vocab_size,
                    "eot " << *eot << " is not a token below vocab_size " << shard.vocab_size);
    shard.eot = *eot;
  }
  // max_token (written by prepare-data) settles the range without a scan; files without it
  // (written by hand, with h5py) are scanned in bounded pieces. Either way the first and last
  // tokens are read, so a file whose data cannot be read fails here, not mid-run.
  std::vector<int32_t> piece(static_cast<size_t>(std::min(kScanTokens, shard.tokens)));
  std::optional<int64_t> max_token = h5::read_int64_attribute(file.id(), "max_token");
  if (max_token) {
    GPT_INPUT_CHECK(*max_token < shard.vocab_size,
                    "max_token " << *max_token << " is not below vocab_size " << shard.vocab_size);
    read_range(tokens.id(), 0, 1, piece.data());
    read_range(tokens.id(), shard.tokens - 1, 1, piece.data());
    return shard;
  }
  for (int64_t start = 0; start < shard.tokens; start += kScanTokens) {
    const int64_t n = std::min(kScanTokens, shard.tokens - start);
    read_range(tokens.id(), start, n, piece.data());
    check_tokens(shard.vocab_size, start, n, piece.data());
  }
  return shard;
}

}  // namespace

std::vector<std::string> resolve_data_spec(const std::string& spec) {
  std::vector<std::string> paths;
  size_t begin = 0;
  while (begin <= spec.size()) {
    const size_t end = std::min(spec.find(',', begin), spec.size());
    const std::string item = spec.substr(begin, end - begin);
    GPT_INPUT_CHECK(!item.empty(), "--data " << spec << " has an empty item");
    std::error_code ec;
    std::vector<std::string> named = is_glob(item)                ? glob_matches(item)
                                     : fs::is_directory(item, ec) ? directory_shards(item)
                                                                  : std::vector<std::string>{item};
    paths.insert(paths.end(), named.begin(), named.end());
    begin = end + 1;
  }
  std::set<std::string> seen;
  for (const std::string& p : paths)
    GPT_INPUT_CHECK(seen.insert(fs::weakly_canonical(p).string()).second,
                    "--data " << spec << " names " << p << " twice");
  return paths;
}

ShardReader::ShardReader(const std::vector<std::string>& paths) {
  h5::silence_errors();
  GPT_CHECK(!paths.empty(), "ShardReader with no files");
  for (const std::string& path : paths) {
    require_regular_file(path, "data set");  // before HDF5 opens it: a FIFO would block
    auto open = std::make_unique<Open>();
    try {
      shards_.push_back(open_shard(path, open->file, open->tokens));
    } catch (const Error& e) {
      fail_input("data set " + path + ": " + e.what());
    }
    const TokenShard &first = shards_.front(), &shard = shards_.back();
    auto differ = [&](const char* what, const std::string& mine, const std::string& theirs) {
      fail_input(GPT_MSG("data set " << path << ": " << what << " " << mine << " differs from "
                                     << theirs << " in " << first.path
                                     << " (the shards of one data set must agree)"));
    };
    if (shard.vocab_size != first.vocab_size)
      differ("vocab_size", std::to_string(shard.vocab_size), std::to_string(first.vocab_size));
    if (shard.tokenizer != first.tokenizer)
      differ("tokenizer", shown_excerpt(shard.tokenizer), shown_excerpt(first.tokenizer));
    if (shard.eot != first.eot)
      differ("eot", shard.eot < 0 ? "(none)" : std::to_string(shard.eot),
             first.eot < 0 ? "(none)" : std::to_string(first.eot));
    offsets_.push_back(size_);
    size_ += shard.tokens;
    ++opens_;
    last_read_.push_back(0);
    // The first kMaxOpenShards stay open; the others are reopened when read.
    open_.push_back(open_count_ < kMaxOpenShards ? std::move(open) : nullptr);
    open_count_ += open_.back() ? 1 : 0;
  }
}

const ShardReader::Open& ShardReader::handles(size_t i) const {
  last_read_[i] = reads_ + 1;
  if (open_[i]) return *open_[i];
  if (open_count_ >= kMaxOpenShards) {
    size_t oldest = open_.size();
    for (size_t k = 0; k < open_.size(); ++k)
      if (open_[k] && (oldest == open_.size() || last_read_[k] < last_read_[oldest])) oldest = k;
    open_[oldest].reset();
    --open_count_;
  }
  const TokenShard& shard = shards_[i];
  auto open = std::make_unique<Open>();
  try {
    GPT_INPUT_CHECK(is_regular_file(shard.path), "is no longer a regular file");
    open->file = h5::Handle(H5Fopen(shard.path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    GPT_INPUT_CHECK(open->file.valid(),
                    "cannot be opened again (" << h5::last_error_message() << ")");
    open->tokens = open_tokens(open->file.id());
    const std::vector<int64_t> shape = h5::dataset_shape(open->tokens.id());
    GPT_INPUT_CHECK(shape.size() == 1 && shape[0] == shard.tokens,
                    "changed during the run (" << shard.tokens << " tokens at start)");
  } catch (const Error& e) {
    fail_input("data set " + shard.path + ": " + e.what());
  }
  ++opens_;
  ++open_count_;
  open_[i] = std::move(open);
  return *open_[i];
}

ShardReader::~ShardReader() = default;

void ShardReader::read(int64_t start, int64_t count, int32_t* out) const {
  GPT_CHECK(start >= 0 && count >= 0 && start + count <= size_,
            "token range [" << start << ", " << start + count << ") outside [0, " << size_ << ")");
  // The shard holding `start`: the last whose offset is <= start.
  auto i = static_cast<size_t>(std::upper_bound(offsets_.begin(), offsets_.end(), start) -
                               offsets_.begin() - 1);
  while (count > 0) {
    const int64_t local = start - offsets_[i], n = std::min(count, shards_[i].tokens - local);
    const Open& open = handles(i);
    try {
      read_range(open.tokens.id(), local, n, out);
    } catch (const Error& e) {
      fail_input(GPT_MSG("data set " << shards_[i].path << ": cannot read tokens [" << local << ", "
                                     << local + n << ") (" << h5::last_error_message() << ")"));
    }
    // Every read is checked as well (cheap beside the model's work): a max_token attribute that
    // lies, or a file changed since it was opened, fails here rather than indexing past the
    // embedding table.
    try {
      check_tokens(shards_[i].vocab_size, local, n, out);
    } catch (const Error& e) {
      fail_input("data set " + shards_[i].path + ": " + e.what());
    }
    ++reads_;
    tokens_read_ += n;
    out += n;
    start += n;
    count -= n;
    ++i;
  }
}

}  // namespace gpt
