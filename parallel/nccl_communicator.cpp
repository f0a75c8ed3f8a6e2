// The NCCL communicator (device_communicator.h): one ncclComm_t per group, built from a unique id
// that the group's rank 0 broadcasts over MPI, and one communication stream. Each operation is
// enqueued on that stream after an event recorded on the backend's compute stream, and the
// compute stream waits for an event recorded after it, at once (blocking calls) or at wait()
// (non-blocking ones): the host never stalls, and compute issued in between overlaps the transfer.
// Point-to-point: an NCCL send blocks its stream until the peer's receive runs, so two stages that
// both send to each other before receiving would wait forever. Sends to a higher rank (the
// pipeline's activations) are issued at once; sends to a lower rank (gradients) are held back and
// issued in one NCCL group with this rank's next receive (or at wait()), as Megatron pairs
// send-backward with recv-forward: a pair then never has two lone sends facing each other. NCCL
// has no tags: messages between a pair match in issue order, which the pipeline executor keeps
// (both sides post them in schedule order).
#include <nccl.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/cuda/cuda_backend.h"
#include "framework/cuda/cuda_check.h"
#include "parallel/device_communicator.h"

#define GPT_NCCL_CHECK(call)                                                 \
  do {                                                                       \
    ncclResult_t gpt_nccl_rc_ = (call);                                      \
    if (gpt_nccl_rc_ != ncclSuccess)                                         \
      ::gpt::fail(#call, __FILE__, __LINE__,                                 \
                  std::string("NCCL: ") + ncclGetErrorString(gpt_nccl_rc_)); \
  } while (0)

namespace gpt {
namespace {

// A CUDA event that the compute stream can wait for; shared by the requests of one NCCL group.
struct Event {
  cudaEvent_t event = nullptr;
  Event() { GPT_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming)); }
  ~Event() { cudaEventDestroy(event); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

class NcclCommunicator;

// Completes when the compute stream has been made to wait for the operation's event; a send
// still held back is issued first.
class NcclRequest final : public Request {
 public:
  NcclRequest(NcclCommunicator& comm, std::shared_ptr<Event> done, int64_t send_sequence)
      : comm_(comm), done_(std::move(done)), send_sequence_(send_sequence) {}
  void wait() override;

 private:
  NcclCommunicator& comm_;
  std::shared_ptr<Event> done_;  // null while the send is still held back
  int64_t send_sequence_;        // -1: not a held-back send
  bool waited_ = false;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::unique_ptr<Communicator> mpi, cuda::CudaBackend& backend)
      : mpi_(std::move(mpi)), backend_(backend), compute_(backend.compute_stream()) {
    ncclUniqueId id{};
    if (mpi_->rank() == 0) GPT_NCCL_CHECK(ncclGetUniqueId(&id));
    mpi_->broadcast_bytes(&id, sizeof(id), 0);
    GPT_CUDA_CHECK(cudaSetDevice(backend.device()));
    GPT_NCCL_CHECK(ncclCommInitRank(&comm_, mpi_->size(), id, mpi_->rank()));
    GPT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~NcclCommunicator() override {
    // No checks: this may run while an error unwinds. Held-back sends are issued so the peer's
    // receives complete.
    if (!held_sends_.empty()) {
      try {
        flush_sends();
      } catch (...) {
      }
    }
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    if (comm_ != nullptr) ncclCommDestroy(comm_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  int rank() const override { return mpi_->rank(); }
  int size() const override { return mpi_->size(); }
  std::string name() const override { return mpi_->name(); }
  MPI_Comm mpi_comm() const override { return mpi_->mpi_comm(); }
  int64_t bytes_moved() const override { return Communicator::bytes_moved() + mpi_->bytes_moved(); }
  void reset_bytes_moved() override {
    Communicator::reset_bytes_moved();
    mpi_->reset_bytes_moved();
  }

  // Byte counts follow the MPI communicator's rules (mpi_communicator.h).
  void all_reduce(float* buf, int64_t count, ReduceOp op) override {
    if (!on_device(buf)) return mpi_->all_reduce(buf, count, op);
    count_bytes(count * kFloat);
    begin();
    GPT_NCCL_CHECK(
        ncclAllReduce(buf, buf, elements(count), ncclFloat, nccl_op(op), comm_, stream_));
    compute_waits(end());
  }
  void all_reduce(double* buf, int64_t count, ReduceOp op) override {
    mpi_->all_reduce(buf, count, op);
  }
  void all_gather(const float* send, float* recv, int64_t count) override {
    if (!on_device(send) || !on_device(recv)) return mpi_->all_gather(send, recv, count);
    count_bytes(count * kFloat);
    begin();
    GPT_NCCL_CHECK(ncclAllGather(send, recv, elements(count), ncclFloat, comm_, stream_));
    compute_waits(end());
  }
  void reduce_scatter(const float* send, float* recv, int64_t count, ReduceOp op) override {
    if (!on_device(send) || !on_device(recv)) return mpi_->reduce_scatter(send, recv, count, op);
    count_bytes(count * size() * kFloat);
    begin();
    GPT_NCCL_CHECK(
        ncclReduceScatter(send, recv, elements(count), ncclFloat, nccl_op(op), comm_, stream_));
    compute_waits(end());
  }
  void broadcast(float* buf, int64_t count, int root) override {
    if (!on_device(buf)) return mpi_->broadcast(buf, count, root);
    count_bytes(count * kFloat);
    begin();
    GPT_NCCL_CHECK(ncclBroadcast(buf, buf, elements(count), ncclFloat, root, comm_, stream_));
    compute_waits(end());
  }
  void broadcast_bytes(void* buf, int64_t bytes, int root) override {
    mpi_->broadcast_bytes(buf, bytes, root);
  }
  void send(const float* buf, int64_t count, int peer, int tag) override {
    isend(buf, count, peer, tag)->wait();
  }
  void recv(float* buf, int64_t count, int peer, int tag) override {
    irecv(buf, count, peer, tag)->wait();
  }
  std::unique_ptr<Request> isend(const float* buf, int64_t count, int peer, int tag) override {
    if (!on_device(buf)) return mpi_->isend(buf, count, peer, tag);
    count_bytes(count * kFloat);
    if (peer > rank()) {  // upward (activations): at once, so the next stage can start
      after_compute();
      GPT_NCCL_CHECK(ncclSend(buf, elements(count), ncclFloat, peer, comm_, stream_));
      return std::make_unique<NcclRequest>(*this, end(), -1);
    }
    // Downward (gradients): held back until the next receive. The data must be final when the
    // send is issued: record the compute stream's position now.
    auto ready = std::make_shared<Event>();
    GPT_CUDA_CHECK(cudaEventRecord(ready->event, compute_));
    held_sends_.push_back({buf, count, peer, std::move(ready)});
    return std::make_unique<NcclRequest>(
        *this, nullptr, sends_issued_ + static_cast<int64_t>(held_sends_.size()) - 1);
  }
  std::unique_ptr<Request> irecv(float* buf, int64_t count, int peer, int tag) override {
    if (!on_device(buf)) return mpi_->irecv(buf, count, peer, tag);
    count_bytes(count * kFloat);
    after_compute();
    GPT_NCCL_CHECK(ncclGroupStart());
    const int64_t issued = issue_held_sends();
    GPT_NCCL_CHECK(ncclRecv(buf, elements(count), ncclFloat, peer, comm_, stream_));
    GPT_NCCL_CHECK(ncclGroupEnd());
    std::shared_ptr<Event> done = end();
    register_sends(done, issued);
    return std::make_unique<NcclRequest>(*this, done, -1);
  }
  std::unique_ptr<Request> iall_reduce(float* buf, int64_t count, ReduceOp op) override {
    if (!on_device(buf)) return mpi_->iall_reduce(buf, count, op);
    count_bytes(count * kFloat);
    begin();
    GPT_NCCL_CHECK(
        ncclAllReduce(buf, buf, elements(count), ncclFloat, nccl_op(op), comm_, stream_));
    return std::make_unique<NcclRequest>(*this, end(), -1);
  }
  // In place when send == recv + rank() * count: NCCL's own in-place form.
  std::unique_ptr<Request> iall_gather(const float* send, float* recv, int64_t count) override {
    if (!on_device(send) || !on_device(recv)) return mpi_->iall_gather(send, recv, count);
    count_bytes(count * kFloat);
    begin();
    GPT_NCCL_CHECK(ncclAllGather(send, recv, elements(count), ncclFloat, comm_, stream_));
    return std::make_unique<NcclRequest>(*this, end(), -1);
  }
  std::unique_ptr<Request> ireduce_scatter(const float* send, float* recv, int64_t count,
                                           ReduceOp op) override {
    if (!on_device(send) || !on_device(recv)) return mpi_->ireduce_scatter(send, recv, count, op);
    count_bytes(count * size() * kFloat);
    begin();
    GPT_NCCL_CHECK(
        ncclReduceScatter(send, recv, elements(count), ncclFloat, nccl_op(op), comm_, stream_));
    return std::make_unique<NcclRequest>(*this, end(), -1);
  }
  std::unique_ptr<Request> iall_reduce_bf16(uint16_t* buf, int64_t count) override {
    if (!on_device(buf)) return mpi_->iall_reduce_bf16(buf, count);
    count_bytes(count * kBf16);
    begin();
    GPT_NCCL_CHECK(ncclAllReduce(buf, buf, elements(count), ncclBfloat16, ncclSum, comm_, stream_));
    return std::make_unique<NcclRequest>(*this, end(), -1);
  }
  std::unique_ptr<Request> iall_gather_bf16(const uint16_t* send, uint16_t* recv,
                                            int64_t count) override {
    if (!on_device(send) || !on_device(recv)) return mpi_->iall_gather_bf16(send, recv, count);
    count_bytes(count * kBf16);
    begin();
    GPT_NCCL_CHECK(ncclAllGather(send, recv, elements(count), ncclBfloat16, comm_, stream_));
    return std::make_unique<NcclRequest>(*this, end(), -1);
  }
  std::unique_ptr<Request> ireduce_scatter_bf16(const uint16_t* send, uint16_t* recv,
                                                int64_t count) override {
    if (!on_device(send) || !on_device(recv)) return mpi_->ireduce_scatter_bf16(send, recv, count);
    count_bytes(count * size() * kBf16);
    begin();
    GPT_NCCL_CHECK(
        ncclReduceScatter(send, recv, elements(count), ncclBfloat16, ncclSum, comm_, stream_));
    return std::make_unique<NcclRequest>(*this, end(), -1);
  }
  bool matches_by_tag() const override { return false; }
  void barrier() override {
    flush_sends();
    GPT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    mpi_->barrier();
  }

  // Issues the held-back sends (alone, in one group) if the one numbered `sequence` is among
  // them; returns the event after which it is complete.
  std::shared_ptr<Event> issue_send(int64_t sequence) {
    if (sequence >= sends_issued_) flush_sends();
    auto found = send_done_.find(sequence);
    GPT_CHECK(found != send_done_.end(), "NCCL send " << sequence << " was waited for twice");
    std::shared_ptr<Event> done = found->second;
    send_done_.erase(found);
    return done;
  }
  void compute_waits(const std::shared_ptr<Event>& done) {
    GPT_CUDA_CHECK(cudaStreamWaitEvent(compute_, done->event, 0));
  }

 private:
  struct HeldSend {
    const float* buf;
    int64_t count;
    int peer;
    std::shared_ptr<Event> ready;
  };
  static constexpr int64_t kFloat = sizeof(float);
  static constexpr int64_t kBf16 = sizeof(uint16_t);
  static size_t elements(int64_t count) { return static_cast<size_t>(count); }
  static ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::kSum ? ncclSum : ncclMax; }
  bool on_device(const void* ptr) const { return backend_.is_device_memory(ptr); }

  // The communication stream starts after everything issued on the compute stream so far; held
  // sends go first, so operations reach NCCL in the order the caller issued them.
  void begin() {
    flush_sends();
    after_compute();
  }
  void after_compute() {
    GPT_CUDA_CHECK(cudaEventRecord(ready_.event, compute_));
    GPT_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_.event, 0));
  }
  std::shared_ptr<Event> end() {
    auto done = std::make_shared<Event>();
    GPT_CUDA_CHECK(cudaEventRecord(done->event, stream_));
    return done;
  }
  // Inside an open group: each held send after the compute work that produced its data.
  // Returns how many were issued (register_sends numbers them once the group's event exists).
  int64_t issue_held_sends() {
    const auto issued = static_cast<int64_t>(held_sends_.size());
    for (const HeldSend& s : held_sends_)
      GPT_CUDA_CHECK(cudaStreamWaitEvent(stream_, s.ready->event, 0));
    for (const HeldSend& s : held_sends_)
      GPT_NCCL_CHECK(ncclSend(s.buf, elements(s.count), ncclFloat, s.peer, comm_, stream_));
    held_sends_.clear();
    return issued;
  }
  void flush_sends() {
    if (held_sends_.empty()) return;
    GPT_NCCL_CHECK(ncclGroupStart());
    const int64_t issued = issue_held_sends();
    GPT_NCCL_CHECK(ncclGroupEnd());
    register_sends(end(), issued);
  }
  void register_sends(const std::shared_ptr<Event>& done, int64_t issued) {
    for (int64_t i = 0; i < issued; ++i) send_done_[sends_issued_ + i] = done;
    sends_issued_ += issued;
  }

  std::unique_ptr<Communicator> mpi_;
  cuda::CudaBackend& backend_;
  cudaStream_t compute_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  Event ready_;
  std::vector<HeldSend> held_sends_;
  int64_t sends_issued_ = 0;
  std::map<int64_t, std::shared_ptr<Event>> send_done_;  // issued sends not yet waited for
};

void NcclRequest::wait() {
  if (waited_) return;
  waited_ = true;
  if (send_sequence_ >= 0) done_ = comm_.issue_send(send_sequence_);
  comm_.compute_waits(done_);
}

}  // namespace

std::unique_ptr<Communicator> make_device_communicator(std::unique_ptr<Communicator> mpi,
                                                       Backend& backend,
                                                       DeviceTransport transport) {
  if (transport == DeviceTransport::kHostStagedMpi || backend.kind() != DeviceKind::kCuda)
    return make_host_staged_communicator(std::move(mpi), backend);
  return std::make_unique<NcclCommunicator>(std::move(mpi),
                                            dynamic_cast<cuda::CudaBackend&>(backend));
}

}  // namespace gpt
