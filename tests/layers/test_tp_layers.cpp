// Tensor parallelism against the serial model, in one job: every rank builds the full model on
// its own (tp 1 over MPI_COMM_SELF) and its shard of the same model at tp = world size. The
// shard's initial weights must equal the serial weights at the slab positions (layout-independent
// init), its loss must equal the serial loss, and its gradients the serial gradients at those
// positions, to float32 rounding; with and without sequence parallelism.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "framework/parameter.h"
#include "layers/model_stage.h"
#include "parallel/process_grid.h"

namespace gpt {
namespace {

struct Model {
  std::unique_ptr<Backend> backend = make_cpu_backend(1);
  TensorParallel tp;
  ParameterStore store{*backend};
  std::unique_ptr<ModelStage> stage;
  Model(Communicator& comm, const ModelConfig& cfg, int64_t B, bool sequence_parallel)
      : tp(comm, *backend, sequence_parallel) {
    stage = std::make_unique<ModelStage>(store, tp, cfg,
                                         StageSpec{0, cfg.n_layer, true, true, false}, B, 1, 1);
    store.allocate();
    store.initialize(42);
  }
};

void check_shards_equal_serial(bool sequence_parallel) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  ModelConfig cfg;
  cfg.n_layer = 2, cfg.n_head = 4, cfg.d_model = 32, cfg.seq_len = 8, cfg.vocab_size = 100;
  const int64_t B = 2, N = B * cfg.seq_len;
  GridOptions options;
  options.shape = {world, 1, 1};
  ProcessGrid grid(MPI_COMM_WORLD, options);
  std::unique_ptr<Communicator> self = make_mpi_communicator(MPI_COMM_SELF, "tp");
  Model serial(*self, cfg, B, false), sharded(grid.tp(), cfg, B, sequence_parallel);

  std::mt19937 rng(9);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(cfg.vocab_size - 1));
  std::vector<int32_t> tokens(N), targets(N);
  for (int64_t i = 0; i < N; ++i) tokens[i] = token(rng), targets[i] = token(rng);

  double losses[2];
  Model* models[2] = {&serial, &sharded};
  for (int k = 0; k < 2; ++k) {
    models[k]->store.zero_grads();
    models[k]->stage->forward(0, tokens.data(), targets.data());
    losses[k] = models[k]->stage->loss_sum(0);
    models[k]->stage->backward(0, 0, 1.0f / static_cast<float>(N));
    models[k]->stage->reduce_partial_tp_grads();
  }
  EXPECT_NEAR(losses[1], losses[0], 1e-5 * std::abs(losses[0]));

  for (Parameter& p : sharded.store.params()) {
    Parameter* full = serial.store.find(p.name);
    ASSERT_NE(full, nullptr) << p.name;
    double grad_diff = 0.0, grad_norm = 0.0;
    for (const Slab& slab : p.slabs) {
      const std::vector<int64_t> logical = slab_logical_indices(slab, p.shape);
      for (size_t i = 0; i < logical.size(); ++i) {
        const int64_t local = slab.local_offset + static_cast<int64_t>(i);
        ASSERT_EQ(p.value[local], full->value[logical[i]]) << p.name << " init differs";
        const double d = p.grad[local] - full->grad[logical[i]];
        grad_diff += d * d;
        grad_norm += static_cast<double>(full->grad[logical[i]]) * full->grad[logical[i]];
      }
    }
    EXPECT_LE(std::sqrt(grad_diff), 1e-5 * std::sqrt(grad_norm) + 1e-9) << p.name;
  }
}

TEST(TensorParallelModel, ShardsEqualTheSerialModel) {
  check_shards_equal_serial(false);
}

TEST(TensorParallelModel, SequenceParallelShardsEqualTheSerialModel) {
  check_shards_equal_serial(true);
}

}  // namespace
}  // namespace gpt
