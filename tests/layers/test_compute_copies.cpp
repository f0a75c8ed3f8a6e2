// The bf16 compute copies of the weights (framework/parameter.h) on the CPU backend: what they
// hold and cost, and that a run's products read the values as they are when each layer's
// forward starts (after its weight-needed hook, where the ZeRO-1 gather lands), never a copy
// left from an earlier run.
#include <gtest/gtest.h>

#include <vector>

#include "framework/bf16.h"
#include "framework/parameter.h"
#include "layers/model_chunk.h"
#include "parallel/communicator.h"

namespace gpt {
namespace {

std::vector<float> host_values(Backend& backend, const float* values, int64_t n) {
  std::vector<float> host(static_cast<size_t>(n));
  backend.copy_to_host(host.data(), values, host.size() * sizeof(float));
  return host;
}

TEST(ComputeCopies, HoldTheValuesInBf16AndOnlyUnderBf16) {
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    const std::unique_ptr<Backend> backend = make_cpu_backend(1, precision);
    ParameterStore store{*backend};
    Parameter& a = store.add({.name = "a",
                              .shape = {3, 5},
                              .local_numel = 15,
                              .slabs = {{{0, 0}, {3, 5}, 0}},
                              .init = InitKind::kNormal,
                              .init_std = 1.0f});
    Parameter& b = store.add({.name = "b",
                              .shape = {7},
                              .local_numel = 7,
                              .slabs = {{{0}, {7}, 0}},
                              .init = InitKind::kNormal,
                              .init_std = 1.0f});
    store.allocate({1, 0});  // a padding element after a
    const int64_t weight_bytes = backend->memory().live()[MemoryCategory::kWeights];
    store.initialize(3);
    store.refresh_compute_copies(0, 2);
    if (precision == Precision::kFp32) {
      EXPECT_EQ(a.compute, nullptr);
      EXPECT_EQ(b.compute, nullptr);
      EXPECT_EQ(weight_bytes, 128);  // 23 floats (a padding element) in 64-byte blocks
      continue;
    }
    EXPECT_EQ(weight_bytes, 128 + 64);  // and 23 bf16 values

    for (const Parameter* p : {&a, &b}) {
      ASSERT_NE(p->compute, nullptr);
      const std::vector<float> values = host_values(*backend, p->value, p->numel());
      std::vector<uint16_t> copy(values.size());
      backend->copy_to_host(copy.data(), p->compute, copy.size() * sizeof(uint16_t));
      for (size_t i = 0; i < values.size(); ++i)
        EXPECT_EQ(copy[i], float_to_bf16(values[i])) << p->name << "[" << i << "]";
    }
  }
}

// A bf16 stage of GPT-2's shape on one rank and its store, values from `seed`.
struct TinyModel {
  std::unique_ptr<Backend> backend = make_cpu_backend(1, Precision::kBf16);
  std::unique_ptr<Communicator> comm = make_mpi_communicator(MPI_COMM_SELF, "tp");
  TensorParallel tp{*comm, *backend};
  ParameterStore store{*backend};
  ModelConfig cfg = [] {
    ModelConfig c;
    c.n_layer = 2, c.n_head = 2, c.d_model = 16, c.seq_len = 5, c.vocab_size = 37;
    return c;
  }();
  ModelStage stage{store, tp, cfg, StageSpec{0, 2, true, true, false}, 2, 1, 1};
  ModelChunk chunk{stage};
  std::vector<int32_t> tokens = std::vector<int32_t>(10);
  MicrobatchData data{tokens.data(), tokens.data(), 1, 1.0f, {}};

  explicit TinyModel(uint64_t seed) {
    store.allocate();
    store.initialize(seed);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((7 * i) % 37);
  }
  double loss(ModelStage::WeightReadyHook needed = nullptr) {
    chunk.begin(&data, nullptr, std::move(needed));
    chunk.forward(0, 0);
    return chunk.loss_sum();
  }
};

TEST(ComputeCopies, ARunReadsTheValuesItsLayersFindAfterTheirHook) {
  TinyModel updated(5), reference(5);
  const double before = updated.loss();  // every copy made from seed 5's values
  // The next run's values arrive layer by layer inside the weight-needed hook, as a ZeRO-1
  // gather completes there: here the values of seed 6, written straight into the buffer as an
  // optimizer step or a gather writes them (not through set_values).
  TinyModel next(6);
  const int64_t total = updated.store.total_numel();
  const std::vector<float> next_values = host_values(*next.backend, next.store.values(), total);
  const double after = updated.loss([&](size_t first, size_t end) {
    const Parameter& p = updated.store.params()[first];
    const Parameter& last = updated.store.params()[end - 1];
    const int64_t n = last.offset + last.numel() - p.offset;
    updated.backend->copy_from_host(p.value, next_values.data() + p.offset,
                                    static_cast<size_t>(n) * sizeof(float));
  });
  reference.backend->copy_from_host(reference.store.values(), next_values.data(),
                                    static_cast<size_t>(total) * sizeof(float));
  const double expected = reference.loss();
  EXPECT_NE(before, expected);
  EXPECT_EQ(after, expected);  // bit for bit: the same values, copied at the same points
  EXPECT_EQ(next.loss(), expected);
}

}  // namespace
}  // namespace gpt
