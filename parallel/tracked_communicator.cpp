// The recording communicator: each call takes a ticket on its channel, then waits inside the
// wrapped call (see tracked_communicator.h).
#include "parallel/tracked_communicator.h"

#include <utility>

#include "framework/check.h"

namespace gpt {
namespace {

// A non-blocking operation: blocked from wait() (or a destructor that waits) until it returns.
class TrackedRequest final : public Request {
 public:
  TrackedRequest(std::unique_ptr<Request> inner, OperationLog& log, OperationTicket ticket)
      : inner_(std::move(inner)), log_(log), ticket_(ticket) {}
  ~TrackedRequest() override {
    OperationLog::Wait waiting(log_, ticket_);
    inner_.reset();
  }
  void wait() override {
    OperationLog::Wait waiting(log_, ticket_);
    inner_->wait();
  }
  void progress() override { inner_->progress(); }

 private:
  std::unique_ptr<Request> inner_;
  OperationLog& log_;
  OperationTicket ticket_;
};

std::vector<int> global_ranks_of(MPI_Comm comm) {
  MPI_Group group, world_group;
  GPT_MPI_CHECK(MPI_Comm_group(comm, &group));
  GPT_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
  int size = 0;
  GPT_MPI_CHECK(MPI_Group_size(group, &size));
  std::vector<int> local(static_cast<size_t>(size)), global(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) local[static_cast<size_t>(r)] = r;
  GPT_MPI_CHECK(MPI_Group_translate_ranks(group, size, local.data(), world_group, global.data()));
  GPT_MPI_CHECK(MPI_Group_free(&group));
  GPT_MPI_CHECK(MPI_Group_free(&world_group));
  return global;
}

}  // namespace

TrackedCommunicator::TrackedCommunicator(std::unique_ptr<Communicator> inner, OperationLog& log)
    : inner_(std::move(inner)), log_(log), members_(global_ranks_of(inner_->mpi_comm())) {
  group_channel_ = log_.channel(channel_name(inner_->name(), members_), members_);
}

OperationTicket TrackedCommunicator::collective(const char* op) {
  return log_.issue(group_channel_, op);
}

OperationTicket TrackedCommunicator::message(int from, int to, const char* op) {
  const bool sending = from == rank();
  const int peer = sending ? to : from;
  std::vector<int>& known = sending ? to_peer_ : from_peer_;
  if (known.empty()) known.assign(members_.size(), -1);
  int& channel = known[static_cast<size_t>(peer)];
  if (channel < 0) {
    const int a = members_[static_cast<size_t>(from)], b = members_[static_cast<size_t>(to)];
    channel = log_.channel(message_channel_name(inner_->name(), a, b), {a, b});
  }
  return log_.issue(channel, op);
}

void TrackedCommunicator::all_reduce(float* buf, int64_t count, ReduceOp op) {
  blocking(collective("all_reduce"), [&] { inner_->all_reduce(buf, count, op); });
}

void TrackedCommunicator::all_reduce(double* buf, int64_t count, ReduceOp op) {
  blocking(collective("all_reduce"), [&] { inner_->all_reduce(buf, count, op); });
}

void TrackedCommunicator::all_gather(const float* send, float* recv, int64_t count) {
  blocking(collective("all_gather"), [&] { inner_->all_gather(send, recv, count); });
}

void TrackedCommunicator::reduce_scatter(const float* send, float* recv, int64_t count,
                                         ReduceOp op) {
  blocking(collective("reduce_scatter"), [&] { inner_->reduce_scatter(send, recv, count, op); });
}

void TrackedCommunicator::broadcast(float* buf, int64_t count, int root) {
  blocking(collective("broadcast"), [&] { inner_->broadcast(buf, count, root); });
}

void TrackedCommunicator::broadcast_bytes(void* buf, int64_t bytes, int root) {
  blocking(collective("broadcast"), [&] { inner_->broadcast_bytes(buf, bytes, root); });
}

void TrackedCommunicator::send(const float* buf, int64_t count, int peer, int tag) {
  blocking(message(rank(), peer, "send"), [&] { inner_->send(buf, count, peer, tag); });
}

void TrackedCommunicator::recv(float* buf, int64_t count, int peer, int tag) {
  blocking(message(peer, rank(), "recv"), [&] { inner_->recv(buf, count, peer, tag); });
}

std::unique_ptr<Request> TrackedCommunicator::isend(const float* buf, int64_t count, int peer,
                                                    int tag) {
  const OperationTicket ticket = message(rank(), peer, "send");
  return std::make_unique<TrackedRequest>(inner_->isend(buf, count, peer, tag), log_, ticket);
}

std::unique_ptr<Request> TrackedCommunicator::irecv(float* buf, int64_t count, int peer, int tag) {
  const OperationTicket ticket = message(peer, rank(), "recv");
  return std::make_unique<TrackedRequest>(inner_->irecv(buf, count, peer, tag), log_, ticket);
}

std::unique_ptr<Request> TrackedCommunicator::iall_reduce(float* buf, int64_t count, ReduceOp op) {
  const OperationTicket ticket = collective("all_reduce");
  return std::make_unique<TrackedRequest>(inner_->iall_reduce(buf, count, op), log_, ticket);
}

std::unique_ptr<Request> TrackedCommunicator::iall_reduce_bf16(uint16_t* buf, int64_t count) {
  const OperationTicket ticket = collective("all_reduce");
  return std::make_unique<TrackedRequest>(inner_->iall_reduce_bf16(buf, count), log_, ticket);
}

std::unique_ptr<Request> TrackedCommunicator::iall_gather_bf16(const uint16_t* send, uint16_t* recv,
                                                               int64_t count) {
  const OperationTicket ticket = collective("all_gather");
  return std::make_unique<TrackedRequest>(inner_->iall_gather_bf16(send, recv, count), log_,
                                          ticket);
}

std::unique_ptr<Request> TrackedCommunicator::ireduce_scatter_bf16(const uint16_t* send,
                                                                   uint16_t* recv, int64_t count) {
  const OperationTicket ticket = collective("reduce_scatter");
  return std::make_unique<TrackedRequest>(inner_->ireduce_scatter_bf16(send, recv, count), log_,
                                          ticket);
}

std::unique_ptr<Request> TrackedCommunicator::iall_gather(const float* send, float* recv,
                                                          int64_t count) {
  const OperationTicket ticket = collective("all_gather");
  return std::make_unique<TrackedRequest>(inner_->iall_gather(send, recv, count), log_, ticket);
}

std::unique_ptr<Request> TrackedCommunicator::ireduce_scatter(const float* send, float* recv,
                                                              int64_t count, ReduceOp op) {
  const OperationTicket ticket = collective("reduce_scatter");
  return std::make_unique<TrackedRequest>(inner_->ireduce_scatter(send, recv, count, op), log_,
                                          ticket);
}

void TrackedCommunicator::barrier() {
  blocking(collective("barrier"), [&] { inner_->barrier(); });
}

}  // namespace gpt
