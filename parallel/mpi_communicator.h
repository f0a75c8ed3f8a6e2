// The MPI implementation of Communicator, for host buffers (the CPU backend and the control
// plane). Everything a caller needs is make_mpi_communicator() in communicator.h; this header adds
// the chunk size as a parameter and the chunk splitter so tests can reach the INT_MAX paths
// without allocating 2^31 elements.
#pragma once

#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "parallel/communicator.h"

namespace gpt {

// An MPI communicator this code owns: freed on destruction unless MPI is already finalized (a
// grid destroyed after MPI_Finalize must not call into MPI).
class OwnedMpiComm {
 public:
  OwnedMpiComm() = default;
  explicit OwnedMpiComm(MPI_Comm comm) : comm_(comm) {}
  OwnedMpiComm(const OwnedMpiComm&) = delete;
  OwnedMpiComm& operator=(const OwnedMpiComm&) = delete;
  ~OwnedMpiComm();
  MPI_Comm get() const { return comm_; }
  MPI_Comm* out() { return &comm_; }  // for the MPI call that creates it

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// MPI counts are int: a call on more than this many elements is issued as several calls.
inline constexpr int64_t kMpiMaxChunk = INT_MAX;

// One piece of a buffer that fits an MPI count.
struct ChunkSpan {
  int64_t offset = 0;
  int count = 0;
};

// Splits [0, count) into consecutive pieces of at most max_chunk elements (1 <= max_chunk <=
// INT_MAX). Always returns at least one span, so a zero-length operation still reaches MPI: a
// zero-length send must still match its receive, and a bad peer must still be reported.
std::vector<ChunkSpan> split_into_chunks(int64_t count, int64_t max_chunk);

// As make_mpi_communicator(comm, name), with operations split into pieces of at most max_chunk
// elements (bytes for broadcast_bytes). Both ends of a send/recv must use the same max_chunk.
//
// Bytes counted per call (bytes_moved()), the payload handed to the call on this rank, counted
// once per call whatever the chunking:
//   all_reduce, iall_reduce: the buffer;  all_gather, iall_gather: this rank's send block
//   (count);  reduce_scatter, ireduce_scatter: this rank's whole input (size() * count); broadcast:
//   the buffer, on the root and the receivers alike;  send, isend, recv, irecv: the message, at
//   both ends. The bf16 forms count as their float forms, at 2 bytes a value.
//
// send/recv use one fixed tag: messages between one pair of ranks on one communicator match in
// the order they were issued (MPI's non-overtaking rule), so callers must post them in the same
// order on both sides. Chunks of one large message are matched the same way.
std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm, const std::string& name,
                                                    int64_t max_chunk);

// Before MPI_Init: Open MPI's non-blocking reductions (ireduce_scatter's at 2 ranks) use the
// binomial tree (coll_libnbc_ireduce_algorithm 2) unless the user set the parameter. Behind
// compute, with the progress the caller drives between layers, its default left about 5 ms of 8
// buckets of 1 MB at 2 ranks to run when they were waited for; the binomial tree had finished.
void configure_mpi_collectives_before_init();

}  // namespace gpt
