// A communicator that records each of its operations in an OperationLog (operation_log.h) and
// otherwise forwards to the communicator it wraps. The process grid wraps every group's
// communicator in one, so the watchdog sees every collective and message of a training step
// whatever the transport. A blocking call is a wait from start to end; a non-blocking one is
// counted when issued and waited on in Request::wait(), so compute overlapping it is never taken
// for a stall. On NCCL, calls only enqueue: a stalled peer shows where the host next waits.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/operation_log.h"

namespace gpt {

class TrackedCommunicator final : public Communicator {
 public:
  // Collective over the group (it learns the members' global ranks).
  TrackedCommunicator(std::unique_ptr<Communicator> inner, OperationLog& log);
  // The wrapped communicator, handed back (to be wrapped in another transport).
  std::unique_ptr<Communicator> release() { return std::move(inner_); }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return inner_->name(); }
  MPI_Comm mpi_comm() const override { return inner_->mpi_comm(); }
  bool matches_by_tag() const override { return inner_->matches_by_tag(); }
  int64_t bytes_moved() const override { return inner_->bytes_moved(); }
  void reset_bytes_moved() override { inner_->reset_bytes_moved(); }

  void all_reduce(float* buf, int64_t count, ReduceOp op) override;
  void all_reduce(double* buf, int64_t count, ReduceOp op) override;
  void all_gather(const float* send, float* recv, int64_t count) override;
  void reduce_scatter(const float* send, float* recv, int64_t count, ReduceOp op) override;
  void broadcast(float* buf, int64_t count, int root) override;
  void broadcast_bytes(void* buf, int64_t bytes, int root) override;
  void send(const float* buf, int64_t count, int peer, int tag) override;
  void recv(float* buf, int64_t count, int peer, int tag) override;
  std::unique_ptr<Request> isend(const float* buf, int64_t count, int peer, int tag) override;
  std::unique_ptr<Request> irecv(float* buf, int64_t count, int peer, int tag) override;
  std::unique_ptr<Request> iall_reduce(float* buf, int64_t count, ReduceOp op) override;
  std::unique_ptr<Request> iall_gather(const float* send, float* recv, int64_t count) override;
  std::unique_ptr<Request> ireduce_scatter(const float* send, float* recv, int64_t count,
                                           ReduceOp op) override;
  std::unique_ptr<Request> iall_reduce_bf16(uint16_t* buf, int64_t count) override;
  std::unique_ptr<Request> iall_gather_bf16(const uint16_t* send, uint16_t* recv,
                                            int64_t count) override;
  std::unique_ptr<Request> ireduce_scatter_bf16(const uint16_t* send, uint16_t* recv,
                                                int64_t count) override;
  void barrier() override;

 private:
  OperationTicket collective(const char* op);
  OperationTicket message(int from, int to, const char* op);  // group ranks
  // Runs a blocking call as a wait in the ticket's operation.
  template <typename Call>
  void blocking(const OperationTicket& ticket, Call&& call) {
    OperationLog::Wait waiting(log_, ticket);
    call();
  }

  std::unique_ptr<Communicator> inner_;
  OperationLog& log_;
  std::vector<int> members_;  // global rank of each group rank
  int group_channel_ = -1;
  // The message channels by peer (group rank), registered on first use: a lookup by name per
  // message would cost more than the rest of the tracking.
  std::vector<int> to_peer_, from_peer_;
};

}  // namespace gpt
