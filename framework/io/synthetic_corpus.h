// The built-in corpus `train` uses when no --data is given (docs/DESIGN.md "Data"): lines of
// integer addition "a+b=c\n" with a, b uniform in [100, 499] (so every line is 12 characters), as
// bytes (tokenizer "bytes", vocab_size 256). It needs no download, is identical on every rank and
// every run, and has structure a small model visibly learns (the digits of c follow from a and b).
// Train and validation draw from different RNG streams, so the held-out lines are not the training
// lines.
#pragma once

#include "framework/io/dataset.h"

namespace gpt {

// About 1.5 million tokens for train, about 100 thousand for validation; path
// "<built-in train>" or "<built-in validation>", eot -1 (the newline separates the lines).
TokenDataset synthetic_arithmetic_corpus(bool validation);

}  // namespace gpt
