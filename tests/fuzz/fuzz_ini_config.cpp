// Fuzzes the --config file (launch/programs/config_file.h): INI-style name = value lines read by
// Boost.Program_options into train's options (launch/training/train_options.h), their typed values
// and enum names included, as parse_options reads it.
#include <sstream>

#include "launch/programs/config_file.h"
#include "launch/training/train_options.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace po = boost::program_options;
  const std::string text(reinterpret_cast<const char*>(data), size);
  gpt::fuzz::expect_success_or_input_error([&] {
    gpt::TrainOptions options;
    po::options_description desc("train");
    desc.add_options()("config", po::value<std::string>(), "INI-style file");
    desc.add(gpt::train_options_description(options));
    po::variables_map vm;
    std::istringstream in(text);
    // As parse_options: a Boost error of notify (a value's own check) is an input error too.
    gpt::store_config_file(in, "train.ini", desc, vm);
    try {
      po::notify(vm);
    } catch (const po::error& e) {
      gpt::fail_input(e.what());
    }
  });
  return 0;
}
