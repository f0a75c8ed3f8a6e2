// prepare-data: turns a text file into a training and a validation data set for `train --data`
// (docs/DATA.md), with the byte-level tokenizer (token b = byte b, vocab_size 256), GPT-2's BPE
// (vocab_size 50257, eot 50256) or a Hugging Face tokenizer.json. A .jsonl input holds one
// document per line (its "text"), with the tokenizer's document token between documents; any
// other input is one document. The last --val-fraction of the input is held out (0: none). The
// input is streamed in pieces cut where tokenization cannot depend on what lies beyond (between
// lines of a .jsonl; inside a document where the tokenizer proves it), so inputs larger than
// memory work, --threads workers encode pieces at once, and the tokens equal those of the whole
// text at once. A plain serial program apart from its worker threads: it needs no mpirun and
// never initialises MPI. Bad input ends with one "error: ..." line and exit code 1, and leaves no
// output file. --render-only reads conversations instead (one {"messages": [...], "tools": [...]}
// a line, framework/text/conversations.h) and prints each as its tokenizer directory's chat
// template renders it, one {"text": ...} JSON line each (docs/DATA.md, "Conversations and chat
// templates").
#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "framework/check.h"
#include "framework/io/bin_tokens.h"
#include "framework/io/dataset.h"
#include "framework/json.h"
#include "framework/logging.h"
#include "framework/text/chat_template.h"
#include "framework/text/conversations.h"
#include "framework/text/text_tokenizer.h"
#include "framework/user_files.h"

namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

struct Options {
  std::string input, output, tokenizer = "bytes", vocab, merges, format = "auto", json_key = "text";
  std::vector<std::string> from_bin;
  int64_t vocab_size = 0;  // --from-bin; 0: GPT-2's
  double val_fraction = 0.1;
  int64_t read_mb = 16;
  int threads = 0;  // 0: every core
  bool allow_special_tokens = false;
  bool render_only = false, add_generation_prompt = false;
};

// A piece of the input that is encoded on its own: whole lines of a .jsonl, or a stretch of the
// one document of a text file (a continuation unless it starts the file).
struct Chunk {
  std::string text;
  uint64_t offset = 0;
  bool validation = false;
  // The input ended before a place where validation could start: an error once the chunk is
  // encoded (so that an encoding error in it, such as invalid UTF-8, is the one reported).
  bool no_validation_start = false;
};

// Where the validation part starts: at least one byte on each side, whatever the fraction.
uint64_t validation_start(uint64_t n, double fraction) {
  if (fraction == 0.0) return n;
  auto n_val = static_cast<uint64_t>(std::llround(static_cast<double>(n) * fraction));
  n_val = std::min<uint64_t>(std::max<uint64_t>(n_val, 1), n - 1);
  return n - n_val;
}

bool is_jsonl(const Options& o) {
  if (o.format != "auto") return o.format == "jsonl";
  return fs::path(o.input).extension() == ".jsonl";
}

// Checks the options and the input file; returns the input's size in bytes.
uint64_t check_text_input(const Options& o) {
  GPT_INPUT_CHECK(o.val_fraction >= 0.0 && o.val_fraction < 1.0,
                  "--val-fraction " << o.val_fraction << " must be in [0, 1)");
  GPT_INPUT_CHECK(o.read_mb >= 1 && o.read_mb <= 4096,
                  "--read-mb " << o.read_mb << " must be in [1, 4096]");
  GPT_INPUT_CHECK(o.threads >= 0 && o.threads <= 256,
                  "--threads " << o.threads << " must be in [0, 256] (0: every core)");
  GPT_INPUT_CHECK(o.format == "auto" || o.format == "text" || o.format == "jsonl",
                  "--format " << o.format << " is not one of auto, text, jsonl");
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

// Reads the input in pieces and cuts them into chunks (see Chunk); the train/validation switch
// is a cut too: the first at or after the validation start.
class ChunkReader {
 public:
  // Chunks of --read-mb, smaller for a small input so that every worker gets several.
  ChunkReader(const Options& o, uint64_t n, const gpt::TextTokenizer& tokenizer, int workers)
      : o_(o),
        n_(n),
        tokenizer_(tokenizer),
        jsonl_(is_jsonl(o)),
        read_bytes_(static_cast<size_t>(
            std::clamp<uint64_t>(n / (4 * static_cast<uint64_t>(workers)), 1u << 20,
                                 static_cast<uint64_t>(o.read_mb) << 20))),
        val_begin_(validation_start(n, o.val_fraction)),
        in_(o.input, std::ios::binary) {
    GPT_INPUT_CHECK(in_.good(), "--input " << o.input << ": cannot be read");
  }

  std::optional<Chunk> next() {
    constexpr size_t kNone = std::string_view::npos;
    while (true) {
      if (!at_end_ && buffer_.size() < read_bytes_) read_more();
      if (buffer_.empty()) return std::nullopt;
      size_t upto = kNone;
      const bool switch_here =
          !validation_ && val_begin_ < n_ && val_begin_ - offset_ <= buffer_.size();
      if (switch_here) {
        upto = cut(static_cast<size_t>(val_begin_ - offset_));
        if (upto == kNone && !at_end_) {  // read on to find where validation may start
          read_more();
          continue;
        }
        if (upto == kNone) {
          Chunk c{std::move(buffer_), offset_, false, true};
          buffer_.clear();
          offset_ = n_;
          return c;
        }
      } else if (at_end_) {
        upto = buffer_.size();
      } else {
        upto = cut(buffer_.size() / 2);
        if (upto == kNone) upto = cut(0);
        if (upto == kNone || upto == 0) {  // no cut yet: read more
          read_more();
          continue;
        }
      }
      Chunk c{buffer_.substr(0, upto), offset_, validation_};
      buffer_.erase(0, upto);
      offset_ += upto;
      if (switch_here) validation_ = true;
      return c;
    }
  }
  bool jsonl() const { return jsonl_; }
  bool has_validation() const { return validation_; }

 private:
  size_t cut(size_t from) const {
    if (!jsonl_) return tokenizer_.cut_at_or_after(buffer_, from);
    // A .jsonl is cut at line starts.
    if (from == 0 || from > buffer_.size()) return from == 0 ? 0 : std::string_view::npos;
    const size_t newline = buffer_.find('\n', from - 1);
    return newline == std::string::npos ? std::string_view::npos : newline + 1;
  }
  void read_more() {
    if (at_end_) return;
    const size_t old = buffer_.size();
    buffer_.resize(old + read_bytes_);
    in_.read(buffer_.data() + old, static_cast<std::streamsize>(read_bytes_));
    buffer_.resize(old + static_cast<size_t>(in_.gcount()));
    GPT_INPUT_CHECK(!in_.bad(), "--input " << o_.input << ": read failed");
    at_end_ = in_.eof();
  }

  const Options& o_;
  uint64_t n_;
  const gpt::TextTokenizer& tokenizer_;
  bool jsonl_;
  size_t read_bytes_;
  uint64_t val_begin_;
  std::ifstream in_;
  std::string buffer_;  // bytes [offset_, offset_ + size) of the input
  uint64_t offset_ = 0;
  bool at_end_ = false, validation_ = false;
};

// The ids of one chunk. Text: one stretch of the document (a BOS-first tokenizer's BOS opens the
// file). .jsonl: each line's document with the document token before or after it.
void encode_chunk(gpt::TextTokenizer& tokenizer, int worker, const Options& o, bool jsonl,
                  const Chunk& c, std::vector<int32_t>& ids) {
  ids.clear();
  const int64_t doc = tokenizer.document_token();
  if (!jsonl) {
    if (c.offset == 0 && doc >= 0 && tokenizer.document_token_first())
      ids.push_back(static_cast<int32_t>(doc));
    tokenizer.encode(worker, c.text, ids, c.offset, c.offset > 0, o.allow_special_tokens);
    return;
  }
  for (size_t begin = 0; begin < c.text.size();) {
    size_t end = c.text.find('\n', begin);
    if (end == std::string::npos) end = c.text.size();
    const std::string line = c.text.substr(begin, end - begin);
    const uint64_t at = c.offset + begin;
    begin = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines
    const gpt::Json document =
        gpt::parse_json_object(line, "the line at byte " + std::to_string(at));
    const auto text = document.find(o.json_key);
    GPT_INPUT_CHECK(
        text != document.end() && text->is_string(),
        "the line at byte " << at << " has no string \"" << o.json_key << "\" (--json-key)");
    if (doc >= 0 && tokenizer.document_token_first()) ids.push_back(static_cast<int32_t>(doc));
    tokenizer.encode(worker, text->get_ref<const std::string&>(), ids, 0, false,
                     o.allow_special_tokens);
    if (doc >= 0 && !tokenizer.document_token_first()) ids.push_back(static_cast<int32_t>(doc));
  }
}

void print_summary(const Options& o, uint64_t n, const gpt::TextTokenizer& tokenizer,
                   const gpt::TokenFileWriter& train, const std::string& train_path,
                   const gpt::TokenFileWriter* val, const std::string& val_path, int threads,
                   double seconds) {
  std::printf("prepare-data: %llu bytes of %s -> %lld train tokens in %s", (unsigned long long)n,
              o.input.c_str(), static_cast<long long>(train.size()), train_path.c_str());
  if (val)
    std::printf(", %lld validation tokens in %s", static_cast<long long>(val->size()),
                val_path.c_str());
  std::printf(" (tokenizer %s, vocab_size %lld; %d threads; %.1f MB/s)\n", tokenizer.name().c_str(),
              static_cast<long long>(tokenizer.vocab_size()), threads,
              n / 1e6 / std::max(seconds, 1e-9));
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
  const int threads = o.threads > 0
                          ? o.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  gpt::TextTokenizer tokenizer(o.tokenizer, {o.vocab, o.merges}, threads);
  create_output_folder(o);
  const std::string folder = fs::path(o.output).parent_path().string();
  // A Hugging Face tokenizer is copied beside the data sets (text_tokenizer.h); a folder holding
  // another one is refused before anything is written.
  if (tokenizer.hf())
    gpt::check_tokenizer_folder(tokenizer.hf()->json_path(), tokenizer.name(), folder,
                                "--output " + o.output);
  ChunkReader reader(o, n, tokenizer, threads);
  const std::string train_path = o.output + ".train.h5", val_path = o.output + ".val.h5";
  const int64_t eot = tokenizer.document_token();
  gpt::TokenFileWriter train(train_path, tokenizer.vocab_size(), tokenizer.name(), eot);
  std::unique_ptr<gpt::TokenFileWriter> val;

  const auto t0 = std::chrono::steady_clock::now();
  uint64_t next_report = 256ull << 20;
  std::vector<Chunk> batch;
  std::vector<std::vector<int32_t>> ids(static_cast<size_t>(threads));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
  while (true) {
    batch.clear();
    while (batch.size() < static_cast<size_t>(threads))
      if (std::optional<Chunk> c = reader.next())
        batch.push_back(std::move(*c));
      else
        break;
    if (batch.empty()) break;
    // One worker per chunk; the ids are written in input order after all have finished.
    auto work = [&](size_t i) {
      try {
        encode_chunk(tokenizer, static_cast<int>(i), o, reader.jsonl(), batch[i], ids[i]);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    };
    std::vector<std::thread> workers;
    for (size_t i = 1; i < batch.size(); ++i) workers.emplace_back(work, i);
    work(0);
    for (std::thread& t : workers) t.join();
    for (size_t i = 0; i < batch.size(); ++i) {
      if (errors[i]) {
        try {
          std::rethrow_exception(errors[i]);
        } catch (const gpt::Error& e) {
          gpt::fail_input(GPT_MSG("--input " << o.input << ": " << e.what()));
        }
      }
      GPT_INPUT_CHECK(
          !batch[i].no_validation_start,
          "--input " << o.input
                     << ": no place to start the validation part at or "
                        "after byte "
                     << validation_start(n, o.val_fraction)
                     << (reader.jsonl() ? " (a line must start there)"
                                        : " (the tokenizer cuts a document only after a "
                                          "line break between two letters or digits; gpt2 between "
                                          "printable characters)"));
      if (batch[i].validation && !val)
        val = std::make_unique<gpt::TokenFileWriter>(val_path, tokenizer.vocab_size(),
                                                     tokenizer.name(), eot);
      (batch[i].validation ? *val : train).append(ids[i].data(), ids[i].size());
    }
    report_progress(batch.back().offset + batch.back().text.size(), n, t0, next_report);
  }
  if (reader.has_validation() && !val)  // validation starts at the very end: an empty part
    val = std::make_unique<gpt::TokenFileWriter>(val_path, tokenizer.vocab_size(), tokenizer.name(),
                                                 eot);
  GPT_INPUT_CHECK(train.size() > 0, "--input " << o.input << ": no tokens for the training part");
  GPT_INPUT_CHECK(!val || val->size() > 0,
                  "--input " << o.input << ": no tokens for the validation part");
  if (tokenizer.hf())
    gpt::place_tokenizer_copy(tokenizer.hf()->json_path(), tokenizer.name(), folder);
  train.finish();
  if (val) val->finish();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  print_summary(o, n, tokenizer, train, train_path, val.get(), val_path, threads, seconds);
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

// --render-only: each conversation of --input through the chat template of --tokenizer (a
// directory, or a file in one), printed as {"text": ...}; a bad line or a template error ends the
// run naming the line.
void render_conversations(const Options& o) {
  std::error_code ec;
  const std::string dir = fs::is_directory(o.tokenizer, ec)
                              ? o.tokenizer
                              : fs::path(o.tokenizer).parent_path().string();
  GPT_INPUT_CHECK(!dir.empty() && fs::is_directory(dir, ec),
                  "--render-only needs --tokenizer naming a Hugging Face tokenizer directory, not "
                      << o.tokenizer);
  const gpt::ChatTemplate chat_template(dir);
  gpt::ConversationReader reader(o.input);
  gpt::Conversation c;
  while (true) {
    std::string text;
    try {
      if (!reader.next(c)) break;
      text = chat_template.render(c.messages, c.tools.is_null() ? nullptr : &c.tools,
                                  o.add_generation_prompt);
    } catch (const gpt::Error& e) {
      const std::string what = e.what();
      // A line's own problem already names it; a template's error gets the line here.
      gpt::fail_input(what.starts_with(o.input) ? what : reader.where() + ": " + what);
    }
    const std::string line = gpt::Json{{"text", text}}.dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), stdout);
  }
  GPT_INPUT_CHECK(std::fflush(stdout) == 0, "writing to stdout failed");
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  const std::string gpt2_dir = std::string(GPT_SOURCE_DIR) + "/third_party/gpt2/";
  po::options_description desc(
      "prepare-data: text file -> training and validation data sets\n"
      "usage: prepare-data --input FILE.txt|FILE.jsonl --output PREFIX\n"
      "       [--tokenizer bytes|gpt2|TOKENIZER.json|HF_DIR] [--val-fraction F] [--threads N]\n"
      "       prepare-data --from-bin FILE.bin... --output DIR [--vocab-size N --tokenizer NAME]\n"
      "       prepare-data --render-only --input CHATS.jsonl --tokenizer HF_DIR "
      "[--add-generation-prompt]\n"
      "writes PREFIX.train.h5 and PREFIX.val.h5 (creating PREFIX's folder)\noptions");
  desc.add_options()("help,h", "show this help and exit")(
      "input", po::value<std::string>(&options.input), "text file to tokenize (required)")(
      "output", po::value<std::string>(&options.output),
      "output prefix: writes PREFIX.train.h5 and PREFIX.val.h5 (required)")(
      "tokenizer", po::value<std::string>(&options.tokenizer)->default_value("bytes"),
      "bytes (token = byte, vocab 256), gpt2 (OpenAI's GPT-2 BPE, vocab 50257), or a Hugging "
      "Face tokenizer.json or a model directory holding one")(
      "threads", po::value<int>(&options.threads)->default_value(0),
      "workers encoding at once (0: one per core); the ids do not depend on it")(
      "format", po::value<std::string>(&options.format)->default_value("auto"),
      "text (the file is one document), jsonl (one JSON object per line, a document each, "
      "the tokenizer's document token between them), or auto: jsonl for a .jsonl file")(
      "json-key", po::value<std::string>(&options.json_key)->default_value("text"),
      "jsonl: the key of each line's text")(
      "allow-special-tokens", po::bool_switch(&options.allow_special_tokens),
      "match special tokens (<|begin_of_text|>, <s>, ...) written in the text; without it they "
      "are encoded as ordinary text")(
      "vocab", po::value<std::string>(&options.vocab)->default_value(gpt2_dir + "encoder.json"),
      "gpt2: the vocabulary (encoder.json or vocab.json)")(
      "merges", po::value<std::string>(&options.merges)->default_value(gpt2_dir + "vocab.bpe"),
      "gpt2: the merges (vocab.bpe or merges.txt)")(
      "val-fraction", po::value<double>(&options.val_fraction)->default_value(0.1, "0.1"),
      "share of the text, taken from its end, held out for validation; in [0, 1), 0 = none "
      "(it starts at the first place after that point where the input may be cut)")(
      "read-mb", po::value<int64_t>(&options.read_mb)->default_value(16),
      "read the input in pieces of this many MB")(
      "from-bin", po::value<std::vector<std::string>>(&options.from_bin)->multitoken(),
      "instead of --input: llm.c .bin shards or nanoGPT's headerless uint16 .bin files, each "
      "written as OUTPUT/<name>.h5 (--output is then a directory)")(
      "vocab-size", po::value<int64_t>(&options.vocab_size)->default_value(0),
      "--from-bin: the tokens' vocabulary (0 = GPT-2's 50257)")(
      "render-only", po::bool_switch(&options.render_only),
      "instead of writing data sets: read conversations ({\"messages\": [...], \"tools\": "
      "[...]} a line of --input) and print each as the --tokenizer directory's chat template "
      "renders it, one {\"text\": ...} line each")(
      "add-generation-prompt", po::bool_switch(&options.add_generation_prompt),
      "--render-only: end each text with the header of the assistant's next turn");
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    po::notify(vm);
    if (options.render_only) {
      GPT_INPUT_CHECK(!vm.count("output") && options.from_bin.empty(),
                      "--render-only prints to stdout: --output and --from-bin do not go with it");
      GPT_INPUT_CHECK(vm.count("input"), "--input CHATS.jsonl is required (see --help)");
      GPT_INPUT_CHECK(!vm["tokenizer"].defaulted(),
                      "--render-only needs --tokenizer naming a Hugging Face tokenizer directory");
      render_conversations(options);
      return 0;
    }
    GPT_INPUT_CHECK(!options.add_generation_prompt,
                    "--add-generation-prompt goes with --render-only");
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
