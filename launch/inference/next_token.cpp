// The full-window forward and the KV-cache decoder of generate (see next_token.h).
#include "launch/inference/next_token.h"

#include <algorithm>

#include "framework/check.h"

namespace gpt {

namespace {

// The tag of a decode step's row between stages; the executor's tags of a forward-only run of
// one microbatch stay far below it, and MPI guarantees tags up to 32767.
constexpr int kDecodeTag = 32767;

}  // namespace

WindowForward::WindowForward(Runtime& rt)
    : rt_(rt),
      window_(static_cast<size_t>(rt.model().seq_len)),
      targets_(window_.size(), 0),
      batch_{window_.data(), targets_.data(), 1, 1.0f, {}},
      chunk_(rt.stage()),
      schedule_(make_forward_only_schedule(rt.grid().shape().pp, 1, 1)),
      executor_(rt.grid().pp(), 1) {
  chunk_.begin(&batch_, nullptr);
}

std::vector<float> WindowForward::next(const std::vector<int32_t>& sequence) {
  const int64_t used = std::min(static_cast<int64_t>(sequence.size()), rt_.model().seq_len);
  std::fill(window_.begin(), window_.end(), 0);
  std::copy(sequence.end() - used, sequence.end(), window_.begin());
  executor_.run(schedule_, {&chunk_});
  if (!rt_.grid().is_last_stage()) return {};
  return rt_.stage().gather_last_logits(0, used - 1);
}

namespace {

DecodeCapacity generate_capacity(const ModelConfig& model) {
  DecodeCapacity c;
  c.rows = std::min(model.seq_len, KvCacheDecoder::kPrefillRows);
  c.block_tokens = KvCacheDecoder::kBlockTokens;
  c.kv_blocks = (model.seq_len + c.block_tokens - 1) / c.block_tokens;  // one whole window
  return c;
}

}  // namespace

KvCacheDecoder::KvCacheDecoder(Runtime& rt)
    : rt_(rt),
      engine_(rt, generate_capacity(rt.model())),
      pool_(engine_.capacity().kv_blocks, engine_.capacity().block_tokens) {}

std::vector<float> KvCacheDecoder::next(const std::vector<int32_t>& sequence) {
  const int64_t n = static_cast<int64_t>(sequence.size()), T = rt_.model().seq_len;
  GPT_CHECK(n >= 1, "the next token of an empty sequence");
  const bool extends = n == static_cast<int64_t>(cached_.size()) + 1 && n <= T &&
                       std::equal(cached_.begin(), cached_.end(), sequence.begin());
  int64_t first = static_cast<int64_t>(cached_.size());  // the first row to run
  const int32_t* window = sequence.data();
  if (!extends) {  // prefill the window of the last min(n, T) tokens from position 0
    pool_.release(table_);
    cached_.clear();
    first = 0;
    window = sequence.data() + (n - std::min(n, T));
  }
  const int64_t end = std::min(n, T);
  GPT_CHECK(pool_.reserve(table_, end), "the key/value pool holds a whole window");
  std::vector<float> logits;
  for (int64_t start = first; start < end; start += engine_.capacity().rows) {
    const int64_t count = std::min(engine_.capacity().rows, end - start);
    DecodeBatch batch;
    append_sequence_rows(batch, engine_.max_blocks(), engine_.capacity().block_tokens, table_,
                         window + start, count, start, start + count == end);
    std::vector<std::vector<float>> rows = engine_.run(batch, kDecodeTag);
    if (!rows.empty()) logits = std::move(rows.back());
  }
  engine_.finish_sends();
  cached_.assign(window, window + end);
  // Past seq_len the cache holds a window that the next token cannot extend.
  if (n > T) cached_.clear();
  return logits;
}

}  // namespace gpt
