// serve: an OpenAI-compatible completions server for a checkpoint, over tp x pp ranks
// (docs/SERVING.md). Rank 0 runs the HTTP side (launch/serving/http_frontend.h) and plans every
// step (continuous batching over a paged key/value cache); every rank runs its stage of each plan
// (launch/serving/serve_loop.h). A request's tokens are generate's for the same prompt, seed and
// checkpoint, whatever else is batched with it (launch/inference/decode_engine.h).
#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>

#include "framework/logging.h"
#include "framework/text/chat_template.h"
#include "launch/inference/checkpoint_model.h"
#include "launch/inference/decode_engine.h"
#include "launch/inference/kv_block_pool.h"
#include "launch/inference/prompt_text.h"
#include "launch/inference/stop_tokens.h"
#include "launch/programs/program.h"
#include "launch/runtime/run_options.h"
#include "launch/runtime/signals.h"
#include "launch/serving/batch_scheduler.h"
#include "launch/serving/http_frontend.h"
#include "launch/serving/serve_health.h"
#include "launch/serving/serve_loop.h"

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace gpt {
namespace {

struct ServeOptions {
  std::string checkpoint, tokenizer, served_model_name;
  std::string vocab = std::string(GPT_SOURCE_DIR) + "/third_party/gpt2/encoder.json";
  std::string merges = std::string(GPT_SOURCE_DIR) + "/third_party/gpt2/vocab.bpe";
  Layout layout;
  std::string pipeline_layers = "even";
  int64_t seq_len = 0;
  HttpLimits http;
  double stall_timeout = 60.0;
  double kv_cache_gb = 0.0;
  int64_t block_size = 16, max_num_seqs = 64, max_batch_tokens = 256, max_queue = 256;
  double shutdown_timeout = 30.0;
  uint64_t seed = 0;
  ExecutionOptions execution;
};

po::options_description serve_options(ServeOptions& o) {
  po::options_description desc;
  auto add = desc.add_options();
  add("checkpoint", po::value(&o.checkpoint)->default_value(""),
      "checkpoint file (.h5), or a checkpoint folder (its newest valid file)");
  add("tp", po::value(&o.layout.tp)->default_value(o.layout.tp), "tensor-parallel ranks");
  add("pp", po::value(&o.layout.pp)->default_value(o.layout.pp), "pipeline stages");
  add("pipeline-layers", po::value(&o.pipeline_layers)->default_value(o.pipeline_layers),
      kPipelineLayersHelp);
  add("seq-len", po::value(&o.seq_len)->default_value(0),
      "the context: prompt plus max_tokens; 0 = the checkpoint's");
  add("host", po::value(&o.http.host)->default_value(o.http.host), "address to listen on");
  add("port", po::value(&o.http.port)->default_value(o.http.port),
      "port to listen on (0: any free port, printed at start)");
  add("served-model-name", po::value(&o.served_model_name)->default_value(""),
      "the model's name in the API (default: the checkpoint file's name without .h5)");
  add("kv-cache-gb", po::value(&o.kv_cache_gb)->default_value(0.0),
      "memory per rank for the key/value blocks, GiB (0: room for --max-num-seqs sequences of "
      "the whole context)");
  add("block-size", po::value(&o.block_size)->default_value(o.block_size),
      "positions per key/value block");
  add("max-num-seqs", po::value(&o.max_num_seqs)->default_value(o.max_num_seqs),
      "sequences running at once");
  add("max-batch-tokens", po::value(&o.max_batch_tokens)->default_value(o.max_batch_tokens),
      "token rows per step (decodes, then prompt chunks)");
  add("max-queue", po::value(&o.max_queue)->default_value(o.max_queue),
      "requests waiting for blocks before new ones get 503");
  add("http-threads", po::value(&o.http.threads)->default_value(o.http.threads),
      "threads that read, parse and write HTTP requests (none waits for the model)");
  add("max-connections", po::value(&o.http.max_connections)->default_value(0),
      "open HTTP connections; one more is answered 503 (0: --max-num-seqs + --max-queue + 16)");
  add("http-timeout", po::value(&o.http.timeout_s)->default_value(o.http.timeout_s),
      "seconds to read a whole request, or to write each part of an answer, before the "
      "connection is closed");
  add("max-body-bytes", po::value(&o.http.max_body_bytes)->default_value(o.http.max_body_bytes),
      "largest request body, sent whole or in chunks");
  add("stall-timeout", po::value(&o.stall_timeout)->default_value(o.stall_timeout),
      "seconds the ranks may go without all taking part in a step before /health fails and "
      "the waiting requests are answered 503");
  add("shutdown-timeout", po::value(&o.shutdown_timeout)->default_value(o.shutdown_timeout),
      "seconds running requests get to finish after SIGTERM before they are aborted");
  add("seed", po::value(&o.seed)->default_value(o.seed),
      "base of the seeds of requests that give none (request i: seed + i)");
  add("tokenizer", po::value(&o.tokenizer)->default_value(""),
      "checkpoints of a Hugging Face tokenizer: its tokenizer.json or directory");
  add("vocab", po::value(&o.vocab)->default_value(o.vocab), "gpt2 checkpoints: the vocabulary");
  add("merges", po::value(&o.merges)->default_value(o.merges), "gpt2 checkpoints: the merges");
  add_execution_options(desc, o.execution, o.layout.precision);
  return desc;
}

void check_serve_options(ServeOptions& o, int world_size) {
  validate_execution_options(o.execution);
  GPT_INPUT_CHECK(!o.checkpoint.empty(), "--checkpoint is required");
  GPT_INPUT_CHECK(o.layout.tp >= 1 && o.layout.pp >= 1 && o.layout.tp * o.layout.pp == world_size,
                  "--tp " << o.layout.tp << " x --pp " << o.layout.pp << " must equal the "
                          << world_size << " ranks");
  GPT_INPUT_CHECK(o.seq_len >= 0, "--seq-len must be at least 0");
  GPT_INPUT_CHECK(o.http.port >= 0 && o.http.port <= 65535, "--port must be in [0, 65535]");
  GPT_INPUT_CHECK(o.kv_cache_gb >= 0.0 && o.kv_cache_gb <= 4096.0,
                  "--kv-cache-gb must be in [0, 4096]");
  GPT_INPUT_CHECK(o.block_size >= 1 && o.block_size <= 1024, "--block-size must be in [1, 1024]");
  GPT_INPUT_CHECK(o.max_num_seqs >= 1 && o.max_num_seqs <= 4096,
                  "--max-num-seqs must be in [1, 4096]");
  GPT_INPUT_CHECK(o.max_batch_tokens >= 1 && o.max_batch_tokens <= 65536,
                  "--max-batch-tokens must be in [1, 65536]");
  GPT_INPUT_CHECK(o.max_queue >= 1 && o.max_queue <= 65536, "--max-queue must be in [1, 65536]");
  GPT_INPUT_CHECK(o.http.threads >= 1 && o.http.threads <= 256,
                  "--http-threads must be in [1, 256]");
  GPT_INPUT_CHECK(o.http.max_connections <= 65536, "--max-connections must be in [0, 65536]");
  if (o.http.max_connections == 0)
    o.http.max_connections = static_cast<size_t>(o.max_num_seqs + o.max_queue + 16);
  GPT_INPUT_CHECK(o.http.timeout_s > 0.0 && o.http.timeout_s <= 3600.0,
                  "--http-timeout must be in (0, 3600]");
  GPT_INPUT_CHECK(o.http.max_body_bytes >= 1024 && o.http.max_body_bytes <= (size_t{1} << 30),
                  "--max-body-bytes must be in [1024, 2^30]");
  GPT_INPUT_CHECK(o.shutdown_timeout >= 0.0 && o.shutdown_timeout <= 3600.0,
                  "--shutdown-timeout must be in [0, 3600]");
  GPT_INPUT_CHECK(o.stall_timeout > 0.0 && o.stall_timeout <= 86400.0,
                  "--stall-timeout must be in (0, 86400]");
}

// Blocks in every rank's pool: the same count everywhere (block ids are global), sized by the
// rank that needs the most bytes for one.
int64_t kv_blocks(MPI_Comm world, Runtime& rt, const ServeOptions& o, int64_t max_blocks) {
  const ModelConfig& m = rt.model();
  int64_t bytes = 2 * rt.stage().spec().n_layers * m.kv_heads_per_rank(rt.grid().shape().tp) *
                  m.head_dim() * o.block_size * static_cast<int64_t>(sizeof(float));
  GPT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_INT64_T, MPI_MAX, world));
  if (o.kv_cache_gb == 0.0 || bytes == 0) return o.max_num_seqs * max_blocks;
  const auto blocks =
      static_cast<int64_t>(o.kv_cache_gb * 1073741824.0 / static_cast<double>(bytes));
  GPT_INPUT_CHECK(blocks >= max_blocks, "--kv-cache-gb " << o.kv_cache_gb << " holds " << blocks
                                                         << " blocks of " << o.block_size
                                                         << " positions, less than one sequence of "
                                                         << m.seq_len << " positions needs");
  return blocks;
}

std::string model_name_of(const std::string& checkpoint) {
  std::string name = checkpoint;
  while (!name.empty() && name.back() == '/') name.pop_back();
  const size_t slash = name.find_last_of('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  if (name.size() > 3 && name.compare(name.size() - 3, 3, ".h5") == 0) name.resize(name.size() - 3);
  return name;
}

int serve_main(int argc, char** argv) {
  MPI_Comm world = MPI_COMM_WORLD;
  const int world_size = comm_size(world);
  ServeOptions o;
  if (!parse_options(world, argc, argv, "serve: an OpenAI-compatible completions server",
                     serve_options(o), nullptr, [&] {
                       check_serve_options(o, world_size);
                       set_pipeline_layers(o.layout, o.pipeline_layers);
                     }))
    return 0;
  install_stop_handlers("stopping: no new requests; the running ones finish (--shutdown-timeout)");
  RuntimeOptions ro;
  ro.layout = o.layout;
  ro.execution = o.execution;
  LoadedModel model = load_model_for_inference(world, o.checkpoint, ro, o.seq_len);
  Runtime& rt = *model.runtime;
  GPT_INPUT_CHECK(rt.chunks().size() == 1, "serve runs one model chunk per stage");
  const bool is_rank0 = comm_rank(world) == 0;
  std::unique_ptr<TextTokenizer> tokenizer;
  std::vector<int32_t> stop_ids;
  std::unique_ptr<ChatTemplate> chat_template;  // rank 0's, when the tokenizer has one
  agree_on_failure(world, [&] {
    if (!is_rank0) return;
    tokenizer = open_checkpoint_tokenizer(model.tokenizer, o.checkpoint, o.tokenizer,
                                          Gpt2Files{o.vocab, o.merges}, rt.model().vocab_size);
    stop_ids = stop_token_ids(*tokenizer, model.hf_extras, rt.model().vocab_size, model.path);
    // The chat template beside the checkpoint's tokenizer copy; a broken one stops the start.
    if (tokenizer->hf()) {
      const std::string folder = fs::path(tokenizer->hf()->json_path()).parent_path().string();
      if (has_chat_template(folder)) chat_template = std::make_unique<ChatTemplate>(folder);
    }
  });
  DecodeCapacity capacity;
  capacity.rows = o.max_batch_tokens;
  capacity.block_tokens = o.block_size;
  const int64_t max_blocks = (rt.model().seq_len + o.block_size - 1) / o.block_size;
  agree_on_failure(world, [&] { capacity.kv_blocks = kv_blocks(world, rt, o, max_blocks); });
  DecodeEngine engine(rt, capacity);
  // Rank 0's side: the scheduler, the inbox and the HTTP server.
  std::unique_ptr<KvBlockPool> pool;
  std::unique_ptr<BatchScheduler> scheduler;
  RequestInbox inbox(static_cast<size_t>(o.max_queue));
  ServingMetrics metrics;
  ServeHealth health;
  std::mutex tokenizer_mutex;
  std::unique_ptr<HttpFrontend> http;
  const ApiModel api{
      .name = o.served_model_name.empty() ? model_name_of(o.checkpoint) : o.served_model_name,
      .seq_len = rt.model().seq_len,
      .vocab_size = rt.model().vocab_size,
      .has_token = [&tokenizer](int64_t id) { return tokenizer->has_token(id); }};
  int port = 0;
  agree_on_failure(world, [&] {
    if (!is_rank0) return;
    pool = std::make_unique<KvBlockPool>(capacity.kv_blocks, capacity.block_tokens);
    scheduler = std::make_unique<BatchScheduler>(SchedulerLimits{.max_rows = o.max_batch_tokens,
                                                                 .max_sequences = o.max_num_seqs,
                                                                 .groups = rt.grid().shape().pp,
                                                                 .seq_len = rt.model().seq_len,
                                                                 .max_blocks = max_blocks},
                                                 *pool);
    http = std::make_unique<HttpFrontend>(
        o.http, api, inbox, metrics, health, o.stall_timeout,
        [&](const std::string& text) {
          std::lock_guard<std::mutex> lock(tokenizer_mutex);
          return prompt_token_ids(*tokenizer, text, false);
        },
        chat_template ? ChatPrompt([&](const Json& messages, const Json* tools) {
          const std::string text = chat_template->render(messages, tools, true);
          std::lock_guard<std::mutex> lock(tokenizer_mutex);
          return chat_prompt_ids(*tokenizer, text);
        })
                      : ChatPrompt(),
        o.seed);
    port = http->start();
  });
  take_stop_requests_at_steps();
  if (!is_rank0) {
    run_serve_loop(rt, engine, nullptr);
    return 0;
  }
  std::cout << "serve: listening on http://" << o.http.host << ":" << port << " (model '"
            << api.name << "', " << rt.layout() << ", " << capacity.kv_blocks
            << " key/value blocks of " << capacity.block_tokens << " positions)" << std::endl;
  ServeFront front{.inbox = inbox,
                   .metrics = metrics,
                   .scheduler = *scheduler,
                   .tokenizer = *tokenizer,
                   .tokenizer_mutex = tokenizer_mutex,
                   .stop_ids = stop_ids,
                   .health = health,
                   .shutdown_timeout_s = o.shutdown_timeout};
  try {
    run_serve_loop(rt, engine, &front);
  } catch (const std::exception& e) {
    // Every request still waiting gets its 503 before the job ends (run_program aborts the
    // other ranks, which wait for the next plan).
    health.fail(e.what());
    http->fail_all(std::string("the server failed: ") + e.what());
    http->stop(2.0);
    throw;
  }
  // Answers under way (the last tokens of the requests the loop finished) are written first.
  http->stop(o.http.timeout_s);
  log::info0("serve: stopped");
  return 0;
}

}  // namespace
}  // namespace gpt

GPT_BLOCK_STOP_SIGNALS_AT_START();

int main(int argc, char** argv) {
  return gpt::run_program(argc, argv, gpt::serve_main);
}
