// run_program and parse_options (see program.h).
#include "launch/programs/program.h"

#include <algorithm>
#include <fstream>
#include <iostream>

#include "framework/io/hdf5_util.h"
#include "framework/logging.h"
#include "framework/user_files.h"
#include "launch/programs/config_file.h"
#include "parallel/mpi_communicator.h"

namespace gpt {
namespace {

namespace po = boost::program_options;

// Boost's parse of the command line and the config file; false when --help was asked for.
bool parse_command_line(int argc, char** argv, const po::options_description& desc,
                        std::set<std::string>* given) {
  po::variables_map vm;
  try {
    po::store(last_of_each(po::parse_command_line(argc, argv, desc)), vm);
    if (vm.count("help")) return false;
    if (vm.count("config")) {
      const std::string path = vm["config"].as<std::string>();
      require_regular_file(path, "--config");
      std::ifstream in(path);
      GPT_INPUT_CHECK(in.good(), "--config " << path << ": cannot open the file");
      store_config_file(in, path, desc, vm);
    }
    po::notify(vm);
  } catch (po::error& e) {
    fail_input(option_error_message(e));
  }
  if (given != nullptr) {
    for (const auto& [name, value] : vm)
      if (!value.defaulted()) given->insert(name);
  }
  return true;
}

}  // namespace

bool parse_options(MPI_Comm world, int argc, char** argv, const std::string& caption,
                   const po::options_description& options, std::set<std::string>* given,
                   const std::function<void()>& check) {
  po::options_description desc(caption);
  auto add = desc.add_options();
  add("help,h", "print this help");
  add("config", po::value<std::string>(), "INI-style file of name = value options");
  desc.add(options);
  bool help = false;
  agree_on_failure(world, [&] {
    help = !parse_command_line(argc, argv, desc, given);
    if (!help) check();
  });
  if (help && comm_rank(world) == 0) std::cout << desc << "\n";
  return !help;
}

int run_program(int argc, char** argv, const std::function<int(int, char**)>& body) {
  h5::configure_mpi_io_before_init();
  configure_mpi_collectives_before_init();
  // A failed MPI_Init ends the process under MPI's default handler: there is nothing to agree on.
  int provided = 0;
  // SERIALIZED: a helper thread tests a tp reduction's request while the main thread computes
  // (parallel/background_progress.h); the two never call MPI at once.
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  const int rank = comm_rank(MPI_COMM_WORLD), world = comm_size(MPI_COMM_WORLD);
  log::set_rank(rank, world);
  int code = 0;
  try {
    GPT_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
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
