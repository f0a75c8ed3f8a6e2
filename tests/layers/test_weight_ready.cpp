// ModelChunk's weight-ready hook, the dp buckets' trigger, on the CPU backend: over a step of whole
// backwards every parameter of the stage is reported final exactly once, during the final
// microbatch's backward. In bf16 the stored blocks (and, in either precision, the blocks
// recomputed in full) run their weight halves inside the input pass, so that is where theirs
// must be reported; a block missed there would only be reduced after the backward.
#include <gtest/gtest.h>

#include <vector>

#include "framework/parameter.h"
#include "layers/model_chunk.h"
#include "parallel/communicator.h"

namespace gpt {
namespace {

TEST(WeightReady, EveryParameterOnceDuringTheFinalBackward) {
  const int64_t B = 2, microbatches = 2;
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    for (const int64_t full_blocks : {0, 1}) {
      const std::unique_ptr<Backend> backend = make_cpu_backend(1, precision);
      const std::unique_ptr<Communicator> comm = make_mpi_communicator(MPI_COMM_SELF, "tp");
      TensorParallel tp{*comm, *backend};
      ParameterStore store{*backend};
      ModelConfig cfg;
      cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 16, cfg.seq_len = 5, cfg.vocab_size = 37;
      const ChunkRecompute recompute{.mode = full_blocks > 0 ? Recompute::kFull : Recompute::kNone,
                                     .full_blocks = full_blocks};
      ModelStage stage(store, tp, cfg, StageSpec{0, 2, true, true, false}, B, 1, 1, recompute);
      store.allocate();
      store.initialize(11);
      ModelChunk chunk(stage);
      std::vector<int32_t> tokens(static_cast<size_t>(microbatches * B * cfg.seq_len));
      for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i % 37);
      const MicrobatchData data{.tokens = tokens.data(),
                                .targets = tokens.data(),
                                .microbatches = static_cast<int>(microbatches),
                                .loss_scale = 0.1f,
                                .valid_sequences = {}};
      std::vector<int> reported(store.params().size(), 0);
      std::vector<int> during(store.params().size(), -1);
      int microbatch = 0;
      chunk.begin(&data, [&](size_t first, size_t end) {
        for (size_t i = first; i < end; ++i) ++reported[i], during[i] = microbatch;
      });
      for (; microbatch < microbatches; ++microbatch) {
        chunk.forward(0, microbatch);
        chunk.backward_input(0, 0, microbatch, true);
        chunk.backward_weight(0, 0, microbatch);
      }
      for (size_t i = 0; i < reported.size(); ++i) {
        EXPECT_EQ(reported[i], 1) << store.params()[i].name << " (bf16 "
                                  << (precision == Precision::kBf16) << ", recomputed "
                                  << full_blocks << ")";
        EXPECT_EQ(during[i], microbatches - 1) << store.params()[i].name;
      }
    }
  }
}

}  // namespace
}  // namespace gpt
