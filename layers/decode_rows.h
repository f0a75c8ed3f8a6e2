// The token rows of one generation or serving step, as the layers see them. A step runs R rows,
// each a token of some sequence at some position: a prompt's rows (prefill, possibly in chunks)
// and one new token per decoding sequence alike, in any mix. Every row's key and value go to a
// slot of the paged key/value cache (a pool of fixed-size blocks, Backend::paged_kv_store), and
// its query attends over its own sequence's positions 0..position through that sequence's block
// table. Every layer computes each row alone (row-wise kernels, Backend::matmul_forward_rows), so
// a row's result does not depend on the other rows of the step.
#pragma once

#include <cstdint>
#include <vector>

namespace gpt {

// What a stage's decode state is sized for.
struct DecodeCapacity {
  int64_t rows = 1;           // the most token rows of one step
  int64_t kv_blocks = 1;      // blocks in the key/value pool
  int64_t block_tokens = 16;  // positions per block
};

// A step as its caller describes it, in host memory (the same on every rank of a stage).
struct DecodeBatch {
  std::vector<int32_t> tokens;     // (R) the rows' tokens (read by the first stage)
  std::vector<int32_t> positions;  // (R) each row's position in its sequence
  std::vector<int32_t> slots;      // (R) pool slot of each row's key and value
  std::vector<int32_t>
      block_tables;                 // (R, max_blocks) each row's sequence's blocks, -1 past its end
  std::vector<int32_t> logit_rows;  // the rows whose next-token logits the last stage computes
  int64_t rows() const { return static_cast<int64_t>(positions.size()); }
};

// The step's rows on a rank: host positions, and the pool addressing in backend memory.
struct DecodeRows {
  int64_t count = 0;
  const int32_t* positions = nullptr;     // host (R)
  const int32_t* slots = nullptr;         // backend (R)
  const int32_t* block_tables = nullptr;  // backend (R, max_blocks)
  const int32_t* lengths = nullptr;       // backend (R): position + 1
  int64_t max_blocks = 0;
  int64_t block_tokens = 0;
};

}  // namespace gpt
