// The layers on the CUDA backend against the CPU backend, through ModelStage (embedding,
// transformer blocks, LM head and loss): the same parameters (same seed), forward outputs, losses
// and every gradient within float32 rounding (bf16: bf16 rounding); a split backward over two
// caches, and repeatability in the deterministic mode.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "framework/parameter.h"
#include "layers/model_stage.h"
#include "parallel/communicator.h"

namespace gpt {
namespace {

using Vec = std::vector<float>;
using Tokens = std::vector<int32_t>;

constexpr double kLossRel = 1e-5;  // fp32 losses
constexpr double kRel = 1e-4;      // fp32 outputs and gradients, by tensor norm
constexpr double kBf16LossRel = 1e-2;
constexpr double kBf16Rel = 5e-2;
constexpr size_t kArenaBytes = size_t{2} << 30;

enum class Kind { kCpu, kCudaFp32, kCudaBf16, kCudaBf16Deterministic };

std::unique_ptr<Backend> make_backend(Kind kind) {
  if (kind == Kind::kCpu) return make_cpu_backend(2);
  CudaBackendOptions options;
  options.precision = kind == Kind::kCudaFp32 ? Precision::kFp32 : Precision::kBf16;
  options.deterministic = kind == Kind::kCudaBf16Deterministic;
  options.arena_bytes = kArenaBytes;
  return make_cuda_backend(options);
}

Vec download(Backend& be, const float* p, int64_t n) {
  Vec v(static_cast<size_t>(n));
  if (n > 0) be.copy_to_host(v.data(), p, sizeof(float) * v.size());
  return v;
}

void upload(Backend& be, float* p, const Vec& v) {
  if (!v.empty()) be.copy_from_host(p, v.data(), sizeof(float) * v.size());
}

Vec randn(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  Vec v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// One stage of a model on one backend, tp 1 over MPI_COMM_SELF.
struct Model {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Communicator> comm = make_mpi_communicator(MPI_COMM_SELF, "tp");
  std::unique_ptr<TensorParallel> tp;
  std::unique_ptr<ParameterStore> store;
  std::unique_ptr<ModelStage> stage;

  // split: the stage runs its backward as ZB-H1 does, each block's W apart from its B-input.
  Model(Kind kind, const ModelConfig& cfg, const StageSpec& spec, int64_t B, int caches = 1,
        bool split = false)
      : backend(make_backend(kind)) {
    tp = std::make_unique<TensorParallel>(*comm, *backend);
    store = std::make_unique<ParameterStore>(*backend);
    const ChunkRecompute recompute{
        .mode = Recompute::kNone, .full_blocks = 0, .split_backward = split};
    stage = std::make_unique<ModelStage>(*store, *tp, cfg, spec, B, caches, caches, recompute);
    store->allocate();
    store->initialize(1234);
    // Larger than init weights: activations leave GELU's and softmax's linear regions.
    for (Parameter& p : store->params()) {
      if (p.init != InitKind::kNormal) continue;
      Vec v = download(*backend, p.value, p.numel());
      for (auto& x : v) x *= 5.0f;
      upload(*backend, p.value, v);
    }
    store->zero_grads();
  }
  int64_t N() const { return stage->rows(); }
  int64_t C() const { return stage->model().d_model; }

  std::map<std::string, Vec> grads() {
    std::map<std::string, Vec> out;
    for (Parameter& p : store->params()) out[p.name] = download(*backend, p.grad, p.numel());
    return out;
  }
  // The first `valid` of every row of `cols` columns.
  Vec rows_prefix(const float* p, int64_t rows, int64_t cols, int64_t valid) {
    const Vec all = download(*backend, p, rows * cols);
    Vec out;
    for (int64_t r = 0; r < rows; r++)
      out.insert(out.end(), all.begin() + r * cols, all.begin() + r * cols + valid);
    return out;
  }
  Vec logits(int slot) {
    const VocabShard v = stage->vocab();
    return rows_prefix(stage->local_logits(slot), N(), v.count, v.valid);
  }
};

double rel_norm_diff(const Vec& got, const Vec& want) {
  double d = 0.0, r = 0.0;
  for (size_t i = 0; i < got.size(); i++) {
    const double e = static_cast<double>(got[i]) - want[i];
    d += e * e;
    r += static_cast<double>(want[i]) * want[i];
  }
  if (r == 0.0) return d == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(d / r);
}

void expect_close(const Vec& got, const Vec& want, double rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_FALSE(got.empty()) << what;
  for (size_t i = 0; i < got.size(); i++)
    ASSERT_TRUE(std::isfinite(got[i])) << what << "[" << i << "] = " << got[i];
  const double r = rel_norm_diff(got, want);
  EXPECT_LE(r, rel) << what << ": relative difference by norm " << r;
}

void expect_grads_close(Model& gpu, Model& cpu, double rel, const std::string& tag) {
  const auto want = cpu.grads(), got = gpu.grads();
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, g] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    expect_close(got.at(name), g, rel, "d " + name + tag);
  }
}

void expect_loss_close(double got, double want, double rel, const std::string& what) {
  EXPECT_TRUE(std::isfinite(got)) << what;
  EXPECT_LE(std::abs(got - want), rel * std::abs(want)) << what << ": " << got << " vs " << want;
}

struct Case {
  std::string name;
  ModelConfig cfg;
  int64_t B;
};

// Head sizes 8, 16 and 64; T not a multiple of 64; vocabularies padded to a multiple of 64.
std::vector<Case> cases() {
  std::vector<Case> out;
  ModelConfig a;
  a.n_layer = 2, a.n_head = 4, a.d_model = 32, a.seq_len = 24, a.vocab_size = 100;
  out.push_back({"HS8_T24_V100", a, 2});
  ModelConfig b;
  b.n_layer = 1, b.n_head = 2, b.d_model = 128, b.seq_len = 70, b.vocab_size = 300;
  out.push_back({"HS64_T70_V300", b, 3});
  ModelConfig c;
  c.n_layer = 2, c.n_head = 3, c.d_model = 48, c.seq_len = 33, c.vocab_size = 65;
  out.push_back({"HS16_T33_V65", c, 2});
  return out;
}

Tokens random_tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab - 1));
  Tokens t(static_cast<size_t>(n));
  for (auto& x : t) x = dist(rng);
  return t;
}

StageSpec whole(const ModelConfig& cfg) {
  return StageSpec{0, cfg.n_layer, true, true, false};
}

// ---------------------------------------------------------------------------------------------

// The whole model: loss, logits, the logits' gradient and every parameter gradient.
void check_whole_model(Kind kind, double loss_rel, double rel) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    Model cpu(Kind::kCpu, c.cfg, whole(c.cfg), c.B), gpu(kind, c.cfg, whole(c.cfg), c.B);
    const Tokens tokens = random_tokens(cpu.N(), c.cfg.vocab_size, 1);
    const Tokens targets = random_tokens(cpu.N(), c.cfg.vocab_size, 2);
    const float loss_scale = 1.0f / static_cast<float>(cpu.N());
    double loss[2];
    Vec logits[2], dlogits[2];
    Model* models[2] = {&cpu, &gpu};
    for (int k = 0; k < 2; k++) {
      models[k]->stage->forward(0, tokens.data(), targets.data());
      loss[k] = models[k]->stage->loss_sum(0);
      logits[k] = models[k]->logits(0);
      models[k]->stage->backward(0, 0, loss_scale);
      dlogits[k] = models[k]->logits(0);
    }
    const std::string tag = " (" + c.name + ")";
    expect_loss_close(loss[1], loss[0], loss_rel, "loss sum" + tag);
    expect_close(logits[1], logits[0], rel, "logits" + tag);
    expect_close(dlogits[1], dlogits[0], rel, "dlogits" + tag);
    expect_grads_close(gpu, cpu, rel, tag);
  }
}

TEST(CudaLayers, WholeModelFp32MatchesCpu) {
  check_whole_model(Kind::kCudaFp32, kLossRel, kRel);
}

TEST(CudaLayers, WholeModelBf16WithinBf16Rounding) {
  check_whole_model(Kind::kCudaBf16, kBf16LossRel, kBf16Rel);
}

// A middle pipeline stage (transformer blocks alone): output from a given input, input gradient
// and block gradients from a given output gradient.
TEST(CudaLayers, BlocksAloneFp32MatchCpu) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const StageSpec spec{0, c.cfg.n_layer, false, false, false};
    Model cpu(Kind::kCpu, c.cfg, spec, c.B), gpu(Kind::kCudaFp32, c.cfg, spec, c.B);
    const int64_t n = cpu.stage->local_rows() * cpu.C();
    const Vec input = randn(n, 3), dout = randn(n, 4, 0.1f);
    Vec out[2], dinp[2];
    Model* models[2] = {&cpu, &gpu};
    for (int k = 0; k < 2; k++) {
      Model& m = *models[k];
      upload(*m.backend, m.stage->input_activation(0), input);
      m.stage->forward(0, nullptr, nullptr);
      out[k] = download(*m.backend, m.stage->output_activation(0), n);
      upload(*m.backend, m.stage->output_grad(0), dout);
      m.stage->backward(0, 0, 1.0f);
      dinp[k] = download(*m.backend, m.stage->input_grad(0), n);
    }
    const std::string tag = " (" + c.name + ")";
    expect_close(out[1], out[0], kRel, "block output" + tag);
    expect_close(dinp[1], dinp[0], kRel, "block input gradient" + tag);
    expect_grads_close(gpu, cpu, kRel, tag);
  }
}

// The first pipeline stage: embedding and blocks, no head.
TEST(CudaLayers, FirstStageFp32MatchesCpu) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const StageSpec spec{0, 1, true, false, false};
    Model cpu(Kind::kCpu, c.cfg, spec, c.B), gpu(Kind::kCudaFp32, c.cfg, spec, c.B);
    const int64_t n = cpu.stage->local_rows() * cpu.C();
    const Tokens tokens = random_tokens(cpu.N(), c.cfg.vocab_size, 5);
    const Vec dout = randn(n, 6, 0.1f);
    Vec out[2];
    Model* models[2] = {&cpu, &gpu};
    for (int k = 0; k < 2; k++) {
      Model& m = *models[k];
      m.stage->forward(0, tokens.data(), nullptr);
      out[k] = download(*m.backend, m.stage->output_activation(0), n);
      upload(*m.backend, m.stage->output_grad(0), dout);
      m.stage->backward(0, 0, 1.0f);
    }
    const std::string tag = " (" + c.name + ")";
    expect_close(out[1], out[0], kRel, "first stage output" + tag);
    expect_grads_close(gpu, cpu, kRel, tag);
  }
}

// The last pipeline stage with its copy of the tied wte: blocks, ln_f, head and loss.
TEST(CudaLayers, LastStageWithTiedCopyFp32MatchesCpu) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const StageSpec spec{c.cfg.n_layer - 1, 1, false, true, true};
    Model cpu(Kind::kCpu, c.cfg, spec, c.B), gpu(Kind::kCudaFp32, c.cfg, spec, c.B);
    const int64_t n = cpu.stage->local_rows() * cpu.C();
    const Vec input = randn(n, 7);
    const Tokens targets = random_tokens(cpu.N(), c.cfg.vocab_size, 8);
    double loss[2];
    Vec dinp[2];
    Model* models[2] = {&cpu, &gpu};
    for (int k = 0; k < 2; k++) {
      Model& m = *models[k];
      upload(*m.backend, m.stage->input_activation(0), input);
      m.stage->forward(0, nullptr, targets.data());
      loss[k] = m.stage->loss_sum(0);
      m.stage->backward(0, 0, 1.0f / static_cast<float>(m.N()));
      dinp[k] = download(*m.backend, m.stage->input_grad(0), n);
    }
    const std::string tag = " (" + c.name + ")";
    expect_loss_close(loss[1], loss[0], kLossRel, "last stage loss" + tag);
    expect_close(dinp[1], dinp[0], kRel, "last stage input gradient" + tag);
    expect_grads_close(gpu, cpu, kRel, tag);
  }
}

// Two microbatches in flight, backward split into input and weight halves run apart (ZB-H1's
// order): the caches and gradient sets must not interfere on the GPU either.
TEST(CudaLayers, SplitBackwardOverTwoCachesFp32MatchesCpu) {
  const Case c = cases()[0];
  Model cpu(Kind::kCpu, c.cfg, whole(c.cfg), c.B, 2, true),
      gpu(Kind::kCudaFp32, c.cfg, whole(c.cfg), c.B, 2, true);
  const Tokens tokens[2] = {random_tokens(cpu.N(), c.cfg.vocab_size, 9),
                            random_tokens(cpu.N(), c.cfg.vocab_size, 10)};
  const Tokens targets[2] = {random_tokens(cpu.N(), c.cfg.vocab_size, 11),
                             random_tokens(cpu.N(), c.cfg.vocab_size, 12)};
  const float loss_scale = 0.5f / static_cast<float>(cpu.N());
  double loss[2][2];
  Model* models[2] = {&cpu, &gpu};
  for (int k = 0; k < 2; k++) {
    ModelStage& s = *models[k]->stage;
    s.forward(0, tokens[0].data(), targets[0].data());
    s.forward(1, tokens[1].data(), targets[1].data());
    loss[k][0] = s.loss_sum(0);
    loss[k][1] = s.loss_sum(1);
    s.backward_input(1, 1, loss_scale);
    s.backward_input(0, 0, loss_scale);
    s.backward_weight(0, 0);
    s.backward_weight(1, 1);
  }
  expect_loss_close(loss[1][0], loss[0][0], kLossRel, "microbatch 0 loss");
  expect_loss_close(loss[1][1], loss[0][1], kLossRel, "microbatch 1 loss");
  expect_grads_close(gpu, cpu, kRel, " (split backward)");
}

// The deterministic mode: the same step twice gives the same loss and gradients, bit for bit.
TEST(CudaLayers, DeterministicBf16StepRepeatsBitForBit) {
  const Case c = cases()[1];
  Model m(Kind::kCudaBf16Deterministic, c.cfg, whole(c.cfg), c.B);
  const Tokens tokens = random_tokens(m.N(), c.cfg.vocab_size, 13);
  const Tokens targets = random_tokens(m.N(), c.cfg.vocab_size, 14);
  double loss[2];
  Vec grads[2];
  for (int k = 0; k < 2; k++) {
    m.store->zero_grads();
    m.stage->forward(0, tokens.data(), targets.data());
    loss[k] = m.stage->loss_sum(0);
    m.stage->backward(0, 0, 1.0f / static_cast<float>(m.N()));
    grads[k] = download(*m.backend, m.store->grads(), m.store->total_numel());
  }
  EXPECT_EQ(std::memcmp(&loss[0], &loss[1], sizeof(double)), 0) << loss[0] << " vs " << loss[1];
  ASSERT_EQ(grads[0].size(), grads[1].size());
  EXPECT_EQ(std::memcmp(grads[0].data(), grads[1].data(), sizeof(float) * grads[0].size()), 0)
      << "gradients differ between two identical steps";
}

}  // namespace
}  // namespace gpt
