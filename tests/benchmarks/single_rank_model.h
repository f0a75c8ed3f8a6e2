// The whole model on one rank (tp 1, pp 1) with AdamW and a random batch: what the training
// benchmarks (bench_train on the CPU, bench_gpu on CUDA) time, built the same way for both.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include <mpi.h>

#include "layers/model_stage.h"
#include "optimizers/optimizer.h"
#include "parallel/communicator.h"

namespace gpt {

struct SingleRankModel {
  // Parameters initialised from seed 1; tokens and targets drawn uniformly from [0, max_token].
  SingleRankModel(Backend& backend, const ModelConfig& cfg, int64_t micro_batch, int32_t max_token)
      : self(make_mpi_communicator(MPI_COMM_SELF, "tp")),
        tp(*self, backend),
        store(backend),
        stage(store, tp, cfg, StageSpec{0, cfg.n_layer, true, true, false}, micro_batch, 1, 1),
        tokens(static_cast<size_t>(micro_batch * cfg.seq_len)),
        targets(tokens.size()) {
    store.allocate();
    store.initialize(1);
    adamw = make_optimizer(OptimizerKind::kAdamW, store, OptimizerOptions{});
    std::mt19937 rng(1);
    std::uniform_int_distribution<int32_t> token(0, max_token);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = token(rng), targets[i] = token(rng);
  }

  // One optimizer step on the batch: forward, backward, AdamW at a fixed learning rate.
  void step() {
    store.zero_grads();
    stage.forward(0, tokens.data(), targets.data());
    stage.backward(0, 0, 1.0f / static_cast<float>(tokens.size()));
    adamw->step(store, 1e-4);
  }

  std::unique_ptr<Communicator> self;
  TensorParallel tp;
  ParameterStore store;
  ModelStage stage;
  std::unique_ptr<Optimizer> adamw;
  std::vector<int32_t> tokens, targets;
};

}  // namespace gpt
