// The MPI communicator on MPI_COMM_WORLD at 1, 2, 4 and 8 ranks: rank-filled buffers with
// closed-form results for every operation. Each test runs with the production chunk size and
// with chunks of 3 and 1 elements, so the INT_MAX splitting paths run on small buffers. The
// non-blocking all-gather also runs in place (this rank's block of the receive buffer).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "framework/bf16.h"
#include "framework/check.h"
#include "parallel/mpi_communicator.h"

namespace gpt {
namespace {

// Asserts that `statement` throws gpt::Error whose message contains `needle`.
#define EXPECT_ERROR_CONTAINS(statement, needle)                                    \
  do {                                                                              \
    try {                                                                           \
      statement;                                                                    \
      ADD_FAILURE() << "no gpt::Error from " #statement;                            \
    } catch (const ::gpt::Error& e) {                                               \
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what(); \
    }                                                                               \
  } while (0)

class CommunicatorTest : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    comm_ = make_mpi_communicator(MPI_COMM_WORLD, "world", GetParam());
    rank_ = comm_->rank();
    n_ = comm_->size();
  }
  std::unique_ptr<Communicator> comm_;
  int rank_ = 0;
  int n_ = 1;
};

TEST_P(CommunicatorTest, KnowsItsPlace) {
  int world_rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  EXPECT_EQ(rank_, world_rank);
  EXPECT_EQ(n_, world_size);
  EXPECT_EQ(comm_->name(), "world");
  int relation = MPI_UNEQUAL;
  MPI_Comm_compare(comm_->mpi_comm(), MPI_COMM_WORLD, &relation);
  EXPECT_EQ(relation, MPI_CONGRUENT);  // a duplicate, not the caller's communicator
  MPI_Errhandler handler;
  MPI_Comm_get_errhandler(comm_->mpi_comm(), &handler);
  const bool returns_errors = handler == MPI_ERRORS_RETURN;
  MPI_Errhandler_free(&handler);
  EXPECT_TRUE(returns_errors);
}

TEST_P(CommunicatorTest, AllReduceSumFloat) {
  const int64_t count = 10;
  std::vector<float> buf(count);
  for (int64_t i = 0; i < count; ++i) buf[i] = static_cast<float>(rank_ + i);
  comm_->all_reduce(buf.data(), count, ReduceOp::kSum);
  for (int64_t i = 0; i < count; ++i) EXPECT_EQ(buf[i], n_ * (n_ - 1) / 2 + n_ * i) << i;
}

TEST_P(CommunicatorTest, AllReduceMaxFloat) {
  const int64_t count = 7;
  std::vector<float> buf(count);
  for (int64_t i = 0; i < count; ++i)
    buf[i] = static_cast<float>(i % 2 == 1 ? rank_ + 100 * i : -rank_ - i);
  comm_->all_reduce(buf.data(), count, ReduceOp::kMax);
  for (int64_t i = 0; i < count; ++i) EXPECT_EQ(buf[i], i % 2 == 1 ? n_ - 1 + 100 * i : -i) << i;
}

TEST_P(CommunicatorTest, AllReduceDouble) {
  // Values a float could not hold exactly: the double path must not narrow.
  const int64_t count = 5;
  std::vector<double> buf(count);
  for (int64_t i = 0; i < count; ++i) buf[i] = 1e12 * rank_ + 0.25 + i;
  comm_->all_reduce(buf.data(), count, ReduceOp::kSum);
  for (int64_t i = 0; i < count; ++i)
    EXPECT_EQ(buf[i], 1e12 * (n_ * (n_ - 1) / 2) + n_ * (0.25 + i)) << i;
  for (int64_t i = 0; i < count; ++i) buf[i] = 1e12 + rank_ * 0.5 - i;
  comm_->all_reduce(buf.data(), count, ReduceOp::kMax);
  for (int64_t i = 0; i < count; ++i) EXPECT_EQ(buf[i], 1e12 + (n_ - 1) * 0.5 - i) << i;
}

TEST_P(CommunicatorTest, ZeroCountIsANoOp) {
  float x = 42.0f, y = 7.0f;
  comm_->all_reduce(&x, 0, ReduceOp::kSum);
  comm_->broadcast(&x, 0, 0);
  comm_->all_gather(&x, &y, 0);
  comm_->reduce_scatter(&x, &y, 0, ReduceOp::kSum);
  EXPECT_EQ(x, 42.0f);
  EXPECT_EQ(y, 7.0f);
}

TEST_P(CommunicatorTest, AllGatherInRankOrder) {
  const int64_t count = 8;
  std::vector<float> send(count), recv(count * n_, -1.0f);
  for (int64_t i = 0; i < count; ++i) send[i] = static_cast<float>(rank_ * 100 + i);
  comm_->all_gather(send.data(), recv.data(), count);
  for (int r = 0; r < n_; ++r)
    for (int64_t i = 0; i < count; ++i)
      EXPECT_EQ(recv[r * count + i], r * 100 + i) << "rank " << r << " element " << i;
}

TEST_P(CommunicatorTest, ReduceScatterBlocks) {
  const int64_t count = 5;
  std::vector<float> send(count * n_), recv(count, -1.0f);
  for (int b = 0; b < n_; ++b)
    for (int64_t i = 0; i < count; ++i)
      send[b * count + i] = static_cast<float>(rank_ + b * 1000 + i);
  comm_->reduce_scatter(send.data(), recv.data(), count, ReduceOp::kSum);
  for (int64_t i = 0; i < count; ++i)
    EXPECT_EQ(recv[i], n_ * (n_ - 1) / 2 + n_ * (rank_ * 1000 + i)) << i;
  comm_->reduce_scatter(send.data(), recv.data(), count, ReduceOp::kMax);
  for (int64_t i = 0; i < count; ++i) EXPECT_EQ(recv[i], n_ - 1 + rank_ * 1000 + i) << i;
}

TEST_P(CommunicatorTest, BroadcastFromEveryRoot) {
  const int64_t count = 7;
  for (int root = 0; root < n_; ++root) {
    std::vector<float> buf(count, -1.0f);
    if (rank_ == root)
      for (int64_t i = 0; i < count; ++i) buf[i] = static_cast<float>(root * 10 + i);
    comm_->broadcast(buf.data(), count, root);
    for (int64_t i = 0; i < count; ++i) EXPECT_EQ(buf[i], root * 10 + i) << "root " << root;
  }
}

TEST_P(CommunicatorTest, BroadcastBytesFromEveryRoot) {
  for (int root = 0; root < n_; ++root) {
    std::string text = "unique id from root " + std::to_string(root);
    std::vector<char> buf(text.size(), '?');
    if (rank_ == root) std::memcpy(buf.data(), text.data(), text.size());
    comm_->broadcast_bytes(buf.data(), static_cast<int64_t>(buf.size()), root);
    EXPECT_EQ(std::string(buf.begin(), buf.end()), text);
  }
}

TEST_P(CommunicatorTest, SendRecvPassesATokenAroundTheRing) {
  if (n_ == 1) GTEST_SKIP() << "a blocking send to oneself needs a second thread";
  // Rank 0 starts; every other rank receives from its left, adds its rank and passes it on, so
  // blocking sends cannot deadlock whatever the message size.
  const int64_t count = 10;
  const int left = (rank_ + n_ - 1) % n_, right = (rank_ + 1) % n_;
  std::vector<float> token(count);
  if (rank_ == 0) {
    for (int64_t i = 0; i < count; ++i) token[i] = static_cast<float>(i);
    comm_->send(token.data(), count, right);
    comm_->recv(token.data(), count, left);
    for (int64_t i = 0; i < count; ++i) EXPECT_EQ(token[i], i + n_ * (n_ - 1) / 2) << i;
  } else {
    comm_->recv(token.data(), count, left);
    for (int64_t i = 0; i < count; ++i) EXPECT_EQ(token[i], i + rank_ * (rank_ - 1) / 2) << i;
    for (float& x : token) x += static_cast<float>(rank_);
    comm_->send(token.data(), count, right);
  }
}

TEST_P(CommunicatorTest, MessagesBetweenAPairArriveInOrder) {
  if (n_ == 1) GTEST_SKIP() << "needs two ranks";
  // One fixed tag: the second message can only match the second receive.
  if (rank_ == 0) {
    std::vector<float> first(4, 1.0f), second(4, 2.0f);
    comm_->send(first.data(), 4, 1);
    comm_->send(second.data(), 4, 1);
  } else if (rank_ == 1) {
    std::vector<float> a(4), b(4);
    comm_->recv(a.data(), 4, 0);
    comm_->recv(b.data(), 4, 0);
    EXPECT_EQ(a, std::vector<float>(4, 1.0f));
    EXPECT_EQ(b, std::vector<float>(4, 2.0f));
  }
}

TEST_P(CommunicatorTest, NonBlockingRing) {
  const int64_t count = 11;
  const int left = (rank_ + n_ - 1) % n_, right = (rank_ + 1) % n_;
  std::vector<float> out(count), in(count, -1.0f);
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<float>(rank_ * 1000 + i);
  auto received = comm_->irecv(in.data(), count, left);
  auto sent = comm_->isend(out.data(), count, right);
  sent->wait();
  received->wait();
  received->wait();  // idempotent
  sent->wait();
  for (int64_t i = 0; i < count; ++i) EXPECT_EQ(in[i], left * 1000 + i) << i;
}

// progress() advances a request without blocking; the data is there once wait() returns, and a
// receive found complete by progress() still has its length checked by wait().
TEST_P(CommunicatorTest, ProgressThenWait) {
  const int64_t count = 7;
  const int left = (rank_ + n_ - 1) % n_, right = (rank_ + 1) % n_;
  std::vector<float> out(count, static_cast<float>(rank_)), in(count, -1.0f);
  std::vector<float> block(count * n_, -1.0f);
  for (int64_t i = 0; i < count; ++i) block[rank_ * count + i] = static_cast<float>(rank_ + i);
  auto received = comm_->irecv(in.data(), count, left);
  auto sent = comm_->isend(out.data(), count, right);
  auto gathered = comm_->iall_gather(block.data() + rank_ * count, block.data(), count);
  for (int i = 0; i < 100; ++i)
    for (Request* r : {received.get(), sent.get(), gathered.get()}) r->progress();
  received->wait();
  sent->wait();
  gathered->wait();
  gathered->progress();  // after completion: nothing to do
  EXPECT_EQ(in, std::vector<float>(count, static_cast<float>(left)));
  for (int r = 0; r < n_; ++r)
    for (int64_t i = 0; i < count; ++i) EXPECT_EQ(block[r * count + i], r + i) << r << " " << i;
  if (GetParam() != kMpiMaxChunk) return;
  std::vector<float> two(2, 1.0f), four(4, 0.0f);
  auto short_send = comm_->isend(two.data(), 2, rank_);
  auto long_receive = comm_->irecv(four.data(), 4, rank_);
  for (int i = 0; i < 100; ++i) long_receive->progress();
  EXPECT_ERROR_CONTAINS(long_receive->wait(), "expected 4 floats, got 2");
  short_send->wait();
}

TEST_P(CommunicatorTest, UnwaitedRequestsCompleteOnDestruction) {
  const int64_t count = 6;
  const int left = (rank_ + n_ - 1) % n_, right = (rank_ + 1) % n_;
  std::vector<float> out(count, static_cast<float>(rank_)), in(count, -1.0f);
  {
    auto received = comm_->irecv(in.data(), count, left);
    auto sent = comm_->isend(out.data(), count, right);
  }  // both destroyed unwaited: the buffers must be complete (and free to reuse) here
  EXPECT_EQ(in, std::vector<float>(count, static_cast<float>(left)));
}

TEST_P(CommunicatorTest, NonBlockingAllReduces) {
  const int64_t count = 9;
  std::vector<float> a(count), b(count);
  for (int64_t i = 0; i < count; ++i) {
    a[i] = static_cast<float>(rank_ + i);
    b[i] = static_cast<float>(rank_ * 2 - i);
  }
  auto ra = comm_->iall_reduce(a.data(), count, ReduceOp::kSum);
  auto rb = comm_->iall_reduce(b.data(), count, ReduceOp::kMax);
  rb->wait();
  ra->wait();
  ra->wait();
  for (int64_t i = 0; i < count; ++i) {
    EXPECT_EQ(a[i], n_ * (n_ - 1) / 2 + n_ * i) << i;
    EXPECT_EQ(b[i], 2 * (n_ - 1) - i) << i;
  }
}

// The distributed optimizer's pair: reduce-scatters posted back to back and waited out of
// order (as buckets finish), then shards gathered in place into the full buffer.
TEST_P(CommunicatorTest, NonBlockingReduceScattersThenInPlaceAllGathers) {
  const int64_t counts[] = {5, 1, 0, 7};  // per rank: a bucket's shard (0: an empty one)
  std::vector<std::vector<float>> full(4), shard(4);
  std::vector<std::unique_ptr<Request>> pending;
  for (size_t k = 0; k < 4; ++k) {
    const int64_t count = counts[k];
    full[k].resize(static_cast<size_t>(count * n_));
    for (int64_t i = 0; i < count * n_; ++i)
      full[k][i] = static_cast<float>(rank_ + 10 * i + 1000 * static_cast<int64_t>(k));
    shard[k].assign(static_cast<size_t>(count), -1.0f);
    pending.push_back(
        comm_->ireduce_scatter(full[k].data(), shard[k].data(), count, ReduceOp::kSum));
  }
  for (size_t k = 4; k-- > 0;) pending[k]->wait();
  for (size_t k = 0; k < 4; ++k)
    for (int64_t i = 0; i < counts[k]; ++i) {
      const int64_t element = rank_ * counts[k] + i;  // this rank's block of the full buffer
      EXPECT_EQ(shard[k][i], n_ * (n_ - 1) / 2 + n_ * (10 * element + 1000 * int64_t(k)))
          << "bucket " << k << " element " << i;
    }
  pending.clear();
  for (size_t k = 0; k < 4; ++k) {
    const int64_t count = counts[k];
    std::fill(full[k].begin(), full[k].end(), -1.0f);
    float* mine = full[k].data() + rank_ * count;
    for (int64_t i = 0; i < count; ++i) mine[i] = static_cast<float>(rank_ * 100 + i);
    pending.push_back(comm_->iall_gather(mine, full[k].data(), count));
  }
  for (auto& r : pending) r->wait();
  for (size_t k = 0; k < 4; ++k)
    for (int r = 0; r < n_; ++r)
      for (int64_t i = 0; i < counts[k]; ++i)
        EXPECT_EQ(full[k][r * counts[k] + i], r * 100 + i) << "bucket " << k << " rank " << r;
}

TEST_P(CommunicatorTest, NonBlockingAllGatherFromASeparateBuffer) {
  const int64_t count = 4;
  std::vector<float> send(count), recv(count * n_, -1.0f);
  for (int64_t i = 0; i < count; ++i) send[i] = static_cast<float>(rank_ * 10 + i);
  auto r = comm_->iall_gather(send.data(), recv.data(), count);
  r.reset();  // destroyed unwaited: complete here
  for (int q = 0; q < n_; ++q)
    for (int64_t i = 0; i < count; ++i) EXPECT_EQ(recv[q * count + i], q * 10 + i);
  std::vector<float> maxed(count, -1.0f);
  comm_->ireduce_scatter(recv.data(), maxed.data(), count, ReduceOp::kMax)->wait();
  for (int64_t i = 0; i < count; ++i) EXPECT_EQ(maxed[i], rank_ * 10 + i);
}

// bf16 collectives: small integers are exact in bf16, so every order of the sum gives the closed
// form; at 2 ranks 1 + 3 * 2^-9 shows the sum rounded to bf16 (to 1 + 2^-7), not left in float32.
TEST_P(CommunicatorTest, Bf16CollectivesSumInFloatAndRoundToBf16) {
  const int64_t count = 10;
  std::vector<uint16_t> buf(count), gathered(count * n_), shard(count);
  for (int64_t i = 0; i < count; ++i) buf[i] = float_to_bf16(static_cast<float>(rank_ + i));
  comm_->reset_bytes_moved();
  comm_->iall_reduce_bf16(buf.data(), count)->wait();
  for (int64_t i = 0; i < count; ++i)
    EXPECT_EQ(bf16_to_float(buf[i]), n_ * (n_ - 1) / 2 + n_ * i) << i;
  EXPECT_EQ(comm_->bytes_moved(), n_ > 1 ? 2 * count : 0);
  // In place: this rank's block where the gather leaves it.
  for (int64_t i = 0; i < count; ++i)
    gathered[rank_ * count + i] = float_to_bf16(static_cast<float>(rank_ * 10 + i));
  comm_->iall_gather_bf16(gathered.data() + rank_ * count, gathered.data(), count)->wait();
  for (int q = 0; q < n_; ++q)
    for (int64_t i = 0; i < count; ++i)
      EXPECT_EQ(bf16_to_float(gathered[q * count + i]), q * 10 + i) << q << " " << i;
  std::vector<uint16_t> full(count * n_);
  for (int64_t i = 0; i < count * n_; ++i) full[i] = float_to_bf16(static_cast<float>(rank_ + i));
  comm_->ireduce_scatter_bf16(full.data(), shard.data(), count)->wait();
  for (int64_t i = 0; i < count; ++i)
    EXPECT_EQ(bf16_to_float(shard[i]), n_ * (n_ - 1) / 2 + n_ * (rank_ * count + i)) << i;
  if (n_ != 2) return;
  uint16_t x = float_to_bf16(rank_ == 0 ? 1.0f : 3.0f / 512);
  comm_->iall_reduce_bf16(&x, 1)->wait();
  EXPECT_EQ(bf16_to_float(x), 1.0f + 1.0f / 128);
}

TEST_P(CommunicatorTest, CountsPayloadBytesOncePerCall) {
  // A group of one moves nothing, so it counts nothing: every expectation scales by `moves`.
  const int64_t moves = n_ > 1 ? 1 : 0;
  comm_->reset_bytes_moved();
  EXPECT_EQ(comm_->bytes_moved(), 0);
  std::vector<float> f(10 * n_, 1.0f), g(10 * n_);
  std::vector<double> d(10, 1.0);
  comm_->all_reduce(f.data(), 10, ReduceOp::kSum);
  EXPECT_EQ(comm_->bytes_moved(), moves * (40));
  comm_->all_reduce(d.data(), 10, ReduceOp::kSum);
  EXPECT_EQ(comm_->bytes_moved(), moves * (40 + 80));
  comm_->all_gather(f.data(), g.data(), 5);  // this rank's block
  EXPECT_EQ(comm_->bytes_moved(), moves * (120 + 20));
  comm_->reduce_scatter(f.data(), g.data(), 5, ReduceOp::kSum);  // the whole input
  EXPECT_EQ(comm_->bytes_moved(), moves * (140 + 20 * n_));
  comm_->broadcast(f.data(), 3, 0);
  comm_->broadcast_bytes(f.data(), 3, 0);
  EXPECT_EQ(comm_->bytes_moved(), moves * (140 + 20 * n_ + 12 + 3));
  auto r = comm_->iall_reduce(f.data(), 4, ReduceOp::kSum);
  r->wait();
  EXPECT_EQ(comm_->bytes_moved(), moves * (155 + 20 * n_ + 16));
  auto in = comm_->irecv(g.data(), 2, rank_);
  auto out = comm_->isend(f.data(), 2, rank_);
  out->wait();
  in->wait();
  EXPECT_EQ(comm_->bytes_moved(), moves * (171 + 20 * n_ + 16));  // both ends count the message
  comm_->iall_gather(f.data(), g.data(), 3)->wait();              // this rank's block
  comm_->ireduce_scatter(f.data(), g.data(), 2, ReduceOp::kSum)->wait();  // the whole input
  EXPECT_EQ(comm_->bytes_moved(), moves * (199 + 28 * n_));
  comm_->reset_bytes_moved();
  EXPECT_EQ(comm_->bytes_moved(), 0);
}

TEST_P(CommunicatorTest, MpiErrorsBecomeGptErrorsWithMpisMessage) {
  std::vector<float> buf(4, 0.0f);
  const std::string rank_error = mpi_error_string(MPI_ERR_RANK);
  EXPECT_ERROR_CONTAINS(comm_->send(buf.data(), 4, n_), rank_error);
  EXPECT_ERROR_CONTAINS(comm_->recv(buf.data(), 4, n_ + 3), rank_error);
  EXPECT_ERROR_CONTAINS(comm_->isend(buf.data(), 4, -5), rank_error);
  EXPECT_ERROR_CONTAINS(comm_->broadcast(buf.data(), 4, n_), mpi_error_string(MPI_ERR_ROOT));
  // The communicator still works after an error that every rank saw alike.
  buf.assign(4, 1.0f);
  comm_->all_reduce(buf.data(), 4, ReduceOp::kSum);
  EXPECT_EQ(buf, std::vector<float>(4, static_cast<float>(n_)));
}

TEST_P(CommunicatorTest, LongerMessageThanTheReceiveIsAnError) {
  if (GetParam() != kMpiMaxChunk) GTEST_SKIP() << "pieces of a chunked message would mismatch";
  std::vector<float> out(4, 1.0f), in(4, 0.0f);
  auto sent = comm_->isend(out.data(), 4, rank_);
  EXPECT_ERROR_CONTAINS(comm_->recv(in.data(), 2, rank_), mpi_error_string(MPI_ERR_TRUNCATE));
  sent->wait();
}

TEST_P(CommunicatorTest, ShorterMessageThanTheReceiveIsAnError) {
  if (GetParam() != kMpiMaxChunk) GTEST_SKIP() << "chunked receives would wait for more pieces";
  std::vector<float> out(2, 1.0f), in(4, 0.0f);
  auto sent = comm_->isend(out.data(), 2, rank_);
  EXPECT_ERROR_CONTAINS(comm_->recv(in.data(), 4, rank_), "expected 4 floats, got 2");
  sent->wait();
  auto sent_again = comm_->isend(out.data(), 2, rank_);
  auto received = comm_->irecv(in.data(), 4, rank_);
  EXPECT_ERROR_CONTAINS(received->wait(), "expected 4 floats, got 2");
  sent_again->wait();
}

TEST_P(CommunicatorTest, BarrierReturns) {
  comm_->barrier();
}

INSTANTIATE_TEST_SUITE_P(ChunkSizes, CommunicatorTest,
                         ::testing::Values(kMpiMaxChunk, int64_t{3}, int64_t{1}),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return info.param == kMpiMaxChunk ? std::string("IntMax")
                                                             : "Chunk" + std::to_string(info.param);
                         });

TEST(SplitIntoChunks, CoversTheRangeInPiecesThatFitAnInt) {
  const int64_t count = (int64_t{1} << 33) + 5;  // 8 Gi elements: nothing is allocated
  auto spans = split_into_chunks(count, kMpiMaxChunk);
  ASSERT_EQ(spans.size(), 5u);  // 4 * (2^31 - 1) = 2^33 - 4, leaving 9
  int64_t next = 0;
  for (const ChunkSpan& s : spans) {
    EXPECT_EQ(s.offset, next);
    EXPECT_GT(s.count, 0);
    next += s.count;
  }
  EXPECT_EQ(next, count);
  EXPECT_EQ(spans.back().count, 9);
  for (size_t i = 0; i + 1 < spans.size(); ++i) EXPECT_EQ(spans[i].count, kMpiMaxChunk);
}

TEST(SplitIntoChunks, EdgeCases) {
  auto zero = split_into_chunks(0, kMpiMaxChunk);
  ASSERT_EQ(zero.size(), 1u);
  EXPECT_EQ(zero[0].count, 0);
  auto exact = split_into_chunks(int64_t{2} * kMpiMaxChunk, kMpiMaxChunk);
  ASSERT_EQ(exact.size(), 2u);
  EXPECT_EQ(exact[1].offset, kMpiMaxChunk);
  EXPECT_EQ(exact[1].count, kMpiMaxChunk);
  auto small = split_into_chunks(7, 3);
  ASSERT_EQ(small.size(), 3u);
  EXPECT_EQ(small[2].offset, 6);
  EXPECT_EQ(small[2].count, 1);
  EXPECT_THROW(split_into_chunks(-1, 3), Error);
  EXPECT_THROW(split_into_chunks(5, 0), Error);
  EXPECT_THROW(split_into_chunks(5, kMpiMaxChunk + 1), Error);
}

TEST(MakeMpiCommunicator, EachCallDuplicates) {
  auto a = make_mpi_communicator(MPI_COMM_WORLD, "a");
  auto b = make_mpi_communicator(a->mpi_comm(), "b");
  EXPECT_NE(a->mpi_comm(), b->mpi_comm());
  EXPECT_EQ(b->name(), "b");
  EXPECT_EQ(a->size(), b->size());
  EXPECT_THROW(make_mpi_communicator(MPI_COMM_NULL, "null"), Error);
}

}  // namespace
}  // namespace gpt
