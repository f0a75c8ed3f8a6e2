// prepare-data: turns a text file into a training and a validation data set for `train --data`
// (DESIGN.md "Data"): byte-level tokens (tokenizer "bytes", vocab_size 256), the last
// --val-fraction of the bytes held out for validation. A plain serial program: it needs no
// mpirun and never initialises MPI. Bad input ends with one "error: ..." line and exit code 1.
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include "framework/check.h"
#include "framework/io/dataset.h"
#include "framework/logging.h"

namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

struct Options {
  std::string input;
  std::string output;
  double val_fraction = 0.1;
};

std::string read_file(const std::string& path) {
  std::error_code ec;
  GPT_INPUT_CHECK(fs::exists(path, ec), "--input " << path << ": no such file");
  GPT_INPUT_CHECK(fs::is_regular_file(path, ec), "--input " << path << ": not a regular file");
  std::ifstream in(path, std::ios::binary);
  GPT_INPUT_CHECK(in.good(), "--input " << path << ": cannot be read");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  GPT_INPUT_CHECK(!in.bad(), "--input " << path << ": read failed");
  return text;
}

gpt::TokenDataset byte_dataset(const std::string& path, const std::string& text, size_t begin,
                               size_t end) {
  gpt::TokenDataset data;
  data.path = path;
  data.vocab_size = 256;
  data.tokenizer = "bytes";
  data.tokens.reserve(end - begin);
  for (size_t i = begin; i < end; ++i)
    data.tokens.push_back(static_cast<int32_t>(static_cast<unsigned char>(text[i])));
  return data;
}

void run(const Options& options) {
  GPT_INPUT_CHECK(options.val_fraction > 0.0 && options.val_fraction < 1.0,
                  "--val-fraction " << options.val_fraction << " must be in (0, 1)");
  const fs::path output(options.output);
  GPT_INPUT_CHECK(!output.filename().empty(),
                  "--output " << options.output << " must name a file prefix, not a directory");
  const fs::path parent = output.parent_path();
  std::error_code ec;
  GPT_INPUT_CHECK(
      parent.empty() || fs::is_directory(parent, ec),
      "--output " << options.output << ": directory " << parent.string() << " does not exist");

  const std::string text = read_file(options.input);
  GPT_INPUT_CHECK(!text.empty(), "--input " << options.input << " is empty");
  GPT_INPUT_CHECK(text.size() >= 2,
                  "--input " << options.input << " has 1 byte, too few to split in two");
  const size_t n = text.size();
  // At least one token on each side, whatever the fraction.
  auto n_val = static_cast<size_t>(std::llround(static_cast<double>(n) * options.val_fraction));
  n_val = std::min(std::max<size_t>(n_val, 1), n - 1);
  const size_t n_train = n - n_val;

  const std::string train_path = options.output + ".train.h5";
  const std::string val_path = options.output + ".val.h5";
  gpt::write_token_dataset(train_path, byte_dataset(train_path, text, 0, n_train));
  gpt::write_token_dataset(val_path, byte_dataset(val_path, text, n_train, n));
  std::printf(
      "prepare-data: %zu bytes of %s -> %zu train tokens in %s, %zu validation tokens "
      "in %s (tokenizer bytes, vocab_size 256)\n",
      n, options.input.c_str(), n_train, train_path.c_str(), n_val, val_path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  po::options_description desc(
      "prepare-data: text file -> byte-level training and validation data sets\n"
      "usage: prepare-data --input FILE.txt --output PREFIX [--val-fraction F]\n"
      "writes PREFIX.train.h5 and PREFIX.val.h5\noptions");
  desc.add_options()("help,h", "show this help and exit")(
      "input", po::value<std::string>(&options.input), "text file to tokenize (required)")(
      "output", po::value<std::string>(&options.output),
      "output prefix: writes PREFIX.train.h5 and PREFIX.val.h5 (required)")(
      "val-fraction", po::value<double>(&options.val_fraction)->default_value(0.1, "0.1"),
      "share of the bytes, taken from the end of the file, held out for validation; in (0, 1)");
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    po::notify(vm);
    GPT_INPUT_CHECK(vm.count("input"), "--input FILE is required (see --help)");
    GPT_INPUT_CHECK(vm.count("output"), "--output PREFIX is required (see --help)");
    run(options);
    return 0;
  } catch (const po::error& e) {
    gpt::log::error(e.what());
  } catch (const std::exception& e) {
    gpt::log::error(e.what());
  }
  return 1;
}
