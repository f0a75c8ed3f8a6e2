// convert: GPT-2 weights in and out (docs/CONVERT.md). --from-hf DIR or --from-llmc FILE, with
// --output FILE, reads a Hugging Face GPT-2 directory (config.json, model.safetensors) or an
// llm.c model file into a checkpoint for `train --init-from`, `eval` and `generate`;
// --checkpoint FILE --to-hf DIR writes a checkpoint's weights as a Hugging Face directory,
// --to-llmc FILE as llm.c's gpt2_124M.bin layout. One process; nothing is written under the
// output name unless the whole conversion succeeds.
#include <boost/program_options.hpp>
#include <filesystem>
#include <functional>

#include "framework/io/checkpoint_directory.h"
#include "framework/io/checkpoint_reader.h"
#include "framework/io/checkpoint_writer.h"
#include "framework/io/gpt2_weights.h"
#include "framework/io/whole_file.h"
#include "framework/logging.h"
#include "framework/user_files.h"
#include "launch/programs/program.h"
#include "launch/runtime/runtime.h"
#include "launch/training/run_config.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace gpt {
namespace {

// The safetensors metadata entry that carries a checkpoint's tokenizer through --to-hf.
constexpr const char* kTokenizerKey = "gpt_train.tokenizer";

struct ConvertOptions {
  std::string from_hf, from_llmc, output, checkpoint, to_hf, to_llmc;
  // GPT-2's tokenizer files, copied into a --to-hf directory for gpt2 checkpoints.
  std::string vocab = std::string(GPT_SOURCE_DIR) + "/third_party/gpt2/encoder.json";
  std::string merges = std::string(GPT_SOURCE_DIR) + "/third_party/gpt2/vocab.bpe";
  bool force = false;
};

// GPT-2's end-of-text token, its BOS and EOS in Hugging Face's config.
constexpr int64_t kGpt2EndOfText = 50256;

// The tokenizer files of a gpt2 checkpoint in the names Hugging Face's GPT2Tokenizer loads
// (vocab.json, merges.txt, tokenizer_config.json). The byte-level `bytes` tokenizer has no
// Hugging Face counterpart: nothing is written for it, and the log says so.
void write_hf_tokenizer(const ConvertOptions& o, const fs::path& dir, const std::string& tokenizer,
                        const ModelConfig& model) {
  if (tokenizer != "gpt2") {
    GPT_LOG0("the checkpoint's tokenizer '"
             << tokenizer << "' has no Hugging Face tokenizer "
             << "files; none written (token i of 'bytes' is byte i)");
    return;
  }
  for (const auto& [source, option] : {std::pair{o.vocab, "--vocab"}, {o.merges, "--merges"}}) {
    std::error_code ec;
    GPT_INPUT_CHECK(fs::is_regular_file(source, ec),
                    option << " " << source << ": no such file (GPT-2's tokenizer files: "
                           << "scripts/fetch_gpt2_tokenizer.sh, or give --vocab and --merges)");
  }
  std::error_code ec;
  fs::copy_file(o.vocab, dir / "vocab.json", fs::copy_options::overwrite_existing, ec);
  GPT_INPUT_CHECK(!ec, "cannot write " << (dir / "vocab.json").string() << ": " << ec.message());
  fs::copy_file(o.merges, dir / "merges.txt", fs::copy_options::overwrite_existing, ec);
  GPT_INPUT_CHECK(!ec, "cannot write " << (dir / "merges.txt").string() << ": " << ec.message());
  const Json config = {{"tokenizer_class", "GPT2Tokenizer"},
                       {"bos_token", "<|endoftext|>"},
                       {"eos_token", "<|endoftext|>"},
                       {"unk_token", "<|endoftext|>"},
                       {"model_max_length", model.seq_len}};
  write_file_atomically((dir / "tokenizer_config.json").string(),
                        [&](std::ostream& out) { out << config.dump(2) << "\n"; }, false);
}

Json read_json_file(const fs::path& path) {
  require_regular_file(path.string(), "--from-hf");
  const std::optional<std::string> text = read_whole_file(path.string());
  GPT_INPUT_CHECK(text.has_value(), path.string() << ": cannot open the file");
  return parse_json_object(*text, path.string());
}

// The checkpoint as `train --steps 0` would write it, at `output`: written by write_checkpoint
// into a folder beside it, then moved.
void write_weights_checkpoint(Runtime& rt, const std::string& tokenizer,
                              const std::string& output) {
  TrainOptions defaults;
  defaults.model = rt.model();
  CheckpointMeta meta;
  meta.config_json = run_config_json(defaults, rt.model());
  meta.tokenizer = tokenizer;
  meta.layout = rt.layout();
  const std::string folder = output + ".convert-tmp";
  std::error_code ec;
  fs::remove_all(folder, ec);
  const std::string written = write_checkpoint(
      folder, meta, nullptr, rt.store(), [](const Parameter& p) { return !p.tied_copy; },
      MPI_COMM_WORLD, 0);
  fs::rename(written, output, ec);
  GPT_INPUT_CHECK(!ec, "cannot move " << written << " to " << output << ": " << ec.message());
  fs::remove_all(folder, ec);
}

// Fills a one-rank model's parameters from tensors (every one the model has, in its shape; the
// importers check that) and writes the checkpoint.
void write_imported(
    const ModelConfig& model, const std::string& source, const std::string& output,
    const std::string& tokenizer,
    const std::function<NamedTensors(const std::map<std::string, std::vector<int64_t>>&)>& read) {
  RuntimeOptions ro;
  ro.execution.device = DeviceKind::kCpu;
  Runtime rt(MPI_COMM_WORLD, model, ro);
  std::map<std::string, std::vector<int64_t>> expected;
  for (const Parameter& p : rt.store().params())
    if (!p.tied_copy) expected[p.name] = p.shape;
  const NamedTensors tensors = read(expected);
  for (Parameter& p : rt.store().params()) {
    const HostTensor& t = tensors.at(p.name);
    GPT_CHECK(t.shape == p.shape, "imported tensor " << p.name << " has another shape");
    rt.store().set_values(p, [&](int64_t i) { return t.values[static_cast<size_t>(i)]; });
  }
  write_weights_checkpoint(rt, tokenizer, output);
  GPT_LOG0("wrote " << output << ": " << model.num_parameters(true) << " parameters ("
                    << model.n_layer << " layers, d_model " << model.d_model << ", vocab "
                    << model.vocab_size << ", " << model.seq_len << " positions) from " << source);
}

void from_hf(const ConvertOptions& o) {
  const fs::path dir(o.from_hf);
  const std::string config_path = (dir / "config.json").string();
  const ModelConfig model = model_from_hf_config(read_json_file(dir / "config.json"), config_path);
  require_regular_file((dir / "model.safetensors").string(), "--from-hf");
  const SafetensorsFile file((dir / "model.safetensors").string());
  check_hf_model_size(file, model, config_path);
  // A directory --to-hf wrote names its tokenizer; any other holds OpenAI's GPT-2 vocabulary.
  const std::string tokenizer = file.metadata(kTokenizerKey);
  write_imported(model, dir.string(), o.output, tokenizer.empty() ? "gpt2" : tokenizer,
                 [&](const auto& expected) { return read_hf_tensors(file, expected); });
}

// llm.c's files hold GPT-2's vocabulary (its tokenizer is OpenAI's).
void from_llmc(const ConvertOptions& o) {
  require_regular_file(o.from_llmc, "--from-llmc");
  LlmcWeights w = read_llmc(o.from_llmc);
  write_imported(w.model, o.from_llmc, o.output, "gpt2",
                 [&](const auto&) { return std::move(w.tensors); });
}

// Every /model tensor of a checkpoint, whole.
NamedTensors read_checkpoint_tensors(const CheckpointReader& reader) {
  NamedTensors out;
  const std::string prefix = "/model/";
  for (const std::string& dataset : reader.datasets()) {
    if (!dataset.starts_with(prefix)) continue;
    HostTensor t;
    t.shape = reader.shape(dataset);
    Slab whole{std::vector<int64_t>(t.shape.size(), 0), t.shape, 0};
    t.values.resize(static_cast<size_t>(whole.numel()));
    reader.read_slab(dataset, whole, t.values.data());
    out[dataset.substr(prefix.size())] = std::move(t);
  }
  return out;
}

void from_checkpoint(const ConvertOptions& o) {
  const std::string path = resolve_checkpoint_argument(o.checkpoint, MPI_COMM_WORLD);
  require_regular_file(path, "--checkpoint");
  const std::unique_ptr<CheckpointReader> reader = open_checkpoint(path, MPI_COMM_WORLD);
  const std::string what = path + ": config";
  const ModelConfig model =
      model_config_from_json(parse_json_object(reader->meta().config_json, what), what);
  reader->check_holds_model(model);
  const NamedTensors tensors = read_checkpoint_tensors(*reader);
  if (!o.to_llmc.empty()) {
    write_llmc(o.to_llmc, tensors, model);
    GPT_LOG0("wrote " << o.to_llmc << " (llm.c version 3, float32)");
    return;
  }
  const fs::path dir(o.to_hf);
  std::error_code ec;
  GPT_INPUT_CHECK(
      o.force || !fs::exists(dir, ec) || (fs::is_directory(dir, ec) && fs::is_empty(dir, ec)),
      "--to-hf " << o.to_hf << " exists and is not an empty directory: choose another "
                 << "or add --force to write over it");
  fs::create_directories(dir, ec);
  GPT_INPUT_CHECK(fs::is_directory(dir), "--to-hf " << o.to_hf << ": cannot create the directory");
  write_safetensors((dir / "model.safetensors").string(), to_hf_tensors(tensors),
                    {{"format", "pt"}, {kTokenizerKey, reader->meta().tokenizer}});
  const std::string tokenizer = reader->meta().tokenizer;
  Json config = hf_gpt2_config(model);
  if (tokenizer == "gpt2" && kGpt2EndOfText < model.vocab_size) {
    config["bos_token_id"] = kGpt2EndOfText;
    config["eos_token_id"] = kGpt2EndOfText;
  }
  write_file_atomically((dir / "config.json").string(),
                        [&](std::ostream& out) { out << config.dump(2) << "\n"; }, false);
  write_hf_tokenizer(o, dir, tokenizer, model);
  GPT_LOG0(
      "wrote " << dir.string() << " (config.json, model.safetensors"
               << (tokenizer == "gpt2" ? ", vocab.json, merges.txt, tokenizer_config.json" : "")
               << "; tokenizer of the checkpoint: " << tokenizer << ")");
}

void check_convert_options(const ConvertOptions& o) {
  GPT_INPUT_CHECK(
      comm_size(MPI_COMM_WORLD) == 1,
      "convert runs as one process, not under mpiexec -n " << comm_size(MPI_COMM_WORLD));
  const int sources = !o.from_hf.empty() + !o.from_llmc.empty() + !o.checkpoint.empty();
  GPT_INPUT_CHECK(sources == 1,
                  "give one of --from-hf DIR and --from-llmc FILE (with --output FILE), or "
                  "--checkpoint FILE with --to-hf DIR or --to-llmc FILE");
  const bool exporting = !o.checkpoint.empty();
  GPT_INPUT_CHECK(exporting || !o.output.empty(), "--from-hf and --from-llmc need --output FILE");
  GPT_INPUT_CHECK(!exporting || o.to_hf.empty() != o.to_llmc.empty(),
                  "--checkpoint needs one of --to-hf DIR and --to-llmc FILE");
}

int convert_main(int argc, char** argv) {
  ConvertOptions o;
  po::options_description desc;
  auto add = desc.add_options();
  add("from-hf", po::value(&o.from_hf)->default_value(""),
      "a Hugging Face GPT-2 directory (config.json, model.safetensors) to import");
  add("from-llmc", po::value(&o.from_llmc)->default_value(""),
      "an llm.c model file (gpt2_124M.bin layout, version 3) to import");
  add("output", po::value(&o.output)->default_value(""),
      "the checkpoint --from-hf or --from-llmc writes");
  add("checkpoint", po::value(&o.checkpoint)->default_value(""),
      "a checkpoint to export: a file, or a checkpoint folder (its newest valid file)");
  add("to-hf", po::value(&o.to_hf)->default_value(""),
      "write the checkpoint's weights as a Hugging Face GPT-2 directory");
  add("force", po::bool_switch(&o.force), "--to-hf: write into a directory that is not empty");
  add("vocab", po::value(&o.vocab)->default_value(o.vocab),
      "--to-hf of a gpt2 checkpoint: GPT-2's encoder.json, copied as vocab.json");
  add("merges", po::value(&o.merges)->default_value(o.merges),
      "--to-hf of a gpt2 checkpoint: GPT-2's vocab.bpe, copied as merges.txt");
  add("to-llmc", po::value(&o.to_llmc)->default_value(""),
      "write the checkpoint's weights as llm.c's gpt2_124M.bin (version 3)");
  if (!parse_options(MPI_COMM_WORLD, argc, argv, "convert: GPT-2 weights in and out", desc, nullptr,
                     [&] { check_convert_options(o); }))
    return 0;
  agree_on_failure(MPI_COMM_WORLD, [&] {
    if (!o.from_hf.empty()) {
      from_hf(o);
    } else if (!o.from_llmc.empty()) {
      from_llmc(o);
    } else {
      from_checkpoint(o);
    }
  });
  return 0;
}

}  // namespace
}  // namespace gpt

int main(int argc, char** argv) {
  return gpt::run_program(argc, argv, gpt::convert_main);
}
