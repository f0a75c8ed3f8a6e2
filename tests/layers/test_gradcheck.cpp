// Finite-difference gradient checks of the whole GPT-2 stage on the CPU backend: for sampled
// elements of every parameter (so every layer's weight half and, through the chain, every input
// half), the central difference of the mean token loss must match the backward's gradient.
// The stage is the full model (embedding, blocks, head) with a padded vocabulary.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "framework/parameter.h"
#include "layers/model_stage.h"
#include "parallel/communicator.h"

namespace gpt {
namespace {

struct TinyModel {
  ModelConfig cfg;
  std::unique_ptr<Backend> backend = make_cpu_backend(1);
  std::unique_ptr<Communicator> tp_comm = make_mpi_communicator(MPI_COMM_SELF, "tp");
  TensorParallel tp{*tp_comm, *backend};
  ParameterStore store{*backend};
  std::unique_ptr<ModelStage> stage;
  std::vector<int32_t> tokens, targets;
  int64_t B = 2;

  explicit TinyModel(int n_layer) {
    cfg.n_layer = n_layer, cfg.n_head = 2, cfg.d_model = 16, cfg.seq_len = 5, cfg.vocab_size = 37;
    stage = std::make_unique<ModelStage>(store, tp, cfg, StageSpec{0, n_layer, true, true, false},
                                         B, 1, 1);
    store.allocate();
    store.initialize(11);
    // Larger-than-init weights make every path's gradient visible above float noise.
    for (Parameter& p : store.params())
      if (p.init == InitKind::kNormal)
        for (int64_t i = 0; i < p.numel(); ++i) p.value[i] *= 10.0f;
    std::mt19937 rng(3);
    std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(cfg.vocab_size - 1));
    for (int64_t i = 0; i < B * cfg.seq_len; ++i)
      tokens.push_back(token(rng)), targets.push_back(token(rng));
  }
  double loss() {
    stage->forward(0, tokens.data(), targets.data());
    return stage->loss_sum(0) / static_cast<double>(B * cfg.seq_len);
  }
};

TEST(GradCheck, EveryParameterOfTheModel) {
  TinyModel m(2);
  m.store.zero_grads();
  const double base = m.loss();
  m.stage->backward(0, 0, 1.0f / static_cast<float>(m.B * m.cfg.seq_len));
  std::mt19937 rng(5);
  const float eps = 1e-2f;
  int checked = 0;
  for (Parameter& p : m.store.params()) {
    std::vector<int64_t> candidates;
    for (const Slab& s : p.slabs)
      for (int64_t i = 0; i < s.numel(); ++i) candidates.push_back(s.local_offset + i);
    std::shuffle(candidates.begin(), candidates.end(), rng);
    candidates.resize(std::min<size_t>(candidates.size(), 12));
    double worst = 0.0;
    for (int64_t i : candidates) {
      const float saved = p.value[i];
      p.value[i] = saved + eps;
      const double plus = m.loss();
      p.value[i] = saved - eps;
      const double minus = m.loss();
      p.value[i] = saved;
      const double numeric = (plus - minus) / (2.0 * eps);
      const double analytic = p.grad[i];
      const double error = std::abs(numeric - analytic);
      worst = std::max(worst, error / (std::abs(numeric) + 1e-3));
      EXPECT_LE(error, 2e-2 * std::abs(numeric) + 2e-4)
          << p.name << "[" << i << "]: numeric " << numeric << " analytic " << analytic;
      ++checked;
    }
    EXPECT_GT(candidates.size(), 0u) << p.name;
  }
  EXPECT_GT(checked, 100);
  EXPECT_TRUE(std::isfinite(base));
}

TEST(GradCheck, PaddedVocabularyRowsGetNoGradient) {
  TinyModel m(1);
  m.store.zero_grads();
  m.loss();
  m.stage->backward(0, 0, 1.0f);
  Parameter* wte = m.store.find("wte");
  ASSERT_NE(wte, nullptr);
  const int64_t C = m.cfg.d_model;
  for (int64_t row = m.cfg.vocab_size; row < m.cfg.padded_vocab(1); ++row)
    for (int64_t c = 0; c < C; ++c) {
      ASSERT_EQ(wte->value[row * C + c], 0.0f);
      ASSERT_EQ(wte->grad[row * C + c], 0.0f);
    }
}

TEST(GradCheck, SplitBackwardEqualsPlainBackwardAndAccumulates) {
  TinyModel m(2);
  const float scale = 0.1f;
  m.store.zero_grads();
  m.loss();
  m.stage->backward(0, 0, scale);
  std::vector<float> once(m.store.grads(), m.store.grads() + m.store.total_numel());
  // A second microbatch's backward adds to the same gradients (accumulation over microbatches).
  m.loss();
  m.stage->backward_input(0, 0, scale);
  m.stage->backward_weight(0, 0);
  for (int64_t i = 0; i < m.store.total_numel(); ++i)
    ASSERT_FLOAT_EQ(m.store.grads()[i], 2.0f * once[static_cast<size_t>(i)]) << i;
}

}  // namespace
}  // namespace gpt
