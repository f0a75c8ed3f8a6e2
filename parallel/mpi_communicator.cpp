// The MPI Communicator: a duplicated MPI_Comm with MPI_ERRORS_RETURN, so every failure comes back
// as a gpt::Error carrying MPI's own message instead of killing the job silently. Counts above the
// chunk size (INT_MAX in production) are issued as several MPI calls.
#include "parallel/mpi_communicator.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <utility>

#include "framework/bf16.h"
#include "framework/check.h"
#include "framework/logging.h"

namespace gpt {

namespace {

bool mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

MPI_Op to_mpi(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
  }
  fail("to_mpi(op)", __FILE__, __LINE__, GPT_MSG("unknown ReduceOp " << static_cast<int>(op)));
}

// The MPI reduction of bf16 buffers: inout = in + inout per element, added in float32 and rounded
// to bf16 (commutative, so every rank of an all-reduce gets the same bits).
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

template <typename T>
MPI_Datatype mpi_type();
template <>
MPI_Datatype mpi_type<float>() {
  return MPI_FLOAT;
}
template <>
MPI_Datatype mpi_type<double>() {
  return MPI_DOUBLE;
}

// A committed derived datatype, freed on scope exit (also when the call using it throws).
class OwnedDatatype {
 public:
  OwnedDatatype() = default;
  OwnedDatatype(const OwnedDatatype&) = delete;
  OwnedDatatype& operator=(const OwnedDatatype&) = delete;
  ~OwnedDatatype() {
    if (type_ != MPI_DATATYPE_NULL && !mpi_finalized()) MPI_Type_free(&type_);
  }
  MPI_Datatype get() const { return type_; }
  MPI_Datatype* out() { return &type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// The chunks of one non-blocking operation. Every chunk is waited even when an earlier one
// failed, so no buffer is left in flight behind a thrown error.
class MpiRequest final : public Request {
 public:
  explicit MpiRequest(std::string what) : what_(std::move(what)) {}
  MpiRequest(const MpiRequest&) = delete;
  MpiRequest& operator=(const MpiRequest&) = delete;

  ~MpiRequest() override {
    if (done_ || mpi_finalized()) return;
    try {
      wait();
    } catch (const std::exception& e) {
      log::error(GPT_MSG("an abandoned " << what_ << " failed: " << e.what()));
    }
  }

  // expected_count >= 0 for receives (each chunk must deliver exactly its size), -1 otherwise.
  void add(MPI_Request request, int expected_count) {
    requests_.push_back(request);
    expected_.push_back(expected_count);
    statuses_.emplace_back();
    completed_.push_back(false);
  }

  // Tests the chunks not yet complete; a chunk found complete keeps its status for wait(). An
  // error is left for wait() to report.
  void progress() override {
    if (done_) return;
    for (size_t i = 0; i < requests_.size(); ++i) {
      if (completed_[i]) continue;
      int flag = 0;
      if (MPI_Test(&requests_[i], &flag, &statuses_[i]) != MPI_SUCCESS) return;
      completed_[i] = flag != 0;
    }
  }

  void wait() override {
    if (done_) return;
    done_ = true;
    int first_error = MPI_SUCCESS;
    std::string mismatch;
    for (size_t i = 0; i < requests_.size(); ++i) {
      MPI_Status& status = statuses_[i];
      const int rc = completed_[i] ? MPI_SUCCESS : MPI_Wait(&requests_[i], &status);
      if (rc != MPI_SUCCESS) {
        if (first_error == MPI_SUCCESS) first_error = rc;
        continue;
      }
      if (expected_[i] < 0 || status.MPI_SOURCE == MPI_PROC_NULL) continue;
      int got = 0;
      GPT_MPI_CHECK(MPI_Get_count(&status, MPI_FLOAT, &got));
      if (got != expected_[i] && mismatch.empty())
        mismatch = GPT_MSG(what_ << ": expected " << expected_[i] << " floats, got " << got);
    }
    if (first_error != MPI_SUCCESS)
      fail("MPI_Wait(request)", __FILE__, __LINE__, what_ + ": " + mpi_error_string(first_error));
    GPT_CHECK(mismatch.empty(), mismatch);
  }

 private:
  std::string what_;
  std::vector<MPI_Request> requests_;
  std::vector<int> expected_;
  std::vector<MPI_Status> statuses_;
  std::vector<bool> completed_;  // found complete by progress()
  bool done_ = false;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, std::string name, int64_t max_chunk)
      : name_(std::move(name)), max_chunk_(max_chunk) {
    GPT_CHECK(comm != MPI_COMM_NULL, "communicator '" << name_ << "' built from MPI_COMM_NULL");
    GPT_CHECK(max_chunk >= 1 && max_chunk <= kMpiMaxChunk,
              "chunk size " << max_chunk << " outside [1, INT_MAX]");
    GPT_MPI_CHECK(MPI_Comm_dup(comm, comm_.out()));
    GPT_MPI_CHECK(MPI_Comm_set_errhandler(comm_.get(), MPI_ERRORS_RETURN));
    GPT_MPI_CHECK(MPI_Comm_rank(comm_.get(), &rank_));
    GPT_MPI_CHECK(MPI_Comm_size(comm_.get(), &size_));
    GPT_MPI_CHECK(MPI_Op_create(&bf16_sum, 1, &bf16_sum_));
  }
  ~MpiCommunicator() override {
    if (!mpi_finalized()) MPI_Op_free(&bf16_sum_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }
  MPI_Comm mpi_comm() const override { return comm_.get(); }

  void all_reduce(float* buf, int64_t count, ReduceOp op) override {
    all_reduce_impl(buf, count, op);
  }
  void all_reduce(double* buf, int64_t count, ReduceOp op) override {
    all_reduce_impl(buf, count, op);
  }

  void all_gather(const float* send, float* recv, int64_t count) override {
    iall_gather(send, recv, count)->wait();
  }

  void reduce_scatter(const float* send, float* recv, int64_t count, ReduceOp op) override {
    check_count(count);
    if (count > max_chunk_) {
      ireduce_scatter(send, recv, count, op)->wait();
      return;
    }
    count_bytes(count * size_ * static_cast<int64_t>(sizeof(float)));
    GPT_MPI_CHECK(MPI_Reduce_scatter_block(send, recv, static_cast<int>(count), MPI_FLOAT,
                                           to_mpi(op), comm_.get()));
  }

  std::unique_ptr<Request> iall_gather(const float* send, float* recv, int64_t count) override {
    return all_gather_impl(send, recv, count, MPI_FLOAT, "all_gather");
  }

  std::unique_ptr<Request> ireduce_scatter(const float* send, float* recv, int64_t count,
                                           ReduceOp op) override {
    return reduce_scatter_impl(send, recv, count, MPI_FLOAT, to_mpi(op), "reduce_scatter");
  }

  void broadcast(float* buf, int64_t count, int root) override {
    check_count(count);
    count_bytes(count * static_cast<int64_t>(sizeof(float)));
    for (const ChunkSpan& span : split_into_chunks(count, max_chunk_))
      GPT_MPI_CHECK(MPI_Bcast(buf + span.offset, span.count, MPI_FLOAT, root, comm_.get()));
  }

  void broadcast_bytes(void* buf, int64_t bytes, int root) override {
    check_count(bytes);
    count_bytes(bytes);
    char* base = static_cast<char*>(buf);
    for (const ChunkSpan& span : split_into_chunks(bytes, max_chunk_))
      GPT_MPI_CHECK(MPI_Bcast(base + span.offset, span.count, MPI_BYTE, root, comm_.get()));
  }

  void send(const float* buf, int64_t count, int peer, int tag) override {
    check_count(count);
    count_bytes(count * static_cast<int64_t>(sizeof(float)));
    for (const ChunkSpan& span : split_into_chunks(count, max_chunk_))
      GPT_MPI_CHECK(MPI_Send(buf + span.offset, span.count, MPI_FLOAT, peer, tag, comm_.get()));
  }

  void recv(float* buf, int64_t count, int peer, int tag) override {
    check_count(count);
    count_bytes(count * static_cast<int64_t>(sizeof(float)));
    for (const ChunkSpan& span : split_into_chunks(count, max_chunk_)) {
      MPI_Status status;
      GPT_MPI_CHECK(
          MPI_Recv(buf + span.offset, span.count, MPI_FLOAT, peer, tag, comm_.get(), &status));
      if (peer == MPI_PROC_NULL) continue;
      int got = 0;
      GPT_MPI_CHECK(MPI_Get_count(&status, MPI_FLOAT, &got));
      // A shorter message is not an MPI error, but it is always a bug: the pair disagree on
      // the shape of what they exchange.
      GPT_CHECK(got == span.count, describe("recv from rank", peer)
                                       << ": expected " << span.count << " floats, got " << got);
    }
  }

  std::unique_ptr<Request> isend(const float* buf, int64_t count, int peer, int tag) override {
    return chunked(
        describe("isend to rank", peer), count, false, [&](const ChunkSpan& span, MPI_Request* r) {
          GPT_MPI_CHECK(
              MPI_Isend(buf + span.offset, span.count, MPI_FLOAT, peer, tag, comm_.get(), r));
        });
  }

  std::unique_ptr<Request> irecv(float* buf, int64_t count, int peer, int tag) override {
    return chunked(
        describe("irecv from rank", peer), count, true, [&](const ChunkSpan& span, MPI_Request* r) {
          GPT_MPI_CHECK(
              MPI_Irecv(buf + span.offset, span.count, MPI_FLOAT, peer, tag, comm_.get(), r));
        });
  }

  std::unique_ptr<Request> iall_reduce(float* buf, int64_t count, ReduceOp op) override {
    return chunked("iall_reduce on '" + name_ + "'", count, false,
                   [&](const ChunkSpan& span, MPI_Request* r) {
                     GPT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf + span.offset, span.count,
                                                  MPI_FLOAT, to_mpi(op), comm_.get(), r));
                   });
  }

  std::unique_ptr<Request> iall_reduce_bf16(uint16_t* buf, int64_t count) override {
    return chunked(
        "bf16 all_reduce on '" + name_ + "'", count, false,
        [&](const ChunkSpan& span, MPI_Request* r) {
          GPT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf + span.offset, span.count, MPI_UINT16_T,
                                       bf16_sum_, comm_.get(), r));
        },
        sizeof(uint16_t));
  }

  std::unique_ptr<Request> iall_gather_bf16(const uint16_t* send, uint16_t* recv,
                                            int64_t count) override {
    return all_gather_impl(send, recv, count, MPI_UINT16_T, "bf16 all_gather");
  }

  std::unique_ptr<Request> ireduce_scatter_bf16(const uint16_t* send, uint16_t* recv,
                                                int64_t count) override {
    return reduce_scatter_impl(send, recv, count, MPI_UINT16_T, bf16_sum_, "bf16 reduce_scatter");
  }

  void barrier() override { GPT_MPI_CHECK(MPI_Barrier(comm_.get())); }

 private:
  // The all-gathers of T (MPI type `type`): see iall_gather.
  template <typename T>
  std::unique_ptr<Request> all_gather_impl(const T* send, T* recv, int64_t count, MPI_Datatype type,
                                           const char* what) {
    check_count(count);
    count_bytes(count * static_cast<int64_t>(sizeof(T)));
    // MPI forbids aliased send and receive buffers; this rank's block of recv is the in-place form.
    const bool in_place = send == recv + rank_ * count;
    auto request = std::make_unique<MpiRequest>(std::string(what) + " on '" + name_ + "'");
    MPI_Request r;
    if (count <= max_chunk_) {
      GPT_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : send, static_cast<int>(count), type,
                                   recv, static_cast<int>(count), type, comm_.get(), &r));
      request->add(r, -1);
      return request;
    }
    // Chunk k of every rank's block lands at recv + r * count + offset: one element of a type
    // whose extent is a whole block places each rank's piece at its stride. (A datatype may be
    // freed while an operation using it is pending.)
    for (const ChunkSpan& span : split_into_chunks(count, max_chunk_)) {
      OwnedDatatype piece, strided;
      GPT_MPI_CHECK(MPI_Type_contiguous(span.count, type, piece.out()));
      GPT_MPI_CHECK(MPI_Type_create_resized(
          piece.get(), 0, static_cast<MPI_Aint>(count * static_cast<int64_t>(sizeof(T))),
          strided.out()));
      GPT_MPI_CHECK(MPI_Type_commit(strided.out()));
      if (in_place) {
        GPT_MPI_CHECK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv + span.offset, 1,
                                     strided.get(), comm_.get(), &r));
      } else {
        GPT_MPI_CHECK(MPI_Iallgather(send + span.offset, span.count, type, recv + span.offset, 1,
                                     strided.get(), comm_.get(), &r));
      }
      request->add(r, -1);
    }
    return request;
  }

  // The reduce-scatters of T (MPI type `type`) by `op`: see ireduce_scatter.
  template <typename T>
  std::unique_ptr<Request> reduce_scatter_impl(const T* send, T* recv, int64_t count,
                                               MPI_Datatype type, MPI_Op op, const char* what) {
    check_count(count);
    count_bytes(count * size_ * static_cast<int64_t>(sizeof(T)));
    auto request = std::make_unique<MpiRequest>(std::string(what) + " on '" + name_ + "'");
    MPI_Request r;
    // At 2 ranks each block is reduced to its owner, one MPI_Ireduce each (a message each way):
    // behind compute, advanced only by the Request::progress calls between layers (the
    // distributed optimizer's buckets), Open MPI 4.1's MPI_Ireduce_scatter_block took several
    // times as long. From 3 ranks up, per-owner reductions send far more messages than its
    // reduce-scatter, and measured slower (docs/BENCHMARKS.md, "The distributed optimizer").
    if (count <= max_chunk_ && size_ != 2) {
      GPT_MPI_CHECK(MPI_Ireduce_scatter_block(send, recv, static_cast<int>(count), type, op,
                                              comm_.get(), &r));
      request->add(r, -1);
      return request;
    }
    // Predefined reductions are only guaranteed on predefined types, so no strided datatype
    // for chunks: each chunk of each block is reduced to its owner.
    for (const ChunkSpan& span : split_into_chunks(count, max_chunk_)) {
      for (int root = 0; root < size_; ++root) {
        const T* block = send + root * count + span.offset;
        T* out = root == rank_ ? recv + span.offset : nullptr;
        GPT_MPI_CHECK(MPI_Ireduce(block, out, span.count, type, op, root, comm_.get(), &r));
        request->add(r, -1);
      }
    }
    return request;
  }

  template <typename T>
  void all_reduce_impl(T* buf, int64_t count, ReduceOp op) {
    check_count(count);
    count_bytes(count * static_cast<int64_t>(sizeof(T)));
    for (const ChunkSpan& span : split_into_chunks(count, max_chunk_))
      GPT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf + span.offset, span.count, mpi_type<T>(),
                                  to_mpi(op), comm_.get()));
  }

  // A non-blocking operation on `count` elements of `element_bytes` (floats unless said) as one
  // request named `what`, one MPI request per chunk: start(span, &r) starts the chunk's. A
  // receive checks that every chunk arrives whole.
  template <typename Start>
  std::unique_ptr<Request> chunked(std::string what, int64_t count, bool receive, Start start,
                                   int64_t element_bytes = sizeof(float)) {
    check_count(count);
    count_bytes(count * element_bytes);
    auto request = std::make_unique<MpiRequest>(std::move(what));
    for (const ChunkSpan& span : split_into_chunks(count, max_chunk_)) {
      MPI_Request r;
      start(span, &r);
      request->add(r, receive ? span.count : -1);
    }
    return request;
  }

  void check_count(int64_t count) const {
    GPT_CHECK(count >= 0, "negative count " << count << " on communicator '" << name_ << "'");
  }

  std::string describe(const char* what, int peer) const {
    return GPT_MSG(what << " " << peer << " on '" << name_ << "'");
  }

  OwnedMpiComm comm_;
  std::string name_;
  int64_t max_chunk_;
  int rank_ = 0;
  int size_ = 1;
  MPI_Op bf16_sum_ = MPI_OP_NULL;
};

}  // namespace

OwnedMpiComm::~OwnedMpiComm() {
  if (comm_ != MPI_COMM_NULL && !mpi_finalized()) MPI_Comm_free(&comm_);
}

std::vector<ChunkSpan> split_into_chunks(int64_t count, int64_t max_chunk) {
  GPT_CHECK(count >= 0, "negative count " << count);
  GPT_CHECK(max_chunk >= 1 && max_chunk <= kMpiMaxChunk,
            "chunk size " << max_chunk << " outside [1, INT_MAX]");
  std::vector<ChunkSpan> spans;
  spans.reserve(static_cast<size_t>(std::max<int64_t>(1, (count + max_chunk - 1) / max_chunk)));
  int64_t offset = 0;
  do {
    int64_t n = std::min(max_chunk, count - offset);
    spans.push_back({offset, static_cast<int>(n)});
    offset += n;
  } while (offset < count);
  return spans;
}

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm, const std::string& name,
                                                    int64_t max_chunk) {
  return std::make_unique<MpiCommunicator>(comm, name, max_chunk);
}

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm, const std::string& name) {
  return make_mpi_communicator(comm, name, kMpiMaxChunk);
}

void configure_mpi_collectives_before_init() {
  setenv("OMPI_MCA_coll_libnbc_ireduce_algorithm", "2", 0);
}

}  // namespace gpt
