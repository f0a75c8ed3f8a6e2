// convert: weights in and out (docs/CONVERT.md). --from-hf DIR or --from-llmc FILE, with
// --output FILE, reads a Hugging Face directory (GPT-2, or the Llama family: config.json and
// model.safetensors or its shards) or an llm.c model file into a checkpoint for
// `train --init-from`, `eval` and `generate`; --checkpoint FILE --to-hf DIR writes a
// checkpoint's weights as a Hugging Face directory, --to-llmc FILE (GPT-2) as llm.c's
// gpt2_124M.bin layout. One process; nothing is written under the output name unless the whole
// conversion succeeds.
#include <algorithm>
#include <boost/program_options.hpp>
#include <filesystem>
#include <functional>

#include "framework/families/model_family.h"
#include "framework/io/checkpoint_directory.h"
#include "framework/io/checkpoint_reader.h"
#include "framework/io/checkpoint_writer.h"
#include "framework/io/hf_extras.h"
#include "framework/io/hf_model.h"
#include "framework/io/hf_weight_files.h"
#include "framework/io/llmc_weights.h"
#include "framework/io/whole_file.h"
#include "framework/logging.h"
#include "framework/text/text_tokenizer.h"
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
  int64_t seq_len = 0;  // --from-hf of the Llama family: 0 = from config.json
  std::string dtype = "f32";
  int64_t max_shard_bytes = kHfDefaultShardBytes;
};

// GPT-2's end-of-text token, its BOS and EOS in Hugging Face's config.
constexpr int64_t kGpt2EndOfText = 50256;

// The tokenizer files of a gpt2 checkpoint in the names Hugging Face's GPT2Tokenizer loads
// (vocab.json, merges.txt, tokenizer_config.json). The byte-level `bytes` tokenizer has no
// Hugging Face counterpart: nothing is written for it, and the log says so.
void write_hf_tokenizer(const ConvertOptions& o, const fs::path& dir, const std::string& tokenizer,
                        const ModelConfig& model) {
  if (tokenizer.rfind("hf-sha256:", 0) == 0) {
    // The copy beside the checkpoint (text_tokenizer.h) goes into the directory as it came.
    const std::string json = tokenizer_copy_in(tokenizer_folder_of(o.checkpoint), tokenizer);
    if (json.empty())
      GPT_LOG0("the checkpoint's tokenizer " << tokenizer << " has no copy beside it; no "
                                             << "tokenizer.json written");
    else
      place_tokenizer_copy(json, tokenizer, dir.string());
    return;
  }
  if (tokenizer != "gpt2") {
    GPT_LOG0("the checkpoint's tokenizer '"
             << tokenizer << "' has no Hugging Face tokenizer files here; none written "
             << (tokenizer == "bytes" ? "(token i of 'bytes' is byte i)"
                                      : "(the imported directory's own files fit it)"));
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

// The checkpoint as `train --steps 0` would write it, at `output`: written by write_checkpoint
// into a folder beside it, then moved; each parameter's values from `values` as its turn comes.
void write_weights_checkpoint(Runtime& rt, const ModelConfig& model, const std::string& tokenizer,
                              const std::string& output, const ValueSource& values,
                              const Json& hf_extras) {
  TrainOptions defaults;
  defaults.model = model;
  defaults.hf_extras = hf_extras.empty() ? "" : hf_extras.dump();
  CheckpointMeta meta;
  meta.config_json = run_config_json(defaults, model);
  meta.tokenizer = tokenizer;
  meta.layout = rt.layout();
  const std::string folder = output + ".convert-tmp";
  std::error_code ec;
  fs::remove_all(folder, ec);
  std::string written;
  try {  // a tensor refused while it is written (not finite) leaves no folder behind either
    written = write_checkpoint(
        folder, meta, nullptr, rt.store(), [](const Parameter& p) { return !p.tied_copy; },
        MPI_COMM_WORLD, 0, nullptr, &values);
  } catch (...) {
    fs::remove_all(folder, ec);
    throw;
  }
  fs::rename(written, output, ec);
  GPT_INPUT_CHECK(!ec, "cannot move " << written << " to " << output << ": " << ec.message());
  fs::remove_all(folder, ec);
}

// p's local storage from its full logical tensor t: the slabs' elements (one rank holds whole
// tensors, so each slab is a contiguous run of t, copied as one), zeros elsewhere (padding).
std::vector<float> local_storage(const Parameter& p, const HostTensor& t) {
  std::vector<float> local(static_cast<size_t>(p.local_numel), 0.0f);
  for (const Slab& slab : p.slabs) {
    bool whole_rows = true;  // the slab spans every dimension but the first
    for (size_t d = 1; d < p.shape.size(); ++d)
      whole_rows &= slab.start[d] == 0 && slab.count[d] == p.shape[d];
    if (whole_rows) {
      int64_t row = 1;
      for (size_t d = 1; d < p.shape.size(); ++d) row *= p.shape[d];
      std::copy_n(t.values.begin() + slab.start[0] * row, slab.numel(),
                  local.begin() + slab.local_offset);
      continue;
    }
    const std::vector<int64_t> logical = slab_logical_indices(slab, p.shape);
    for (size_t k = 0; k < logical.size(); ++k)
      local[static_cast<size_t>(slab.local_offset) + k] = t.values[static_cast<size_t>(logical[k])];
  }
  return local;
}

// Writes a one-rank model's checkpoint from weights elsewhere. `check` sees every tensor the
// model has before anything is read (the importers check names and shapes there); `tensor` then
// gives each one, in its shape, as the writer reaches it: the model's parameters are registered
// but never allocated, so a tensor and its local copy are all that is held at a time.
void write_imported(const ModelConfig& model, const std::string& source, const std::string& output,
                    const std::string& tokenizer,
                    const std::function<void(const ExpectedTensors&)>& check,
                    const std::function<HostTensor(const std::string&)>& tensor,
                    const Json& hf_extras = Json::object()) {
  // Token b of `bytes` is byte b: a model without a row for each of the 256 bytes would read past
  // its embedding on the first byte it lacks.
  GPT_INPUT_CHECK(tokenizer != "bytes" || model.vocab_size >= 256,
                  source << " records the tokenizer bytes (token b is byte b: 256 tokens) but its "
                            "model has "
                         << model.vocab_size << " embedding rows (vocab_size); nothing written");
  RuntimeOptions ro;
  ro.execution.device = DeviceKind::kCpu;
  ro.allocate_parameters = false;
  // Nothing runs forward here: the layers' buffers are sized for one sequence, and for the
  // Llama family (no learned positions, so no parameter depends on it) of one token, so that
  // a long context costs no activation memory.
  ro.layout.micro_batch = 1;
  ModelConfig allocated = model;
  if (!describe(model).learned_positions()) allocated.seq_len = 1;
  Runtime rt(MPI_COMM_WORLD, allocated, ro);
  ExpectedTensors expected;
  for (const Parameter& p : rt.store().params())
    if (!p.tied_copy) expected[p.name] = p.shape;
  check(expected);
  const ValueSource values = [&](const Parameter& p) {
    const HostTensor t = tensor(p.name);
    GPT_CHECK(t.shape == p.shape, "imported tensor " << p.name << " has another shape");
    return local_storage(p, t);
  };
  write_weights_checkpoint(rt, model, tokenizer, output, values, hf_extras);
  GPT_LOG0("wrote " << output << ": " << model.num_parameters(true) << " parameters ("
                    << arch_name(model.arch) << ", " << model.n_layer << " layers, d_model "
                    << model.d_model << ", vocab " << model.vocab_size << ", " << model.seq_len
                    << " positions) from " << source);
}

// Any family's directory, streamed from the (possibly sharded) safetensors tensor by tensor.
void from_hf(const ConvertOptions& o) {
  const fs::path dir(o.from_hf);
  const std::string config_path = (dir / "config.json").string();
  const Json config = read_hf_json(config_path, "--from-hf");
  const HfModel hf = read_hf_config(config, config_path, o.seq_len);
  const ModelConfig& model = hf.model;
  const HfModelWeights weights(dir.string(), hf, config_path);
  // The checkpoint's tokenizer: the one --to-hf recorded in the files; for a family whose
  // directories carry their own, the directory's tokenizer.json, copied beside the checkpoint
  // (text_tokenizer.h); else the family's (GPT-2's vocabulary, or "hf:<type>" for ids made
  // elsewhere).
  std::string tokenizer = weights.metadata(kTokenizerKey);
  std::unique_ptr<HfTokenizer> hf_tokenizer;
  std::error_code ec;
  if (hf.family->hf->reads_tokenizer_json && fs::exists(dir / "tokenizer.json", ec)) {
    hf_tokenizer = std::make_unique<HfTokenizer>(dir.string());
    GPT_INPUT_CHECK(hf_tokenizer->vocab_size() <= model.vocab_size,
                    hf_tokenizer->json_path()
                        << " has " << hf_tokenizer->vocab_size() << " tokens, more than vocab_size "
                        << model.vocab_size << " of " << config_path);
    tokenizer = hf_tokenizer->identity();
    check_tokenizer_folder(hf_tokenizer->json_path(), tokenizer,
                           fs::path(o.output).parent_path().string(), "--output " + o.output);
  }
  write_imported(
      model, dir.string(), o.output,
      tokenizer.empty() ? hf.family->hf->default_tokenizer(hf.model_type) : tokenizer,
      [&](const ExpectedTensors& expected) { weights.check(expected); },
      [&](const std::string& name) { return weights.read(name); },
      read_hf_extras(config, config_path, dir.string()));
  if (hf_tokenizer)
    place_tokenizer_copy(hf_tokenizer->json_path(), hf_tokenizer->identity(),
                         fs::path(o.output).parent_path().string());
}

// llm.c's files hold GPT-2's vocabulary (its tokenizer is OpenAI's).
void from_llmc(const ConvertOptions& o) {
  require_regular_file(o.from_llmc, "--from-llmc");
  LlmcWeights w = read_llmc(o.from_llmc);
  write_imported(
      w.model, o.from_llmc, o.output, "gpt2", [](const ExpectedTensors&) {},
      [&](const std::string& name) { return w.tensors.at(name); });
}

// Every /model tensor of a checkpoint, whole.
NamedTensors read_checkpoint_tensors(const CheckpointReader& reader) {
  NamedTensors out;
  for (const std::string& name : reader.parameter_names()) {
    const std::string dataset = std::string(kModelDatasetPrefix) + name;
    out[name] = {reader.shape(dataset), reader.read_dataset(dataset)};
  }
  return out;
}

// The --to-hf directory, new or empty unless --force.
// --to-hf's files are written into a fresh folder beside the destination, "<dir>.convert-tmp",
// which replaces the destination only once complete: an export that fails partway leaves the
// destination as it was (with --force, the old export whole), and no file of an older export
// stays among the new ones.
fs::path prepare_hf_directory(const ConvertOptions& o) {
  const fs::path dir(o.to_hf);
  std::error_code ec;
  GPT_INPUT_CHECK(
      o.force || !fs::exists(dir, ec) || (fs::is_directory(dir, ec) && fs::is_empty(dir, ec)),
      "--to-hf " << o.to_hf << " exists and is not an empty directory: choose another "
                 << "or add --force to write over it");
  GPT_INPUT_CHECK(!fs::exists(dir, ec) || fs::is_directory(dir, ec),
                  "--to-hf " << o.to_hf << " is a file, not a directory");
  const fs::path work = dir.string() + ".convert-tmp";
  fs::remove_all(work, ec);
  fs::create_directories(work, ec);
  GPT_INPUT_CHECK(fs::is_directory(work, ec),
                  "--to-hf " << o.to_hf << ": cannot create " << work.string());
  return work;
}

// Moves the complete export in `work` to the destination, the old one (--force) aside first.
void publish_hf_directory(const ConvertOptions& o, const fs::path& work) {
  const fs::path dir(o.to_hf), old = dir.string() + ".convert-old";
  std::error_code ec;
  fs::remove_all(old, ec);
  if (fs::exists(dir, ec)) fs::rename(dir, old, ec);
  GPT_INPUT_CHECK(
      !ec, "--to-hf " << o.to_hf << ": cannot move the old directory aside: " << ec.message());
  fs::rename(work, dir, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::rename(old, dir, ec);  // put the old one back
    fail_input(GPT_MSG("--to-hf " << o.to_hf << ": cannot move " << work.string()
                                  << " into place: " << why));
  }
  fs::remove_all(old, ec);
}

// --to-hf's files, into `dir`.
void export_hf_files(const ConvertOptions& o, const CheckpointReader& reader,
                     const ModelConfig& model, Json& config, const Json& hf_extras,
                     StoredDtype dtype, const fs::path& dir) {
  const std::string tokenizer = reader.meta().tokenizer;
  const std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                       {kTokenizerKey, tokenizer}};
  const std::vector<std::string> written =
      write_hf_model_weights(dir.string(), reader, model, metadata, dtype, o.max_shard_bytes);
  if (tokenizer == "gpt2" && kGpt2EndOfText < model.vocab_size) {
    config["bos_token_id"] = kGpt2EndOfText;
    config["eos_token_id"] = kGpt2EndOfText;
  }
  const std::optional<Json> generation = apply_hf_extras(hf_extras, model, config);
  write_file_atomically((dir / "config.json").string(),
                        [&](std::ostream& out) { out << config.dump(2) << "\n"; }, false);
  std::string files = "config.json";
  if (generation) {
    write_file_atomically((dir / kHfGenerationConfigFile).string(),
                          [&](std::ostream& out) { out << generation->dump(2) << "\n"; }, false);
    files += std::string(", ") + kHfGenerationConfigFile;
  }
  write_hf_tokenizer(o, dir, tokenizer, model);
  for (const std::string& name : written) files += ", " + name;
  GPT_LOG0(
      "wrote " << o.to_hf << " (" << files
               << (tokenizer == "gpt2" ? ", vocab.json, merges.txt, tokenizer_config.json" : "")
               << "; " << safetensors_dtype_name(dtype)
               << "; tokenizer of the checkpoint: " << tokenizer << ")");
}

void from_checkpoint(const ConvertOptions& o) {
  const std::string path = resolve_checkpoint_argument(o.checkpoint, MPI_COMM_WORLD);
  require_regular_file(path, "--checkpoint");
  const std::unique_ptr<CheckpointReader> reader = open_checkpoint(path, MPI_COMM_WORLD);
  const std::string what = path + ": config";
  const Json stored = parse_json_object(reader->meta().config_json, what);
  const ModelConfig model = model_config_from_json(stored, what);
  reader->check_holds_model(model);
  if (!o.to_llmc.empty()) {
    GPT_INPUT_CHECK(model.arch == Arch::kGpt2, "--to-llmc: llm.c's file holds a GPT-2, and "
                                                   << path << " holds a " << arch_name(model.arch)
                                                   << " model (--to-hf writes it)");
    write_llmc(o.to_llmc, read_checkpoint_tensors(*reader), model);
    GPT_LOG0("wrote " << o.to_llmc << " (llm.c version 3, float32)");
    return;
  }
  const StoredDtype dtype = parse_stored_dtype(o.dtype, "--dtype");
  const std::string torch_dtype = dtype == StoredDtype::kBF16 ? "bfloat16" : "float32";
  // The config first: a model with no Hugging Face architecture is refused before any file.
  Json config = family_of(model).hf->write_config(model, torch_dtype);
  const fs::path dir = prepare_hf_directory(o);  // the work folder, published at the end
  try {
    export_hf_files(o, *reader, model, config, hf_extras_from_checkpoint(stored, what), dtype, dir);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    throw;
  }
  publish_hf_directory(o, dir);
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
  GPT_INPUT_CHECK(o.seq_len >= 0 && o.seq_len <= kMaxSeqLen,
                  "--seq-len must be in [1, " << kMaxSeqLen << "] (got " << o.seq_len << ")");
  GPT_INPUT_CHECK(o.seq_len == 0 || !o.from_hf.empty(), "--seq-len is for --from-hf");
  parse_stored_dtype(o.dtype, "--dtype");
  GPT_INPUT_CHECK(o.max_shard_bytes >= 1,
                  "--max-shard-size must be at least 1 byte (got " << o.max_shard_bytes << ")");
}

int convert_main(int argc, char** argv) {
  ConvertOptions o;
  po::options_description desc;
  auto add = desc.add_options();
  add("from-hf", po::value(&o.from_hf)->default_value(""),
      "a Hugging Face directory to import: GPT-2, Llama, Mistral, Qwen2 or Qwen3 (config.json, "
      "model.safetensors or model.safetensors.index.json and its shards)");
  add("from-llmc", po::value(&o.from_llmc)->default_value(""),
      "an llm.c model file (gpt2_124M.bin layout, version 3) to import");
  add("output", po::value(&o.output)->default_value(""),
      "the checkpoint --from-hf or --from-llmc writes");
  add("checkpoint", po::value(&o.checkpoint)->default_value(""),
      "a checkpoint to export: a file, or a checkpoint folder (its newest valid file)");
  add("to-hf", po::value(&o.to_hf)->default_value(""),
      "write the checkpoint's weights as a Hugging Face directory (GPT2LMHeadModel, "
      "LlamaForCausalLM, Qwen2ForCausalLM or Qwen3ForCausalLM)");
  add("seq-len", po::value(&o.seq_len)->default_value(0),
      "--from-hf of the Llama family: the checkpoint's sequence length (0 = config.json's "
      "max_position_embeddings, at most 4096)");
  add("dtype", po::value(&o.dtype)->default_value(o.dtype),
      "--to-hf: the safetensors' element type, f32 or bf16 (rounded to nearest even)");
  add("max-shard-size", po::value(&o.max_shard_bytes)->default_value(o.max_shard_bytes),
      "--to-hf: bytes per safetensors file; above it, shards and model.safetensors.index.json");
  add("force", po::bool_switch(&o.force), "--to-hf: write into a directory that is not empty");
  add("vocab", po::value(&o.vocab)->default_value(o.vocab),
      "--to-hf of a gpt2 checkpoint: GPT-2's encoder.json, copied as vocab.json");
  add("merges", po::value(&o.merges)->default_value(o.merges),
      "--to-hf of a gpt2 checkpoint: GPT-2's vocab.bpe, copied as merges.txt");
  add("to-llmc", po::value(&o.to_llmc)->default_value(""),
      "write the checkpoint's weights as llm.c's gpt2_124M.bin (version 3)");
  if (!parse_options(MPI_COMM_WORLD, argc, argv, "convert: weights in and out", desc, nullptr,
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
