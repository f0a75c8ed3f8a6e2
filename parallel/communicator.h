// The communicator interface (docs/DESIGN.md "Communicators"): one object per process group (tp,
// dp, pp, embedding, world). Buffers are in the backend's memory. Every call is ordered after the
// work already issued on the backend and before what is issued later: the MPI implementation is
// synchronous (or returns a Request), NCCL enqueues on its stream after an event of the backend's
// compute stream, and the compute stream waits for its completion (device_communicator.h).
// Byte counters per communicator feed the "bytes moved per group" metrics.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <mpi.h>

namespace gpt {

enum class ReduceOp { kSum, kMax };

// A pending non-blocking operation; wait() completes it (idempotent). progress() lets it advance
// without blocking: MPI moves a non-blocking operation's data only inside MPI calls, so a rank
// that computes between posting and waiting calls it to overlap for real. A no-op where the
// transfer runs on its own (NCCL's stream).
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
  virtual void progress() {}
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "tp", "dp", "pp", "embedding", "world"

  virtual void all_reduce(float* buf, int64_t count, ReduceOp op) = 0;  // in place
  virtual void all_reduce(double* buf, int64_t count, ReduceOp op) = 0;
  // recv (size() * count) = every rank's send (count), in rank order. In place when send ==
  // recv + rank() * count (MPI_IN_PLACE; NCCL's in-place form): the distributed optimizer
  // gathers the updated shards straight into the flat value buffer.
  virtual void all_gather(const float* send, float* recv, int64_t count) = 0;
  // recv (count) = this rank's block of the sum over ranks of send (size() * count)
  virtual void reduce_scatter(const float* send, float* recv, int64_t count, ReduceOp op) = 0;
  virtual void broadcast(float* buf, int64_t count, int root) = 0;
  virtual void broadcast_bytes(void* buf, int64_t bytes, int root) = 0;
  // Point-to-point. Messages between a pair with the same tag arrive in the order sent; the
  // pipeline gives activations and gradients different tags so they never match each other.
  virtual void send(const float* buf, int64_t count, int peer, int tag = 0) = 0;
  virtual void recv(float* buf, int64_t count, int peer, int tag = 0) = 0;
  virtual std::unique_ptr<Request> isend(const float* buf, int64_t count, int peer,
                                         int tag = 0) = 0;
  virtual std::unique_ptr<Request> irecv(float* buf, int64_t count, int peer, int tag = 0) = 0;
  virtual std::unique_ptr<Request> iall_reduce(float* buf, int64_t count, ReduceOp op) = 0;
  // Non-blocking all_gather and reduce_scatter (same buffers and in-place rule), so the
  // distributed optimizer can post a bucket's reduce-scatter as its weight passes finish.
  virtual std::unique_ptr<Request> iall_gather(const float* send, float* recv, int64_t count) = 0;
  virtual std::unique_ptr<Request> ireduce_scatter(const float* send, float* recv, int64_t count,
                                                   ReduceOp op) = 0;
  // bf16 collectives (bf16 precision's tp messages): buffers of bfloat16 bits, the same shapes and
  // in-place rules as the float forms, half the bytes. The sum adds bf16 values in float32 and
  // rounds each partial result to bf16 (NCCL's bf16 sum; MPI through a user-defined operation).
  virtual std::unique_ptr<Request> iall_reduce_bf16(uint16_t* buf, int64_t count) = 0;
  virtual std::unique_ptr<Request> iall_gather_bf16(const uint16_t* send, uint16_t* recv,
                                                    int64_t count) = 0;
  virtual std::unique_ptr<Request> ireduce_scatter_bf16(const uint16_t* send, uint16_t* recv,
                                                        int64_t count) = 0;
  virtual void barrier() = 0;
  // Whether point-to-point messages match by tag (MPI). Without tags (NCCL) the k-th send to a
  // peer matches the peer's k-th receive from this rank, whatever the tags say.
  virtual bool matches_by_tag() const { return true; }

  // The MPI communicator of the same group: the control plane (agreement, HDF5's MPI-IO).
  virtual MPI_Comm mpi_comm() const = 0;

  // Virtual so that a communicator wrapping another reports what the inner one moved too.
  virtual int64_t bytes_moved() const { return bytes_moved_; }
  virtual void reset_bytes_moved() { bytes_moved_ = 0; }

 protected:
  // A group of one moves nothing, whatever the call.
  void count_bytes(int64_t bytes) {
    if (size() > 1) bytes_moved_ += bytes;
  }

 private:
  int64_t bytes_moved_ = 0;
};

// An MPI communicator over `comm` (duplicated, with MPI_ERRORS_RETURN so failures surface as
// gpt::Error carrying MPI's message). Host buffers; counts above INT_MAX are sent in chunks.
std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm, const std::string& name);

}  // namespace gpt
