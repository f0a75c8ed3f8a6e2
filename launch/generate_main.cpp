// generate: sample text from a checkpoint (DESIGN.md "Programs"). The prompt is tokenized by the
// checkpoint's tokenizer (bytes); each new token comes from the logits at the last position of a
// window of the most recent seq_len tokens, gathered over tp ranks, sampled on rank 0's draw and
// broadcast so every rank extends the same sequence.
#include <boost/program_options.hpp>
#include <iostream>
#include <vector>

#include "framework/logging.h"
#include "framework/rng.h"
#include "launch/checkpoint_model.h"
#include "launch/options.h"
#include "launch/program.h"
#include "launch/sampling.h"
#include "layers/gpt_chunk.h"
#include "parallel/pipeline_executor.h"

namespace po = boost::program_options;

namespace gpt {
namespace {

int generate_main(int argc, char** argv) {
  MPI_Comm world = MPI_COMM_WORLD;
  int world_size = 1, rank = 0;
  MPI_Comm_size(world, &world_size);
  MPI_Comm_rank(world, &rank);
  std::string checkpoint, prompt;
  int64_t max_new_tokens = 32, top_k = 0;
  double temperature = 1.0;
  uint64_t seed = 1;
  int pp = 1;
  bool stop_at_newline = false;
  po::options_description desc("generate: sample from a checkpoint");
  desc.add_options()("help,h", "print this help")(
      "checkpoint", po::value(&checkpoint)->default_value(""), "checkpoint file (.h5)")(
      "prompt", po::value(&prompt)->default_value(""), "text to continue")(
      "max-new-tokens", po::value(&max_new_tokens)->default_value(max_new_tokens),
      "tokens to generate")("temperature", po::value(&temperature)->default_value(temperature),
                            "softmax temperature; 0 = greedy")(
      "top-k", po::value(&top_k)->default_value(top_k), "sample among the k likeliest (0 = all)")(
      "seed", po::value(&seed)->default_value(seed), "sampling seed")(
      "stop-at-newline", po::bool_switch(&stop_at_newline), "stop after a newline token")(
      "pp", po::value(&pp)->default_value(pp), "pipeline stages; the ranks / pp are tp ranks");
  ExecutionOptions execution;
  add_execution_options(desc, execution);
  if (!parse_options(world, argc, argv, desc, nullptr, [&] {
        validate_execution_options(execution);
        GPT_INPUT_CHECK(!checkpoint.empty(), "--checkpoint is required");
        GPT_INPUT_CHECK(max_new_tokens >= 0, "--max-new-tokens must be at least 0");
        GPT_INPUT_CHECK(temperature >= 0.0, "--temperature must be at least 0");
        GPT_INPUT_CHECK(top_k >= 0, "--top-k must be at least 0");
        GPT_INPUT_CHECK(pp >= 1 && world_size % pp == 0,
                        "--pp " << pp << " does not divide the " << world_size << " ranks");
      }))
    return 0;
  // Generation runs one sequence: every rank is a tp rank of one of the pp stages.
  const int tp = world_size / pp;
  RuntimeOptions ro;
  ro.grid.shape = {tp, 1, pp};
  ro.execution = execution;
  LoadedModel model = load_model_for_inference(world, checkpoint, ro);
  Runtime& rt = *model.runtime;
  const ModelConfig& cfg = rt.model();
  agree_on_failure(world, [&] {
    GPT_INPUT_CHECK(model.tokenizer == "bytes",
                    "generate knows the bytes tokenizer only (the "
                    "checkpoint uses "
                        << model.tokenizer << ")");
    GPT_INPUT_CHECK(cfg.n_head % tp == 0,
                    tp << " tp ranks do not divide the checkpoint's n_head " << cfg.n_head);
  });
  std::vector<int32_t> sequence(prompt.begin(), prompt.end());
  for (int32_t& t : sequence) t = static_cast<unsigned char>(t);
  if (sequence.empty()) sequence.push_back('\n');  // the corpus' separator starts a fresh line
  const int64_t T = cfg.seq_len;
  ProcessGrid& grid = rt.grid();
  GptStage& head_stage = *rt.chunks().back();
  std::vector<int32_t> window(static_cast<size_t>(T)), targets(static_cast<size_t>(T), 0);
  // One forward through every stage per token; the last stage samples and tells everyone.
  const Schedule forward = make_forward_only_schedule(pp, 1, 1);
  MicrobatchData batch{window.data(), targets.data(), 1, 1.0f, {}};
  GptChunk chunk(rt.stage(), 1, 1);
  chunk.begin(&batch, nullptr);
  std::vector<PipelineChunk*> chunks{&chunk};
  PipelineExecutor executor(grid.pp(), 1);
  const int sampler = grid.rank_of(0, 0, pp - 1);
  const CounterRng rng(seed, "generate");
  std::string generated;
  for (int64_t i = 0; i < max_new_tokens; ++i) {
    // The last min(n, T) tokens, left-aligned: causal attention ignores what follows them.
    const int64_t n = static_cast<int64_t>(sequence.size()), used = std::min(n, T);
    std::fill(window.begin(), window.end(), 0);
    std::copy(sequence.end() - used, sequence.end(), window.begin());
    executor.run(forward, chunks);
    int32_t next = 0;
    if (grid.is_last_stage()) {
      const std::vector<float> logits = head_stage.gather_last_logits(0, used - 1);
      const double uniform =
          static_cast<double>(rng.bits(static_cast<uint64_t>(i)) >> 11) * 0x1p-53;
      next = static_cast<int32_t>(sample_token(logits, temperature, top_k, uniform));
    }
    grid.world().broadcast_bytes(&next, sizeof(next), sampler);
    sequence.push_back(next);
    generated += static_cast<char>(next);
    if (stop_at_newline && next == '\n') break;
  }
  if (rank == 0) std::cout << prompt << generated << std::flush;
  if (rank == 0 && (generated.empty() || generated.back() != '\n')) std::cout << "\n";
  return 0;
}

}  // namespace
}  // namespace gpt

int main(int argc, char** argv) {
  return gpt::run_program(argc, argv, gpt::generate_main);
}
