// The model's step for generation and serving: a DecodeBatch (layers/decode_rows.h: token rows of
// any sequences at any positions, over the paged key/value cache) through this rank's pipeline
// stage. Every rank of the run calls run() with the same batch and tag; a stage after the first
// receives the rows' activations from the one before it, and every stage but the last sends its
// output on, without waiting for the receiver (the send completes before the stage's next step
// overwrites it), so that several batches can be in flight in a pipeline at once (serve) or one
// can pass through the stages in turn (generate). tp ranks of a stage run the same rows.
#pragma once

#include <memory>
#include <vector>

#include "launch/runtime/runtime.h"
#include "layers/decode_rows.h"

namespace gpt {

class DecodeEngine {
 public:
  DecodeEngine(Runtime& rt, const DecodeCapacity& capacity);
  ~DecodeEngine();
  DecodeEngine(const DecodeEngine&) = delete;
  DecodeEngine& operator=(const DecodeEngine&) = delete;

  const DecodeCapacity& capacity() const { return state_.capacity; }
  int64_t max_blocks() const { return state_.max_blocks; }  // a table's width
  // The last stage's logits of batch.logit_rows (V floats each, in order), gathered over tp;
  // empty on the other stages. Tags: the pipeline hop's, so batches in flight keep apart.
  std::vector<std::vector<float>> run(const DecodeBatch& batch, int tag);
  // Waits for this stage's last send (before the engine goes away, or the run ends).
  void finish_sends();

 private:
  Runtime& rt_;
  StageDecodeState state_;
  std::unique_ptr<Request> pending_send_;
};

// Appends `count` rows of one sequence to `batch`: tokens[i] at position first_position + i,
// addressed through the sequence's block table (which must cover them; blocks of block_tokens
// positions, each row's table padded with -1 to max_blocks); with wants_logits, the last row's
// next-token logits are asked for. generate's prefill and serve's scheduler both build rows here.
void append_sequence_rows(DecodeBatch& batch, int64_t max_blocks, int64_t block_tokens,
                          const std::vector<int32_t>& table, const int32_t* tokens, int64_t count,
                          int64_t first_position, bool wants_logits);

}  // namespace gpt
