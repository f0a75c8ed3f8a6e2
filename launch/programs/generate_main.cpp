// generate: sample text from a checkpoint (docs/DESIGN.md "Programs"). The prompt is tokenized by
// the checkpoint's tokenizer (bytes, gpt2 with the files --vocab and --merges name, or a Hugging
// Face tokenizer.json: the copy in the checkpoint's folder, or --tokenizer PATH); each new
// token comes from the logits that follow the sequence (launch/inference/next_token.h: the prompt
// prefilled once into a KV cache, then one row per token; --no-kv-cache re-runs the window of the
// most recent seq_len tokens instead), gathered over tp ranks, sampled on the last stage with the
// counter RNG's draw and broadcast so every rank extends the same sequence.
#include <boost/program_options.hpp>
#include <iostream>
#include <memory>
#include <sstream>
#include <vector>

#include "framework/io/whole_file.h"
#include "framework/logging.h"
#include "framework/rng.h"
#include "framework/text/text_tokenizer.h"
#include "framework/user_files.h"
#include "launch/inference/checkpoint_model.h"
#include "launch/inference/next_token.h"
#include "launch/inference/prompt_text.h"
#include "launch/inference/sampling.h"
#include "launch/inference/stop_tokens.h"
#include "launch/programs/program.h"
#include "launch/runtime/run_options.h"

namespace po = boost::program_options;

namespace gpt {
namespace {

struct GenerateOptions {
  std::string checkpoint, prompt, prompt_file, prompt_tokens;
  std::string vocab = std::string(GPT_SOURCE_DIR) + "/third_party/gpt2/encoder.json";
  std::string merges = std::string(GPT_SOURCE_DIR) + "/third_party/gpt2/vocab.bpe";
  std::string tokenizer;  // a tokenizer.json (or its directory) for hf-sha256 checkpoints
  int64_t max_new_tokens = 32, num_samples = 1, seq_len = 0;
  SamplingOptions sampling;
  uint64_t seed = 1;
  Layout layout;  // --pp (and --precision); every rank is a tp rank of one of the stages
  std::string pipeline_layers = "even";
  bool stop_at_newline = false;
  bool ignore_eos = false;
  bool allow_special_tokens = false;
  bool no_kv_cache = false;
  ExecutionOptions execution;
};

po::options_description generate_options(GenerateOptions& o) {
  po::options_description desc;
  auto add = desc.add_options();
  add("checkpoint", po::value(&o.checkpoint)->default_value(""),
      "checkpoint file (.h5), or a checkpoint folder (its newest valid file)");
  add("prompt", po::value(&o.prompt)->default_value(""), "text to continue");
  add("prompt-file", po::value(&o.prompt_file)->default_value(""),
      "read the text to continue from FILE");
  add("prompt-tokens", po::value(&o.prompt_tokens)->default_value(""),
      "the prompt as token ids, comma-separated (e.g. 50256,464)");
  add("seq-len", po::value(&o.seq_len)->default_value(0),
      "the window the model attends over; 0 = the checkpoint's (GPT-2: at most it; Llama "
      "family: any)");
  add("num-samples", po::value(&o.num_samples)->default_value(o.num_samples),
      "independent continuations of the prompt");
  add("max-new-tokens", po::value(&o.max_new_tokens)->default_value(o.max_new_tokens),
      "tokens to generate");
  add("temperature", po::value(&o.sampling.temperature)->default_value(o.sampling.temperature),
      "softmax temperature; 0 = greedy");
  add("top-k", po::value(&o.sampling.top_k)->default_value(o.sampling.top_k),
      "sample among the k likeliest (0 = all)");
  add("top-p", po::value(&o.sampling.top_p)->default_value(o.sampling.top_p),
      "sample among the likeliest tokens whose probabilities add up to p (1 = all)");
  add("seed", po::value(&o.seed)->default_value(o.seed), "sampling seed");
  add("stop-at-newline", po::bool_switch(&o.stop_at_newline), "stop after a newline token");
  add("ignore-eos", po::bool_switch(&o.ignore_eos),
      "go on past the end-of-sequence and end-of-turn tokens (the tokenizer's eos_token, "
      "<|endoftext|>, the imported generation_config's eos_token_id), which otherwise end the "
      "continuation");
  add("vocab", po::value(&o.vocab)->default_value(o.vocab), "gpt2 checkpoints: the vocabulary");
  add("merges", po::value(&o.merges)->default_value(o.merges), "gpt2 checkpoints: the merges");
  add("allow-special-tokens", po::bool_switch(&o.allow_special_tokens),
      "Hugging Face tokenizers: match special tokens written in the prompt (<|im_start|>, ...)");
  add("tokenizer", po::value(&o.tokenizer)->default_value(""),
      "checkpoints of a Hugging Face tokenizer: its tokenizer.json or directory (default: the "
      "copy in the checkpoint's folder; its SHA-256 must be the one the checkpoint records)");
  add("pp", po::value(&o.layout.pp)->default_value(o.layout.pp),
      "pipeline stages; the ranks / pp are tp ranks");
  add("pipeline-layers", po::value(&o.pipeline_layers)->default_value(o.pipeline_layers),
      kPipelineLayersHelp);
  add("no-kv-cache", po::bool_switch(&o.no_kv_cache),
      "re-run the whole window for every token instead of decoding over cached keys and values "
      "(same tokens; for checking and benchmarks)");
  add_execution_options(desc, o.execution, o.layout.precision);
  return desc;
}

void check_generate_options(const GenerateOptions& o, int world_size) {
  validate_execution_options(o.execution);
  GPT_INPUT_CHECK(!o.checkpoint.empty(), "--checkpoint is required");
  GPT_INPUT_CHECK(o.max_new_tokens >= 0, "--max-new-tokens must be at least 0");
  GPT_INPUT_CHECK(o.seq_len >= 0, "--seq-len must be at least 0");
  GPT_INPUT_CHECK(o.sampling.temperature >= 0.0, "--temperature must be at least 0");
  GPT_INPUT_CHECK(o.sampling.top_k >= 0, "--top-k must be at least 0");
  GPT_INPUT_CHECK(o.sampling.top_p > 0.0 && o.sampling.top_p <= 1.0, "--top-p must be in (0, 1]");
  GPT_INPUT_CHECK(o.num_samples >= 1, "--num-samples must be at least 1");
  const int prompts = !o.prompt.empty() + !o.prompt_file.empty() + !o.prompt_tokens.empty();
  GPT_INPUT_CHECK(prompts <= 1, "give one of --prompt, --prompt-file and --prompt-tokens");
  GPT_INPUT_CHECK(o.layout.pp >= 1 && world_size % o.layout.pp == 0,
                  "--pp " << o.layout.pp << " does not divide the " << world_size << " ranks");
}

std::string read_prompt_file(const std::string& path) {
  require_regular_file(path, "--prompt-file");
  const std::optional<std::string> text = read_whole_file(path);
  GPT_INPUT_CHECK(text.has_value(), "--prompt-file " << path << ": cannot open the file");
  return *text;
}

// "50256,464" -> ids, each in [0, vocab_size).
std::vector<int32_t> parse_token_ids(const std::string& list, int64_t vocab_size) {
  std::vector<int32_t> ids;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    GPT_INPUT_CHECK(used == item.size() && !item.empty(),
                    "--prompt-tokens: '" << item << "' is not a token id");
    GPT_INPUT_CHECK(id >= 0 && id < vocab_size, "--prompt-tokens: token "
                                                    << id << " is not in [0, vocab_size "
                                                    << vocab_size << ")");
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// Continues `sequence` by up to max_new_tokens tokens, each from the logits `model` gives;
// returns the new tokens (the same on every rank). Sample s draws token i with the counter RNG's
// number (s << 32) + i, so sample 0 is what a single sample is.
std::vector<int32_t> generate_tokens(Runtime& rt, NextTokenLogits& model,
                                     std::vector<int32_t> sequence, const GenerateOptions& o,
                                     int32_t newline, const std::vector<int32_t>& stop_ids,
                                     int64_t sample) {
  ProcessGrid& grid = rt.grid();
  const int sampler = grid.rank_of(0, 0, grid.shape().pp - 1);
  const CounterRng rng(o.seed, "generate");
  std::vector<int32_t> generated;
  for (int64_t i = 0; i < o.max_new_tokens; ++i) {
    const std::vector<float> logits = model.next(sequence);
    int32_t next = 0;
    if (grid.is_last_stage()) {
      const uint64_t draw = (static_cast<uint64_t>(sample) << 32) + static_cast<uint64_t>(i);
      const double uniform = static_cast<double>(rng.bits(draw) >> 11) * 0x1p-53;
      next = static_cast<int32_t>(sample_token(logits, o.sampling, uniform));
    }
    grid.world().broadcast_bytes(&next, sizeof(next), sampler);
    if (is_stop_token(stop_ids, next)) break;  // it adds no text
    sequence.push_back(next);
    generated.push_back(next);
    if (o.stop_at_newline && next == newline) break;
  }
  return generated;
}

int generate_main(int argc, char** argv) {
  MPI_Comm world = MPI_COMM_WORLD;
  const int world_size = comm_size(world);
  GenerateOptions o;
  if (!parse_options(world, argc, argv, "generate: sample from a checkpoint", generate_options(o),
                     nullptr, [&] {
                       check_generate_options(o, world_size);
                       // Checked against the checkpoint's layers as it is loaded.
                       set_pipeline_layers(o.layout, o.pipeline_layers);
                     }))
    return 0;
  // Generation runs one sequence: every rank is a tp rank of one of the pp stages.
  RuntimeOptions ro;
  ro.layout = o.layout;
  ro.layout.tp = world_size / o.layout.pp;
  ro.execution = o.execution;
  LoadedModel model = load_model_for_inference(world, o.checkpoint, ro, o.seq_len);
  // Every rank tokenizes the prompt alike (the files are read on each, and agreed on).
  std::unique_ptr<TextTokenizer> tokenizer;
  std::vector<int32_t> prompt;
  std::string prompt_text = o.prompt;
  agree_on_failure(world, [&] {
    tokenizer =
        open_checkpoint_tokenizer(model.tokenizer, o.checkpoint, o.tokenizer,
                                  Gpt2Files{o.vocab, o.merges}, model.runtime->model().vocab_size);
    if (!o.prompt_file.empty()) prompt_text = read_prompt_file(o.prompt_file);
    if (!o.prompt_tokens.empty())
      prompt = parse_token_ids(o.prompt_tokens, model.runtime->model().vocab_size);
    else
      prompt = prompt_token_ids(*tokenizer, prompt_text, o.allow_special_tokens);
    // A bytes model trained on a data set of fewer than 256 tokens has no row for the others.
    const int64_t vocab = model.runtime->model().vocab_size;
    for (size_t i = 0; i < prompt.size(); ++i)
      GPT_INPUT_CHECK(prompt[i] < vocab, "the prompt's token "
                                             << prompt[i] << " (at " << i << ", tokenizer "
                                             << tokenizer->name() << ") is not below vocab_size "
                                             << vocab << " of the checkpoint " << o.checkpoint);
  });
  std::vector<int32_t> newline_ids;
  tokenizer->encode(0, "\n", newline_ids);
  const int32_t newline = newline_ids.empty() ? -1 : newline_ids.back();
  // A prompt token outside the tokenizer's vocabulary (a model trained with a larger one) is an
  // error of the decode, named there; generated ones add no text (continuation_text).
  const std::string shown_prompt =
      o.prompt_tokens.empty() ? prompt_text : tokenizer->decode(prompt);
  std::vector<int32_t> stop_ids;
  agree_on_failure(world, [&] {
    if (!o.ignore_eos)
      stop_ids = stop_token_ids(*tokenizer, model.hf_extras, model.runtime->model().vocab_size,
                                model.path);
  });
  std::unique_ptr<NextTokenLogits> logits;
  if (o.no_kv_cache)
    logits = std::make_unique<WindowForward>(*model.runtime);
  else
    logits = std::make_unique<KvCacheDecoder>(*model.runtime);
  for (int64_t sample = 0; sample < o.num_samples; ++sample) {
    const std::vector<int32_t> generated =
        generate_tokens(*model.runtime, *logits, prompt, o, newline, stop_ids, sample);
    if (comm_rank(world) != 0) continue;
    const std::string text = continuation_text(*tokenizer, prompt, generated);
    if (o.num_samples > 1) std::cout << "--- sample " << sample + 1 << " ---\n";
    std::cout << shown_prompt << text;
    if (text.empty() || text.back() != '\n') std::cout << "\n";
    std::cout << std::flush;
  }
  return 0;
}

}  // namespace
}  // namespace gpt

int main(int argc, char** argv) {
  return gpt::run_program(argc, argv, gpt::generate_main);
}
