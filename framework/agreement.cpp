// agree_on_failure (see agreement.h): one all-reduce (the lowest failing rank, or none) and, on
// failure, two broadcasts of that rank's message.
#include "framework/agreement.h"

#include <string>
#include <vector>

namespace gpt {

int comm_rank(MPI_Comm comm) {
  int rank = 0;
  GPT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  return rank;
}

int comm_size(MPI_Comm comm) {
  int size = 1;
  GPT_MPI_CHECK(MPI_Comm_size(comm, &size));
  return size;
}

void agree_on_failure(MPI_Comm comm, const std::function<void()>& step) {
  std::string message;
  try {
    step();
  } catch (const std::exception& e) {
    message = e.what();
    if (message.empty()) message = "unknown error";
  }
  const int rank = comm_rank(comm), size = comm_size(comm);
  const int failing = message.empty() ? size : rank;
  int first_failing = size;
  GPT_MPI_CHECK(MPI_Allreduce(&failing, &first_failing, 1, MPI_INT, MPI_MIN, comm));
  if (first_failing == size) return;
  int length = static_cast<int>(message.size());
  GPT_MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT, first_failing, comm));
  std::vector<char> text(static_cast<size_t>(length));
  if (rank == first_failing) text.assign(message.begin(), message.end());
  GPT_MPI_CHECK(MPI_Bcast(text.data(), length, MPI_CHAR, first_failing, comm));
  throw AgreedError(std::string(text.begin(), text.end()));
}

}  // namespace gpt
