// Token files on disk, read on demand (docs/DESIGN.md "Data"). A data set named by --data is one or
// more HDF5 token files ("shards") read as one stream: their /tokens concatenated in the order
// given. A ShardReader reads only the hyperslab a caller asks for, so a rank's memory does not
// grow with the data set: nothing is loaded whole, the chunk cache is off (windows are drawn at
// random: a cached chunk would hold tokens never read again), and at most kMaxOpenShards files
// are open at once (HDF5 costs about 0.6 MB per open file, so a thousand open shards would cost
// more than the tokens a rank reads), the least recently read closed first.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpt {

// One shard: its file, token count and the attributes every shard of a set must share.
struct TokenShard {
  std::string path;
  int64_t tokens = 0;
  int64_t vocab_size = 0;
  std::string tokenizer;
  int64_t eot = -1;  // -1: no eot attribute
};

// The files a --data value names, in order: comma-separated items, each a file, a directory (its
// *.h5 files in name order) or a glob with * ? [ (its matches in name order). A glob matching
// nothing, a directory without .h5 files, an empty item or a file named twice is an input error
// naming it; whether each file is a valid shard is ShardReader's to check.
std::vector<std::string> resolve_data_spec(const std::string& spec);

class ShardReader {
 public:
  static constexpr size_t kMaxOpenShards = 16;

  // Opens and validates each file (the checks of load_token_dataset, each error naming its file)
  // and checks that they agree on vocab_size, tokenizer and eot.
  explicit ShardReader(const std::vector<std::string>& paths);
  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  const std::vector<TokenShard>& shards() const { return shards_; }
  int64_t size() const { return size_; }  // tokens in all shards

  // Tokens [start, start + count) of the concatenated stream into out (hyperslab reads of each
  // shard the range touches). A failed read is an error naming the shard.
  void read(int64_t start, int64_t count, int32_t* out) const;

  // The reader's own accounting: calls and tokens read so far. It holds no token buffer: every
  // read goes straight from the file into the caller's memory.
  int64_t reads() const { return reads_; }
  int64_t tokens_read() const { return tokens_read_; }
  int64_t opens() const { return opens_; }  // files opened, the first opening included

 private:
  struct Open;  // HDF5 handles, kept out of this header
  std::vector<TokenShard> shards_;
  std::vector<int64_t> offsets_;  // offsets_[i]: first token of shard i in the stream
  // Shard i's open handles (null while closed) and when it was last read, for closing the least
  // recently read one when kMaxOpenShards are open.
  mutable std::vector<std::unique_ptr<Open>> open_;
  mutable std::vector<int64_t> last_read_;
  int64_t size_ = 0;
  mutable int64_t reads_ = 0, tokens_read_ = 0, opens_ = 0;
  mutable size_t open_count_ = 0;

  // Shard i's handles, opening it (and closing the least recently read shard) if needed.
  const Open& handles(size_t i) const;
};

}  // namespace gpt
