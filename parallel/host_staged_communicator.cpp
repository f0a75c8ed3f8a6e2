// MPI over host-staged buffers (device_communicator.h): device buffers are copied to host memory
// (the copy waits for the compute stream, so the data is final), moved by the MPI communicator,
// and copied back. Host buffers pass straight through. Bytes are counted by the MPI one inside.
#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "parallel/device_communicator.h"

namespace gpt {
namespace {

// A non-blocking operation on a staged copy: wait() completes the MPI request, then copies the
// result back to its destination when there is one (receives, all-reduces, gathers, scatters).
// The result is the staged input itself (in-place operations) or a separate receive buffer.
class StagedRequest final : public Request {
 public:
  using CopyBack = std::function<void(float* dst, const float* host, int64_t count)>;
  StagedRequest(std::vector<float> host, float* dst, CopyBack copy_back, int64_t result_count = -1)
      : host_(std::move(host)), dst_(dst), copy_back_(std::move(copy_back)) {
    if (result_count >= 0) result_.resize(static_cast<size_t>(result_count));
  }
  float* host() { return host_.data(); }
  float* result() { return result_.empty() ? host_.data() : result_.data(); }
  void attach(std::unique_ptr<Request> inner) { inner_ = std::move(inner); }
  void progress() override {
    if (inner_ != nullptr) inner_->progress();
  }
  void wait() override {
    if (inner_ == nullptr) return;
    inner_->wait();
    inner_.reset();
    if (dst_ == nullptr) return;
    const std::vector<float>& out = result_.empty() ? host_ : result_;
    copy_back_(dst_, out.data(), static_cast<int64_t>(out.size()));
  }
  ~StagedRequest() override {
    // An abandoned request still completes its MPI operation before its buffer dies.
    if (inner_ != nullptr) inner_->wait();
  }

 private:
  std::vector<float> host_, result_;
  float* dst_;
  CopyBack copy_back_;
  std::unique_ptr<Request> inner_;
};

// An operation completed when it was posted.
class DoneRequest final : public Request {
 public:
  void wait() override {}
};

class HostStagedCommunicator final : public Communicator {
 public:
  HostStagedCommunicator(std::unique_ptr<Communicator> mpi, Backend& backend)
      : mpi_(std::move(mpi)), backend_(backend) {}

  int rank() const override { return mpi_->rank(); }
  int size() const override { return mpi_->size(); }
  std::string name() const override { return mpi_->name(); }
  MPI_Comm mpi_comm() const override { return mpi_->mpi_comm(); }
  int64_t bytes_moved() const override { return mpi_->bytes_moved(); }
  void reset_bytes_moved() override { mpi_->reset_bytes_moved(); }

  void all_reduce(float* buf, int64_t count, ReduceOp op) override {
    in_place(buf, count, [&](float* p) { mpi_->all_reduce(p, count, op); });
  }
  void all_reduce(double* buf, int64_t count, ReduceOp op) override {
    mpi_->all_reduce(buf, count, op);
  }
  void all_gather(const float* send, float* recv, int64_t count) override {
    send_receive(send, count, recv, count * size(),
                 [&](const float* s, float* r) { mpi_->all_gather(s, r, count); });
  }
  void reduce_scatter(const float* send, float* recv, int64_t count, ReduceOp op) override {
    send_receive(send, count * size(), recv, count,
                 [&](const float* s, float* r) { mpi_->reduce_scatter(s, r, count, op); });
  }
  void broadcast(float* buf, int64_t count, int root) override {
    in_place(buf, count, [&](float* p) { mpi_->broadcast(p, count, root); });
  }
  void broadcast_bytes(void* buf, int64_t n, int root) override {
    mpi_->broadcast_bytes(buf, n, root);
  }
  void send(const float* buf, int64_t count, int peer, int tag) override {
    if (!on_device(buf)) return mpi_->send(buf, count, peer, tag);
    mpi_->send(stage_in(0, buf, count), count, peer, tag);
  }
  void recv(float* buf, int64_t count, int peer, int tag) override {
    if (!on_device(buf)) return mpi_->recv(buf, count, peer, tag);
    float* host = staging(0, count);
    mpi_->recv(host, count, peer, tag);
    backend_.copy_from_host(buf, host, bytes(count));
  }
  std::unique_ptr<Request> isend(const float* buf, int64_t count, int peer, int tag) override {
    if (!on_device(buf)) return mpi_->isend(buf, count, peer, tag);
    auto request = std::make_unique<StagedRequest>(copy_out(buf, count), nullptr, copy_back());
    request->attach(mpi_->isend(request->host(), count, peer, tag));
    return request;
  }
  std::unique_ptr<Request> irecv(float* buf, int64_t count, int peer, int tag) override {
    if (!on_device(buf)) return mpi_->irecv(buf, count, peer, tag);
    auto request = std::make_unique<StagedRequest>(std::vector<float>(static_cast<size_t>(count)),
                                                   buf, copy_back());
    request->attach(mpi_->irecv(request->host(), count, peer, tag));
    return request;
  }
  std::unique_ptr<Request> iall_reduce(float* buf, int64_t count, ReduceOp op) override {
    if (!on_device(buf)) return mpi_->iall_reduce(buf, count, op);
    auto request = std::make_unique<StagedRequest>(copy_out(buf, count), buf, copy_back());
    request->attach(mpi_->iall_reduce(request->host(), count, op));
    return request;
  }
  // Staged into separate host buffers, so an in-place gather (send inside recv) stays legal.
  std::unique_ptr<Request> iall_gather(const float* send, float* recv, int64_t count) override {
    if (!on_device(send) && !on_device(recv)) return mpi_->iall_gather(send, recv, count);
    auto request =
        std::make_unique<StagedRequest>(copy_out(send, count), recv, copy_back(), count * size());
    request->attach(mpi_->iall_gather(request->host(), request->result(), count));
    return request;
  }
  std::unique_ptr<Request> ireduce_scatter(const float* send, float* recv, int64_t count,
                                           ReduceOp op) override {
    if (!on_device(send) && !on_device(recv)) return mpi_->ireduce_scatter(send, recv, count, op);
    auto request =
        std::make_unique<StagedRequest>(copy_out(send, count * size()), recv, copy_back(), count);
    request->attach(mpi_->ireduce_scatter(request->host(), request->result(), count, op));
    return request;
  }
  // bf16 messages staged whole and moved when posted: this fallback transport (no NCCL) gives
  // up their overlap, not their bits.
  std::unique_ptr<Request> iall_reduce_bf16(uint16_t* buf, int64_t count) override {
    if (!on_device(buf)) return mpi_->iall_reduce_bf16(buf, count);
    std::vector<uint16_t> host = copy_out_bf16(buf, count);
    mpi_->iall_reduce_bf16(host.data(), count)->wait();
    backend_.copy_from_host(buf, host.data(), bf16_bytes(count));
    return std::make_unique<DoneRequest>();
  }
  std::unique_ptr<Request> iall_gather_bf16(const uint16_t* send, uint16_t* recv,
                                            int64_t count) override {
    if (!on_device(send) && !on_device(recv)) return mpi_->iall_gather_bf16(send, recv, count);
    std::vector<uint16_t> host_send = copy_out_bf16(send, count);
    std::vector<uint16_t> host_recv(static_cast<size_t>(count * size()));
    mpi_->iall_gather_bf16(host_send.data(), host_recv.data(), count)->wait();
    copy_in_bf16(recv, host_recv);
    return std::make_unique<DoneRequest>();
  }
  std::unique_ptr<Request> ireduce_scatter_bf16(const uint16_t* send, uint16_t* recv,
                                                int64_t count) override {
    if (!on_device(send) && !on_device(recv)) return mpi_->ireduce_scatter_bf16(send, recv, count);
    std::vector<uint16_t> host_send = copy_out_bf16(send, count * size());
    std::vector<uint16_t> host_recv(static_cast<size_t>(count));
    mpi_->ireduce_scatter_bf16(host_send.data(), host_recv.data(), count)->wait();
    copy_in_bf16(recv, host_recv);
    return std::make_unique<DoneRequest>();
  }
  void barrier() override { mpi_->barrier(); }

 private:
  static size_t bytes(int64_t count) { return sizeof(float) * static_cast<size_t>(count); }
  bool on_device(const void* ptr) const { return backend_.is_device_memory(ptr); }
  // op(p) on buf in place: directly on host memory, on a staged copy (then copied back) of
  // device memory.
  template <typename Op>
  void in_place(float* buf, int64_t count, Op op) {
    if (!on_device(buf)) return op(buf);
    float* host = stage_in(0, buf, count);
    op(host);
    backend_.copy_from_host(buf, host, bytes(count));
  }
  // op(send, recv) reading send_count floats and writing recv_count: directly when both are host
  // memory, else through the two staging buffers.
  template <typename Op>
  void send_receive(const float* send, int64_t send_count, float* recv, int64_t recv_count, Op op) {
    if (!on_device(send) && !on_device(recv)) return op(send, recv);
    const float* host_send = stage_in(0, send, send_count);
    float* host_recv = staging(1, recv_count);
    op(host_send, host_recv);
    stage_out(recv, host_recv, recv_count);
  }
  // Staging buffers kept between calls (two: a gather's input and output), so the steady state
  // does not allocate.
  float* staging(int which, int64_t count) {
    std::vector<float>& buffer = staging_[which];
    if (buffer.size() < static_cast<size_t>(count)) buffer.resize(static_cast<size_t>(count));
    return buffer.data();
  }
  float* stage_in(int which, const float* src, int64_t count) {
    float* host = staging(which, count);
    stage_copy(host, src, count);
    return host;
  }
  void stage_out(float* dst, const float* host, int64_t count) {
    if (on_device(dst)) {
      backend_.copy_from_host(dst, host, bytes(count));
    } else {
      std::copy(host, host + count, dst);
    }
  }
  std::vector<float> copy_out(const float* src, int64_t count) {
    std::vector<float> host(static_cast<size_t>(count));
    if (count > 0) stage_copy(host.data(), src, count);
    return host;
  }
  void stage_copy(float* host, const float* src, int64_t count) {
    if (on_device(src)) {
      backend_.copy_to_host(host, src, bytes(count));
    } else {
      std::copy(src, src + count, host);
    }
  }
  static size_t bf16_bytes(int64_t count) { return sizeof(uint16_t) * static_cast<size_t>(count); }
  std::vector<uint16_t> copy_out_bf16(const uint16_t* src, int64_t count) {
    std::vector<uint16_t> host(static_cast<size_t>(count));
    if (count == 0) return host;
    if (on_device(src)) {
      backend_.copy_to_host(host.data(), src, bf16_bytes(count));
    } else {
      std::copy(src, src + count, host.begin());
    }
    return host;
  }
  void copy_in_bf16(uint16_t* dst, const std::vector<uint16_t>& host) {
    if (on_device(dst)) {
      backend_.copy_from_host(dst, host.data(), bf16_bytes(static_cast<int64_t>(host.size())));
    } else {
      std::copy(host.begin(), host.end(), dst);
    }
  }
  StagedRequest::CopyBack copy_back() {
    return [this](float* dst, const float* host, int64_t count) { stage_out(dst, host, count); };
  }

  std::unique_ptr<Communicator> mpi_;
  Backend& backend_;
  std::vector<float> staging_[2];
};

}  // namespace

std::unique_ptr<Communicator> make_host_staged_communicator(std::unique_ptr<Communicator> mpi,
                                                            Backend& backend) {
  return std::make_unique<HostStagedCommunicator>(std::move(mpi), backend);
}

}  // namespace gpt
