// GradientBuckets: buckets tile the flat gradient buffer in reverse registration order, each
// posted once its parameters are final, and after finish() every gradient is the sum over the
// dp ranks (rank-filled buffers with closed-form sums).
#include <gtest/gtest.h>

#include "framework/check.h"
#include "framework/parameter.h"
#include "parallel/data_parallel.h"

namespace gpt {
namespace {

ParameterSpec spec(const std::string& name, int64_t n) {
  ParameterSpec s;
  s.name = name;
  s.shape = {n};
  s.local_numel = n;
  s.slabs = {{{0}, {n}, 0}};
  return s;
}

struct Fixture {
  std::unique_ptr<Backend> backend = make_cpu_backend(1);
  ParameterStore store{*backend};
  std::unique_ptr<Communicator> world = make_mpi_communicator(MPI_COMM_WORLD, "dp");
  Fixture() {
    for (int i = 0; i < 7; ++i) store.add(spec(GPT_MSG("p" << i), 3 + 5 * i));
    store.allocate();
  }
};

TEST(GradientBuckets, TileTheBufferInReverseOrder) {
  Fixture f;
  for (int64_t bucket : {1, 10, 40, 1000}) {
    GradientBuckets buckets(f.store, *f.world, bucket);
    int64_t covered = 0;
    size_t expected_end = f.store.params().size();
    for (const auto& b : buckets.buckets()) {
      EXPECT_EQ(b.span.end_param, expected_end);  // reverse registration order, no gaps
      expected_end = b.span.first_param;
      EXPECT_TRUE(b.span.numel >= bucket || b.span.first_param == 0) << "bucket " << bucket;
      EXPECT_EQ(b.span.padded_numel, b.span.numel);  // no padding without ZeRO-1
      covered += b.span.numel;
    }
    EXPECT_EQ(expected_end, 0u);
    EXPECT_EQ(covered, f.store.total_numel());
  }
  EXPECT_EQ(GradientBuckets(f.store, *f.world, 1).num_buckets(), 7);
  EXPECT_EQ(GradientBuckets(f.store, *f.world, 1000).num_buckets(), 1);
}

TEST(GradientBuckets, SumOverRanksAfterFinish) {
  Fixture f;
  const int rank = f.world->rank(), size = f.world->size();
  for (int64_t bucket : {1, 25, 1000}) {
    GradientBuckets buckets(f.store, *f.world, bucket);
    for (int step = 0; step < 2; ++step) {
      for (int64_t i = 0; i < f.store.total_numel(); ++i)
        f.store.grads()[i] = static_cast<float>(rank + 1) * static_cast<float>(i + step);
      buckets.begin_step();
      // Layers finish from the last registered to the first, two parameters at a time.
      for (size_t end = f.store.params().size(); end > 0; end -= std::min<size_t>(end, 2))
        buckets.mark_ready(end - std::min<size_t>(end, 2), end);
      buckets.finish();
      const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
      for (int64_t i = 0; i < f.store.total_numel(); ++i)
        ASSERT_EQ(f.store.grads()[i], ranks_sum * static_cast<float>(i + step)) << i;
    }
  }
}

TEST(GradientBuckets, UnmarkedParametersAreReducedByFinishAndDoubleMarksThrow) {
  Fixture f;
  GradientBuckets buckets(f.store, *f.world, 10);
  for (int64_t i = 0; i < f.store.total_numel(); ++i) f.store.grads()[i] = 1.0f;
  buckets.begin_step();
  buckets.mark_ready(6, 7);
  EXPECT_THROW(buckets.mark_ready(6, 7), Error);
  buckets.finish();
  for (int64_t i = 0; i < f.store.total_numel(); ++i)
    ASSERT_EQ(f.store.grads()[i], static_cast<float>(f.world->size()));
}

}  // namespace
}  // namespace gpt
