// run_program and agree_on_failure (see program.h).
#include "launch/program.h"

#include <cstdlib>
#include <vector>

#include "framework/logging.h"

namespace gpt {

bool parse_tool_options(int argc, char** argv,
                        const boost::program_options::options_description& desc) {
  namespace po = boost::program_options;
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    fail_input(e.what());
  }
  return vm.count("help") > 0;
}

void agree_on_failure(MPI_Comm comm, const std::function<void()>& step) {
  std::string message;
  try {
    step();
  } catch (const std::exception& e) {
    message = e.what();
    if (message.empty()) message = "unknown error";
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  // The lowest failing rank speaks for all: its message is broadcast to every rank.
  int failing = message.empty() ? size : rank;
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

int run_program(int argc, char** argv, const std::function<int(int, char**)>& body) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  log::set_rank(rank, world);
  int code = 0;
  try {
    code = body(argc, argv);
  } catch (const AgreedError& e) {
    if (rank == 0) log::error(e.what());
    code = 1;
  } catch (const Error& e) {
    // Not agreed: other ranks may be waiting in a collective for this one, so end the job.
    log::error(e.what());
    if (world > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    code = 1;
  } catch (const std::exception& e) {
    log::error(std::string("internal error: ") + e.what());
    if (world > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    code = 1;
  }
  MPI_Finalize();
  return code;
}

}  // namespace gpt
