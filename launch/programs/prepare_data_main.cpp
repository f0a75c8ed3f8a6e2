// prepare-data: turns a text file into a training and a validation data set for `train --data`
// (docs/DESIGN.md "Data"), with the byte-level tokenizer (token b = byte b, vocab_size 256) or
// GPT-2's BPE (vocab_size 50257, eot 50256). The last --val-fraction of the text is held out (0:
// none). The input is streamed in pieces cut where tokenization cannot depend on what lies beyond,
// so inputs larger than memory work and the tokens equal those of the whole text at once. A plain
// serial program: it needs no mpirun and never initialises MPI. Bad input ends with one "error:
// ..." line and exit code 1, and leaves no output file.
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "framework/check.h"
#include "framework/io/bin_tokens.h"
#include "framework/io/dataset.h"
#include "framework/logging.h"
#include "framework/text/gpt2_tokenizer.h"
#include "framework/user_files.h"

namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

struct Options {
  std::string input, output, tokenizer = "bytes", vocab, merges;
  std::vector<std::string> from_bin;
  int64_t vocab_size = 0;  // --from-bin; 0: GPT-2's
  double val_fraction = 0.1;
  int64_t read_mb = 16;
};

// The tokenizer as this program needs it: a name, a vocabulary, and encode.
struct Tokenizer {
  std::string name;
  int64_t vocab_size = 256, eot = -1;
  std::unique_ptr<gpt::Gpt2Tokenizer> gpt2;  // null for bytes

  void encode(std::string_view text, std::vector<int32_t>& ids, uint64_t offset) {
    if (gpt2) return gpt2->encode(text, ids, offset);
    for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  }
  // The first position >= from (and < text.size()) where the text may be cut without changing
  // its tokens, or npos. Bytes: anywhere. GPT-2: after a "\n" between two printable ASCII
  // characters: the "\n" is then a piece of its own (the whitespace rule cannot join it to a
  // neighbour) and the next piece starts there whatever came before, because the pattern only
  // looks ahead.
  size_t cut_at_or_after(std::string_view text, size_t from) const {
    if (!gpt2) return from < text.size() ? from : std::string_view::npos;
    auto printable = [](char c) { return c > ' ' && c < 0x7F; };
    for (size_t p = std::max<size_t>(from, 2); p < text.size(); ++p)
      if (text[p - 1] == '\n' && printable(text[p - 2]) && printable(text[p])) return p;
    return std::string_view::npos;
  }
};

Tokenizer make_tokenizer(const Options& o) {
  Tokenizer t;
  t.name = o.tokenizer;
  if (o.tokenizer == "gpt2") {
    t.gpt2 = std::make_unique<gpt::Gpt2Tokenizer>(o.vocab, o.merges);
    t.vocab_size = t.gpt2->vocab_size();
    t.eot = t.gpt2->eot();
  } else {
    GPT_INPUT_CHECK(o.tokenizer == "bytes",
                    "--tokenizer " << o.tokenizer << " is not one of bytes, gpt2");
  }
  return t;
}

// Where the validation part starts: at least one byte on each side, whatever the fraction.
uint64_t validation_start(uint64_t n, double fraction) {
  if (fraction == 0.0) return n;
  auto n_val = static_cast<uint64_t>(std::llround(static_cast<double>(n) * fraction));
  n_val = std::min<uint64_t>(std::max<uint64_t>(n_val, 1), n - 1);
  return n - n_val;
}

// Checks the options and the input file; returns the input's size in bytes.
uint64_t check_text_input(const Options& o) {
  GPT_INPUT_CHECK(o.val_fraction >= 0.0 && o.val_fraction < 1.0,
                  "--val-fraction " << o.val_fraction << " must be in [0, 1)");
  GPT_INPUT_CHECK(o.read_mb >= 1, "--read-mb " << o.read_mb << " must be at least 1");
  const fs::path output(o.output);
  GPT_INPUT_CHECK(!output.filename().empty(),
                  "--output " << o.output << " must name a file prefix, not a directory");
  gpt::require_regular_file(o.input, "--input");
  std::error_code ec;
  const uint64_t n = fs::file_size(o.input, ec);
  GPT_INPUT_CHECK(!ec, "--input " << o.input << ": " << ec.message());
  GPT_INPUT_CHECK(n > 0, "--input " << o.input << " is empty");
  GPT_INPUT_CHECK(n >= 2 || o.val_fraction == 0.0,
                  "--input " << o.input << " has 1 byte, too few to split in two");
  return n;
}

void print_summary(const Options& o, uint64_t n, const Tokenizer& tokenizer,
                   const gpt::TokenFileWriter& train, const std::string& train_path,
                   const gpt::TokenFileWriter* val, const std::string& val_path, double seconds) {
  std::printf("prepare-data: %llu bytes of %s -> %lld train tokens in %s", (unsigned long long)n,
              o.input.c_str(), static_cast<long long>(train.size()), train_path.c_str());
  if (val)
    std::printf(", %lld validation tokens in %s", static_cast<long long>(val->size()),
                val_path.c_str());
  std::printf(" (tokenizer %s, vocab_size %lld; %.1f MB/s)\n", tokenizer.name.c_str(),
              static_cast<long long>(tokenizer.vocab_size), n / 1e6 / std::max(seconds, 1e-9));
}

void create_output_folder(const Options& o) {
  const fs::path parent = fs::path(o.output).parent_path();
  if (parent.empty()) return;
  std::error_code ec;
  fs::create_directories(parent, ec);
  GPT_INPUT_CHECK(!ec, "--output " << o.output << ": cannot create directory " << parent.string()
                                   << ": " << ec.message());
}

// Every 256 MB of input, a line on stderr with the rate so far.
void report_progress(uint64_t offset, uint64_t n, std::chrono::steady_clock::time_point t0,
                     uint64_t& next_report) {
  if (offset < next_report) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "prepare-data: %.0f of %.0f MB, %.1f MB/s\n", offset / 1e6, n / 1e6,
               offset / 1e6 / s);
  next_report += 256ull << 20;
}

void run(const Options& o) {
  const uint64_t n = check_text_input(o);
  std::ifstream in(o.input, std::ios::binary);
  GPT_INPUT_CHECK(in.good(), "--input " << o.input << ": cannot be read");
  Tokenizer tokenizer = make_tokenizer(o);

  create_output_folder(o);
  const std::string train_path = o.output + ".train.h5", val_path = o.output + ".val.h5";
  gpt::TokenFileWriter train(train_path, tokenizer.vocab_size, tokenizer.name, tokenizer.eot);
  std::unique_ptr<gpt::TokenFileWriter> val;
  const uint64_t val_begin = validation_start(n, o.val_fraction);

  // buffer holds bytes [offset, offset + buffer.size()) of the input; each round encodes its
  // prefix up to a cut and keeps the rest. The train/validation switch is a cut too: the first
  // at or after val_begin.
  const auto read_bytes = static_cast<size_t>(o.read_mb) << 20;
  std::string buffer;
  uint64_t offset = 0;
  std::vector<int32_t> ids;
  gpt::TokenFileWriter* out = &train;
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t next_report = 256ull << 20;
  while (true) {
    const size_t old = buffer.size();
    buffer.resize(old + read_bytes);
    in.read(buffer.data() + old, static_cast<std::streamsize>(read_bytes));
    buffer.resize(old + static_cast<size_t>(in.gcount()));
    GPT_INPUT_CHECK(!in.bad(), "--input " << o.input << ": read failed");
    const bool at_end = in.eof();
    while (!buffer.empty()) {
      constexpr size_t kNone = std::string_view::npos;
      size_t upto = kNone;
      const bool switch_here =
          out == &train && val_begin < n && val_begin - offset <= buffer.size();
      if (switch_here) {
        upto = tokenizer.cut_at_or_after(buffer, static_cast<size_t>(val_begin - offset));
        if (upto == kNone && !at_end) break;      // read on to find where validation may start
        if (upto == kNone) upto = buffer.size();  // none: reported below
      } else if (at_end) {
        upto = buffer.size();
      } else {
        upto = tokenizer.cut_at_or_after(buffer, buffer.size() / 2);
        if (upto == kNone) upto = tokenizer.cut_at_or_after(buffer, 0);
        if (upto == kNone || upto == 0) break;  // no cut yet: read more
      }
      ids.clear();
      try {
        tokenizer.encode(std::string_view(buffer).substr(0, upto), ids, offset);
      } catch (const gpt::Error& e) {
        gpt::fail_input(GPT_MSG("--input " << o.input << ": " << e.what()));
      }
      out->append(ids.data(), ids.size());
      buffer.erase(0, upto);
      offset += upto;
      if (switch_here) {
        GPT_INPUT_CHECK(offset < n, "--input " << o.input
                                               << ": no place to start the validation part at "
                                                  "or after byte "
                                               << val_begin
                                               << " (gpt2 needs a line break between printable "
                                                  "characters)");
        val = std::make_unique<gpt::TokenFileWriter>(val_path, tokenizer.vocab_size, tokenizer.name,
                                                     tokenizer.eot);
        out = val.get();
      }
      if (!at_end && buffer.size() < read_bytes) break;
    }
    report_progress(offset, n, t0, next_report);
    if (at_end && buffer.empty()) break;
  }
  train.finish();
  if (val) val->finish();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  print_summary(o, n, tokenizer, train, train_path, val.get(), val_path, seconds);
}

// --from-bin: each llm.c or nanoGPT token file becomes OUTPUT/<its name>.h5, a shard of one data
// set (`train --data OUTPUT`). Their tokens are GPT-2's unless --tokenizer and --vocab-size say
// otherwise (nanoGPT's character-level sets).
void import_bins(const Options& o, bool tokenizer_given) {
  const std::string tokenizer = tokenizer_given ? o.tokenizer : "gpt2";
  GPT_INPUT_CHECK(o.vocab_size > 0 || tokenizer == "gpt2",
                  "--from-bin with --tokenizer " << tokenizer << " needs --vocab-size");
  const int64_t vocab = o.vocab_size > 0 ? o.vocab_size : gpt::kGpt2VocabSize;
  const int64_t eot = tokenizer == "gpt2" && vocab == gpt::kGpt2VocabSize ? gpt::kGpt2Eot : -1;
  std::error_code ec;
  fs::create_directories(o.output, ec);
  GPT_INPUT_CHECK(fs::is_directory(o.output),
                  "--output " << o.output << ": cannot create the directory");
  const auto t0 = std::chrono::steady_clock::now();
  int64_t total = 0;
  for (const std::string& input : o.from_bin) {
    const std::string output = (fs::path(o.output) / fs::path(input).stem()).string() + ".h5";
    const gpt::BinImport r = gpt::import_bin_tokens(input, output, vocab, tokenizer, eot);
    std::printf("prepare-data: %s (%s) -> %lld tokens in %s\n", input.c_str(),
                r.llmc_header ? "llm.c shard" : "headerless uint16",
                static_cast<long long>(r.tokens), output.c_str());
    total += r.tokens;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "prepare-data: %lld tokens in %zu shards (tokenizer %s, vocab_size %lld; %.1f M "
      "tokens/s); train with --data %s\n",
      static_cast<long long>(total), o.from_bin.size(), tokenizer.c_str(),
      static_cast<long long>(vocab), total / 1e6 / std::max(seconds, 1e-9), o.output.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  const std::string gpt2_dir = std::string(GPT_SOURCE_DIR) + "/third_party/gpt2/";
  po::options_description desc(
      "prepare-data: text file -> training and validation data sets\n"
      "usage: prepare-data --input FILE.txt --output PREFIX [--tokenizer bytes|gpt2]\n"
      "       [--val-fraction F]\n"
      "       prepare-data --from-bin FILE.bin... --output DIR [--vocab-size N --tokenizer NAME]\n"
      "writes PREFIX.train.h5 and PREFIX.val.h5 (creating PREFIX's folder)\noptions");
  desc.add_options()("help,h", "show this help and exit")(
      "input", po::value<std::string>(&options.input), "text file to tokenize (required)")(
      "output", po::value<std::string>(&options.output),
      "output prefix: writes PREFIX.train.h5 and PREFIX.val.h5 (required)")(
      "tokenizer", po::value<std::string>(&options.tokenizer)->default_value("bytes"),
      "bytes (token = byte, vocab 256) or gpt2 (OpenAI's GPT-2 BPE, vocab 50257)")(
      "vocab", po::value<std::string>(&options.vocab)->default_value(gpt2_dir + "encoder.json"),
      "gpt2: the vocabulary (encoder.json or vocab.json)")(
      "merges", po::value<std::string>(&options.merges)->default_value(gpt2_dir + "vocab.bpe"),
      "gpt2: the merges (vocab.bpe or merges.txt)")(
      "val-fraction", po::value<double>(&options.val_fraction)->default_value(0.1, "0.1"),
      "share of the text, taken from its end, held out for validation; in [0, 1), 0 = none "
      "(gpt2 starts it at the first line break after that point)")(
      "read-mb", po::value<int64_t>(&options.read_mb)->default_value(16),
      "read the input in pieces of this many MB")(
      "from-bin", po::value<std::vector<std::string>>(&options.from_bin)->multitoken(),
      "instead of --input: llm.c .bin shards or nanoGPT's headerless uint16 .bin files, each "
      "written as OUTPUT/<name>.h5 (--output is then a directory)")(
      "vocab-size", po::value<int64_t>(&options.vocab_size)->default_value(0),
      "--from-bin: the tokens' vocabulary (0 = GPT-2's 50257)");
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    po::notify(vm);
    GPT_INPUT_CHECK(vm.count("output"), "--output PREFIX is required (see --help)");
    if (!options.from_bin.empty()) {
      GPT_INPUT_CHECK(!vm.count("input"), "--input and --from-bin exclude each other");
      import_bins(options, !vm["tokenizer"].defaulted());
      return 0;
    }
    GPT_INPUT_CHECK(vm.count("input"), "--input FILE is required (see --help)");
    run(options);
    return 0;
  } catch (const po::error& e) {
    gpt::log::error(e.what());
  } catch (const std::exception& e) {
    gpt::log::error(e.what());
  }
  return 1;
}
