// The host-staged communicator (parallel/device_communicator.h) at 1, 2 and 4 ranks, over a CPU
// backend that calls its allocations "device memory": every operation on such buffers must go
// through a copy out, MPI, and a copy back, give MPI's results, and count MPI's bytes; host
// buffers must pass straight through.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "framework/cpu/cpu_backend.h"
#include "framework/device_array.h"
#include "parallel/device_communicator.h"

namespace gpt {
namespace {

// The CPU backend, with its allocations treated as device memory and its host copies counted.
class PretendDeviceBackend final : public cpu::CpuBackend {
 public:
  PretendDeviceBackend() : CpuBackend(1) {}
  void* raw_allocate(size_t bytes) override {
    void* ptr = CpuBackend::raw_allocate(bytes);
    ranges_[static_cast<const char*>(ptr)] = bytes;
    return ptr;
  }
  void raw_deallocate(void* ptr) override {
    ranges_.erase(static_cast<const char*>(ptr));
    CpuBackend::raw_deallocate(ptr);
  }
  bool is_device_memory(const void* ptr) const override {
    const char* p = static_cast<const char*>(ptr);
    auto it = ranges_.upper_bound(p);
    if (it == ranges_.begin()) return false;
    --it;
    return p < it->first + it->second;
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    ++copies_;
    CpuBackend::copy_to_host(dst, src, bytes);
  }
  void copy_from_host(void* dst, const void* src, size_t bytes) override {
    ++copies_;
    CpuBackend::copy_from_host(dst, src, bytes);
  }
  int copies() const { return copies_; }

 private:
  std::map<const char*, size_t> ranges_;
  int copies_ = 0;
};

class HostStagedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    comm_ = make_device_communicator(make_mpi_communicator(MPI_COMM_WORLD, "dp"), backend_,
                                     DeviceTransport::kHostStagedMpi);
    rank_ = comm_->rank();
    n_ = comm_->size();
  }
  DeviceArray<float> device(const std::vector<float>& values) {
    DeviceArray<float> a(backend_, static_cast<int64_t>(values.size()), MemoryCategory::kComm);
    a.upload(values);
    return a;
  }
  PretendDeviceBackend backend_;
  std::unique_ptr<Communicator> comm_;
  int rank_ = 0, n_ = 1;
};

TEST_F(HostStagedTest, AllReduceOfDeviceBuffersIsStagedAndExact) {
  DeviceArray<float> buf = device({1.0f * rank_, 2.0f, -1.0f * rank_});
  const int before = backend_.copies();
  comm_->all_reduce(buf.data(), 3, ReduceOp::kSum);
  EXPECT_EQ(backend_.copies() - before, 2);  // out and back
  const float ranks_sum = static_cast<float>(n_ * (n_ - 1) / 2);
  EXPECT_EQ(buf.download(), (std::vector<float>{ranks_sum, 2.0f * n_, -ranks_sum}));
  comm_->all_reduce(buf.data(), 1, ReduceOp::kMax);
  EXPECT_EQ(buf.download()[0], ranks_sum);
  EXPECT_EQ(comm_->bytes_moved(), n_ > 1 ? (3 + 1) * 4 : 0);
}

TEST_F(HostStagedTest, HostBuffersPassStraightThrough) {
  std::vector<float> host = {static_cast<float>(rank_ + 1)};
  double value = rank_;
  const int before = backend_.copies();
  comm_->all_reduce(host.data(), 1, ReduceOp::kSum);
  comm_->all_reduce(&value, 1, ReduceOp::kSum);
  EXPECT_EQ(backend_.copies(), before);
  EXPECT_EQ(host[0], static_cast<float>(n_ * (n_ + 1) / 2));
  EXPECT_EQ(value, n_ * (n_ - 1) / 2.0);
  int32_t token = rank_ == 0 ? 42 : 0;
  comm_->broadcast_bytes(&token, sizeof(token), 0);
  EXPECT_EQ(token, 42);
}

TEST_F(HostStagedTest, GatherScatterBroadcastMatchMpi) {
  DeviceArray<float> send = device({10.0f * rank_, 10.0f * rank_ + 1});
  DeviceArray<float> gathered(backend_, 2 * n_, MemoryCategory::kComm);
  comm_->all_gather(send.data(), gathered.data(), 2);
  std::vector<float> want;
  for (int r = 0; r < n_; ++r) want.insert(want.end(), {10.0f * r, 10.0f * r + 1});
  EXPECT_EQ(gathered.download(), want);
  // A host input gathered into device memory.
  std::vector<float> host_send = {static_cast<float>(rank_)};
  DeviceArray<float> gathered_one(backend_, n_, MemoryCategory::kComm);
  comm_->all_gather(host_send.data(), gathered_one.data(), 1);
  for (int r = 0; r < n_; ++r) EXPECT_EQ(gathered_one.download()[r], static_cast<float>(r));

  std::vector<float> blocks(static_cast<size_t>(2 * n_));
  for (int i = 0; i < 2 * n_; ++i) blocks[i] = static_cast<float>(i + rank_);
  DeviceArray<float> full = device(blocks), mine(backend_, 2, MemoryCategory::kComm);
  comm_->reduce_scatter(full.data(), mine.data(), 2, ReduceOp::kSum);
  const float ranks_sum = static_cast<float>(n_ * (n_ - 1) / 2);
  EXPECT_EQ(mine.download(), (std::vector<float>{2.0f * rank_ * n_ + ranks_sum,
                                                 (2.0f * rank_ + 1) * n_ + ranks_sum}));

  DeviceArray<float> b = device({rank_ == n_ - 1 ? 7.0f : 0.0f, rank_ == n_ - 1 ? 8.0f : 0.0f});
  comm_->broadcast(b.data(), 2, n_ - 1);
  EXPECT_EQ(b.download(), (std::vector<float>{7.0f, 8.0f}));
}

TEST_F(HostStagedTest, PointToPointKeepsTagsApartAndLandsAtWait) {
  if (n_ < 2) GTEST_SKIP() << "needs two ranks";
  const int next = (rank_ + 1) % n_, prev = (rank_ + n_ - 1) % n_;
  DeviceArray<float> a = device({1.0f + rank_}), b = device({100.0f + rank_});
  auto sa = comm_->isend(a.data(), 1, next, 5);
  auto sb = comm_->isend(b.data(), 1, next, 6);
  // Received in the other order than sent: the tags keep them apart.
  DeviceArray<float> got_b = device({-1.0f}), got_a = device({-1.0f});
  auto rb = comm_->irecv(got_b.data(), 1, prev, 6);
  comm_->recv(got_a.data(), 1, prev, 5);
  rb->wait();
  sa->wait();
  sb->wait();
  EXPECT_EQ(got_a.download()[0], 1.0f + prev);
  EXPECT_EQ(got_b.download()[0], 100.0f + prev);
  EXPECT_TRUE(comm_->matches_by_tag());
}

TEST_F(HostStagedTest, NonBlockingAllReduceWritesBackAtWait) {
  DeviceArray<float> buf = device({1.0f, static_cast<float>(rank_)});
  auto request = comm_->iall_reduce(buf.data(), 2, ReduceOp::kSum);
  // The device buffer is only written when the request completes.
  EXPECT_EQ(buf.download(), (std::vector<float>{1.0f, static_cast<float>(rank_)}));
  request->wait();
  request->wait();  // idempotent
  EXPECT_EQ(buf.download(),
            (std::vector<float>{static_cast<float>(n_), static_cast<float>(n_ * (n_ - 1) / 2)}));
}

}  // namespace
}  // namespace gpt
