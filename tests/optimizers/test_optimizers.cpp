// Optimizer tests: the learning-rate schedule against hand-computed values; AdamW and SGD against
// double-precision re-implementations of torch.optim.AdamW / torch.optim.SGD over several steps
// on a small store mixing decayed weights and non-decayed biases; resume from saved state;
// hyper-parameters; the global gradient norm (stand-in groups, then every real grid of the job
// size) and clipping.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "framework/backend.h"
#include "framework/check.h"
#include "framework/parameter.h"
#include "optimizers/adamw.h"
#include "optimizers/grad_clip.h"
#include "optimizers/lr_schedule.h"
#include "optimizers/optimizer.h"
#include "optimizers/sgd.h"

namespace gpt {
namespace {

// ---- learning-rate schedule

TEST(LrSchedule, WarmupThenCosine) {
  LrSchedule s{1.0, 0.1, 4, 12};
  EXPECT_DOUBLE_EQ(s.at(1), 0.25);
  EXPECT_DOUBLE_EQ(s.at(2), 0.5);
  EXPECT_DOUBLE_EQ(s.at(4), 1.0);  // peak at the end of warm-up
  // progress 1/8: 0.1 + 0.9 * (1 + cos(pi/8)) / 2, cos(pi/8) = 0.92387953251128674
  EXPECT_NEAR(s.at(5), 0.96574578963007903, 1e-15);
  EXPECT_NEAR(s.at(8), 0.55, 1e-15);  // cosine midpoint: halfway between lr and min_lr
  EXPECT_NEAR(s.at(12), 0.1, 1e-15);  // end
  EXPECT_NEAR(s.at(13), 0.1, 1e-15);  // clamped beyond total_steps
  EXPECT_NEAR(s.at(1000), 0.1, 1e-15);
  EXPECT_DOUBLE_EQ(s.at(0), 0.0);  // before the first update
}

TEST(LrSchedule, NoWarmup) {
  LrSchedule s{2.0, 0.0, 0, 4};
  EXPECT_NEAR(s.at(1), 2.0 * (1.0 + std::cos(std::numbers::pi / 4.0)) / 2.0, 1e-15);
  EXPECT_NEAR(s.at(2), 1.0, 1e-15);
  EXPECT_NEAR(s.at(4), 0.0, 1e-15);
  EXPECT_DOUBLE_EQ(s.at(0), 2.0);
  LrSchedule empty{2.0, 0.0, 0, 0};  // --steps 0: never asked in training, but defined
  EXPECT_DOUBLE_EQ(empty.at(0), 2.0);
  EXPECT_DOUBLE_EQ(empty.at(1), 2.0);
}

TEST(LrSchedule, WarmupLongerThanRun) {
  LrSchedule s{1.0, 0.1, 10, 5};
  EXPECT_DOUBLE_EQ(s.at(3), 0.3);
  EXPECT_DOUBLE_EQ(s.at(5), 0.5);
  EXPECT_DOUBLE_EQ(s.at(7), 0.5);  // clamped to the last step
  LrSchedule equal{1.0, 0.1, 5, 5};
  EXPECT_DOUBLE_EQ(equal.at(5), 1.0);
  EXPECT_DOUBLE_EQ(equal.at(6), 1.0);
}

TEST(LrSchedule, Validate) {
  EXPECT_NO_THROW((LrSchedule{1e-3, 1e-4, 10, 100}.validate()));
  EXPECT_THROW((LrSchedule{1e-3, 1e-2, 10, 100}.validate()), Error);
  EXPECT_THROW((LrSchedule{-1e-3, 0.0, 10, 100}.validate()), Error);
  EXPECT_THROW((LrSchedule{1e-3, 0.0, -1, 100}.validate()), Error);
  EXPECT_THROW((LrSchedule{1e-3, 0.0, 1, -1}.validate()), Error);
  EXPECT_THROW((LrSchedule{1e-3, 0.0, 1, 1}.at(-1)), Error);
}

// ---- a small store: decayed 2-D weights and non-decayed biases, interleaved so that runs of
// equal decay both split and merge.

struct TestParam {
  const char* name;
  std::vector<int64_t> shape;
  bool decay;
};
const std::vector<TestParam> kLayout = {
    {"a.weight", {2, 3}, true}, {"a.bias", {3}, false}, {"b.weight", {3, 2}, true},
    {"c.weight", {2, 2}, true}, {"c.bias", {2}, false},
};

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::unique_ptr<ParameterStore> make_store(Backend& backend) {
  auto store = std::make_unique<ParameterStore>(backend);
  for (const TestParam& t : kLayout) {
    ParameterSpec spec;
    spec.name = t.name;
    spec.shape = t.shape;
    spec.local_numel = numel_of(t.shape);
    spec.slabs = {Slab{std::vector<int64_t>(t.shape.size(), 0), t.shape, 0}};
    spec.weight_decay = t.decay;
    store->add(std::move(spec));
  }
  store->allocate();
  return store;
}

void upload(Backend& backend, float* dst, const std::vector<float>& host) {
  backend.copy_from_host(dst, host.data(), host.size() * sizeof(float));
}
std::vector<float> download(Backend& backend, const float* src, int64_t n) {
  std::vector<float> host(static_cast<size_t>(n));
  backend.copy_to_host(host.data(), src, host.size() * sizeof(float));
  return host;
}

// Element i's decay flag, from the layout.
std::vector<bool> decay_flags() {
  std::vector<bool> flags;
  for (const TestParam& t : kLayout) flags.insert(flags.end(), numel_of(t.shape), t.decay);
  return flags;
}

// Element 7 (a.bias[1]) and element 9 (b.weight[0]) never get a gradient: the first must not
// move at all, the second only decays.
constexpr size_t kFrozenBias = 7, kFrozenWeight = 9;

std::vector<float> initial_values(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = 0.5f - 0.09f * static_cast<float>(i) + 0.3f * std::sin(static_cast<float>(i));
  return v;
}
std::vector<float> gradient_at(size_t n, int step) {
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i)
    g[i] = 0.2f * std::sin(0.7f * static_cast<float>(i) + 1.3f * static_cast<float>(step)) +
           0.01f * static_cast<float>(step);
  g[kFrozenBias] = 0.0f;
  g[kFrozenWeight] = 0.0f;
  return g;
}

const std::vector<double> kLrs = {1e-2, 3e-2, 2e-2, 5e-3};

class OptimizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = make_cpu_backend(1);
    store_ = make_store(*backend_);
    n_ = static_cast<size_t>(store_->total_numel());
    upload(*backend_, store_->values(), initial_values(n_));
  }
  void set_grads(ParameterStore& store, int step) {
    upload(*backend_, store.grads(), gradient_at(n_, step));
  }
  std::vector<float> values(ParameterStore& store) {
    return download(*backend_, store.values(), store.total_numel());
  }
  std::vector<float> state(ParameterStore& store, const std::string& name) {
    return download(*backend_, store.state(name), store.total_numel());
  }
  // Sgd against RefSgd over kLrs (below); returns the initial values.
  std::vector<float> run_sgd_against_reference(double momentum, double weight_decay);

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<ParameterStore> store_;
  size_t n_ = 0;
};

void expect_close(const std::vector<float>& actual, const std::vector<double>& expected,
                  const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], 1e-6 + 2e-6 * std::abs(expected[i]))
        << what << "[" << i << "]";
}

TEST_F(OptimizerTest, RunsMergeConsecutiveParametersWithEqualDecay) {
  const std::vector<ParameterRun> runs = weight_decay_runs(*store_);
  // a.weight | a.bias | b.weight + c.weight | c.bias: {offset, numel, weight_decay}
  const std::vector<ParameterRun> expected = {
      {0, 6, true}, {6, 3, false}, {9, 10, true}, {19, 2, false}};
  ASSERT_EQ(runs.size(), expected.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].offset, expected[i].offset) << "run " << i;
    EXPECT_EQ(runs[i].numel, expected[i].numel) << "run " << i;
    EXPECT_EQ(runs[i].weight_decay, expected[i].weight_decay) << "run " << i;
  }
}

// torch.optim.AdamW, in double.
struct RefAdamW {
  double beta1, beta2, eps, wd;
  std::vector<double> p, m, v;
  void step(const std::vector<float>& g, const std::vector<bool>& decay, double lr, int t) {
    const double bc1 = 1.0 - std::pow(beta1, t), bc2 = 1.0 - std::pow(beta2, t);
    for (size_t i = 0; i < p.size(); ++i) {
      if (decay[i]) p[i] *= 1.0 - lr * wd;
      m[i] = beta1 * m[i] + (1.0 - beta1) * g[i];
      v[i] = beta2 * v[i] + (1.0 - beta2) * double(g[i]) * g[i];
      p[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
    }
  }
};

TEST_F(OptimizerTest, AdamWMatchesTorchSemantics) {
  AdamW opt(*store_, 0.9, 0.999, 1e-8, 0.1);
  std::vector<float> init = initial_values(n_);
  RefAdamW ref{0.9,
               0.999,
               1e-8,
               0.1,
               std::vector<double>(init.begin(), init.end()),
               std::vector<double>(n_, 0.0),
               std::vector<double>(n_, 0.0)};
  const std::vector<bool> decay = decay_flags();
  double frozen_weight = init[kFrozenWeight];
  for (int t = 1; t <= static_cast<int>(kLrs.size()); ++t) {
    set_grads(*store_, t);
    opt.step(*store_, kLrs[t - 1]);
    EXPECT_EQ(opt.step_count(), t);
    ref.step(gradient_at(n_, t), decay, kLrs[t - 1], t);
    expect_close(values(*store_), ref.p, "param after step " + std::to_string(t));
    expect_close(state(*store_, "exp_avg"), ref.m, "exp_avg");
    expect_close(state(*store_, "exp_avg_sq"), ref.v, "exp_avg_sq");
    frozen_weight *= 1.0 - kLrs[t - 1] * 0.1;
  }
  std::vector<float> p = values(*store_);
  EXPECT_EQ(p[kFrozenBias], init[kFrozenBias]);        // no gradient and no decay: untouched
  EXPECT_NEAR(p[kFrozenWeight], frozen_weight, 1e-7);  // no gradient: decay alone
  EXPECT_NE(p[kFrozenWeight], init[kFrozenWeight]);
}

TEST_F(OptimizerTest, AdamWFirstStepByHand) {
  // Step 1: m_hat = g, v_hat = g^2, so p1 = p0 (1 - lr wd) - lr g / (|g| + eps).
  AdamW opt(*store_, 0.9, 0.999, 1e-8, 0.1);
  std::vector<float> p0(n_, 1.0f), g(n_, 0.5f);
  upload(*backend_, store_->values(), p0);
  upload(*backend_, store_->grads(), g);
  opt.step(*store_, 0.01);
  std::vector<float> p = values(*store_);
  EXPECT_NEAR(p[0], 0.999 - 0.01 * 0.5 / (0.5 + 1e-8), 1e-7);  // a.weight: decayed
  EXPECT_NEAR(p[6], 1.0 - 0.01 * 0.5 / (0.5 + 1e-8), 1e-7);    // a.bias: not decayed
}

// torch.optim.SGD (dampening 0, no Nesterov), in double.
struct RefSgd {
  double momentum, wd;
  std::vector<double> p, buf;
  void step(const std::vector<float>& g, const std::vector<bool>& decay, double lr, int t) {
    for (size_t i = 0; i < p.size(); ++i) {
      double d = g[i] + (decay[i] ? wd * p[i] : 0.0);
      if (momentum != 0.0) {
        buf[i] = t == 1 ? d : momentum * buf[i] + d;
        d = buf[i];
      }
      p[i] -= lr * d;
    }
  }
};

// The momentum buffer is compared only where momentum makes it more than the last gradient.
std::vector<float> OptimizerTest::run_sgd_against_reference(double momentum, double weight_decay) {
  Sgd opt(*store_, momentum, weight_decay);
  std::vector<float> init = initial_values(n_);
  RefSgd ref{momentum, weight_decay, std::vector<double>(init.begin(), init.end()),
             std::vector<double>(n_, 0.0)};
  const std::vector<bool> decay = decay_flags();
  for (int t = 1; t <= static_cast<int>(kLrs.size()); ++t) {
    set_grads(*store_, t);
    opt.step(*store_, kLrs[t - 1]);
    ref.step(gradient_at(n_, t), decay, kLrs[t - 1], t);
    expect_close(values(*store_), ref.p, "param after step " + std::to_string(t));
    if (momentum > 0) expect_close(state(*store_, "momentum_buffer"), ref.buf, "momentum_buffer");
  }
  return init;
}

TEST_F(OptimizerTest, SgdWithMomentumMatchesTorchSemantics) {
  const std::vector<float> init = run_sgd_against_reference(0.9, 0.01);
  std::vector<float> p = values(*store_);
  EXPECT_EQ(p[kFrozenBias], init[kFrozenBias]);
  EXPECT_NE(p[kFrozenWeight], init[kFrozenWeight]);  // moved by its decay term alone
}

TEST_F(OptimizerTest, SgdWithoutMomentumMatchesTorchSemantics) {
  const std::vector<float> init = run_sgd_against_reference(0.0, 0.05);
  EXPECT_EQ(values(*store_)[kFrozenBias], init[kFrozenBias]);
}

TEST_F(OptimizerTest, SgdTwoStepsByHand) {
  Sgd opt(*store_, 0.9, 0.1);
  upload(*backend_, store_->values(), std::vector<float>(n_, 1.0f));
  upload(*backend_, store_->grads(), std::vector<float>(n_, 0.5f));
  opt.step(*store_, 0.1);
  // decayed: g' = 0.5 + 0.1*1 = 0.6 = buf, p = 1 - 0.06
  EXPECT_NEAR(values(*store_)[0], 0.94, 1e-7);
  EXPECT_NEAR(values(*store_)[6], 0.95, 1e-7);  // bias: g' = 0.5
  opt.step(*store_, 0.1);
  // g' = 0.5 + 0.094 = 0.594, buf = 0.9*0.6 + 0.594 = 1.134, p = 0.94 - 0.1134
  EXPECT_NEAR(values(*store_)[0], 0.8266, 1e-6);
  // bias: buf = 0.9*0.5 + 0.5 = 0.95, p = 0.95 - 0.095
  EXPECT_NEAR(values(*store_)[6], 0.855, 1e-6);
}

// A run that stops after `split` steps and resumes into a fresh store and optimizer (values,
// states and the step count copied, as a checkpoint would) is bit-identical to one that never
// stopped. For SGD this also proves the first step after loading is not treated as a first step.
TEST_F(OptimizerTest, ResumeIsBitwiseIdentical) {
  OptimizerOptions options;
  options.momentum = 0.9;
  options.weight_decay = 0.1;
  for (const OptimizerKind type : kOptimizerKinds) {
    auto full_store = make_store(*backend_);
    auto first_store = make_store(*backend_);
    upload(*backend_, full_store->values(), initial_values(n_));
    upload(*backend_, first_store->values(), initial_values(n_));
    auto full = make_optimizer(type, *full_store, options);
    auto first = make_optimizer(type, *first_store, options);
    const int split = 2, total = 4;
    for (int t = 1; t <= split; ++t) {
      set_grads(*full_store, t);
      set_grads(*first_store, t);
      full->step(*full_store, kLrs[t - 1]);
      first->step(*first_store, kLrs[t - 1]);
    }
    auto resumed_store = make_store(*backend_);
    auto resumed = make_optimizer(type, *resumed_store, options);
    upload(*backend_, resumed_store->values(), values(*first_store));
    for (const std::string& s : resumed->state_names())
      upload(*backend_, resumed_store->state(s), state(*first_store, s));
    resumed->set_step_count(first->step_count());
    for (int t = split + 1; t <= total; ++t) {
      set_grads(*full_store, t);
      set_grads(*resumed_store, t);
      full->step(*full_store, kLrs[t - 1]);
      resumed->step(*resumed_store, kLrs[t - 1]);
    }
    EXPECT_EQ(resumed->step_count(), total);
    EXPECT_EQ(values(*resumed_store), values(*full_store)) << optimizer_name(type);
    for (const std::string& s : full->state_names())
      EXPECT_EQ(state(*resumed_store, s), state(*full_store, s))
          << optimizer_name(type) << " " << s;
  }
}

// ---- hyper-parameters and the factory

TEST_F(OptimizerTest, AdamWHyperparameters) {
  OptimizerOptions options{0.8, 0.99, 1e-6, 0.05, 0.0};
  auto opt = make_optimizer(OptimizerKind::kAdamW, *store_, options);
  EXPECT_EQ(opt->type(), "adamw");
  EXPECT_EQ(opt->state_names(), (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
  EXPECT_EQ(store_->state_names(), opt->state_names());
  using Hp = std::vector<std::pair<std::string, double>>;
  EXPECT_EQ(opt->hyperparameters(),
            (Hp{{"beta1", 0.8}, {"beta2", 0.99}, {"eps", 1e-6}, {"weight_decay", 0.05}}));
  // Round trip: what hyperparameters() reports, set_hyperparameter accepts.
  auto other_store = make_store(*backend_);
  auto other = make_optimizer(OptimizerKind::kAdamW, *other_store, OptimizerOptions{});
  for (const auto& [name, value] : opt->hyperparameters()) other->set_hyperparameter(name, value);
  EXPECT_EQ(other->hyperparameters(), opt->hyperparameters());
  opt->set_hyperparameter("weight_decay", 0.2);
  EXPECT_EQ(opt->hyperparameters()[3].second, 0.2);
  EXPECT_THROW(opt->set_hyperparameter("momentum", 0.9), Error);
  EXPECT_THROW(opt->set_hyperparameter("beta1", 1.0), Error);
  EXPECT_THROW(opt->set_hyperparameter("beta2", -0.1), Error);
  EXPECT_THROW(opt->set_hyperparameter("eps", std::nan("")), Error);
  EXPECT_THROW(opt->set_hyperparameter("weight_decay", -1.0), Error);
}

TEST_F(OptimizerTest, SgdHyperparameters) {
  auto opt =
      make_optimizer(OptimizerKind::kSgd, *store_, OptimizerOptions{0.9, 0.95, 1e-8, 1e-4, 0.8});
  EXPECT_EQ(opt->type(), "sgd");
  EXPECT_EQ(opt->state_names(), std::vector<std::string>{"momentum_buffer"});
  using Hp = std::vector<std::pair<std::string, double>>;
  EXPECT_EQ(opt->hyperparameters(), (Hp{{"momentum", 0.8}, {"weight_decay", 1e-4}}));
  opt->set_hyperparameter("momentum", 0.5);
  EXPECT_EQ(opt->hyperparameters()[0].second, 0.5);
  EXPECT_THROW(opt->set_hyperparameter("beta1", 0.9), Error);
  EXPECT_THROW(opt->set_hyperparameter("momentum", -0.5), Error);
}

// An unknown optimizer name is refused where names are parsed (train's options: the bad-input
// test's --optimizer lamb); the one rule of each hyper-parameter names its option.
TEST(Hyperparameters, OneRuleEachNamingTheOption) {
  const auto message = [](const char* key, double value) -> std::string {
    try {
      check_hyperparameter(key, value);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(message("lr", 0.0), "--lr must be in (0, 10] (got 0)");
  // Finite but far beyond any recipe: one step would take the weights to infinity.
  EXPECT_EQ(message("lr", 1e308), "--lr must be in (0, 10] (got 1e+308)");
  EXPECT_EQ(message("eps", 0.0), "--eps must be in (0, 1] (got 0)");
  EXPECT_EQ(message("min_lr", -1.0), "--min-lr must be in [0, 10] (got -1)");
  EXPECT_EQ(message("grad_clip", -1.0), "--grad-clip must be in [0, 1e+06] (got -1)");
  EXPECT_EQ(message("weight_decay", 2.0), "--weight-decay must be in [0, 1] (got 2)");
  EXPECT_EQ(message("momentum", 1.0), "--momentum must be in [0, 1) (got 1)");
  EXPECT_EQ(message("weight_decay", std::nan("")),
            "--weight-decay must be a finite number (got nan)");
  EXPECT_EQ(message("beta2", 0.999), "");
  EXPECT_EQ(message("min_lr", 0.0), "");
}

TEST_F(OptimizerTest, FactoryAndMisuse) {
  EXPECT_THROW(AdamW(*store_, 1.5, 0.999, 1e-8, 0.0), Error);
  auto opt = make_optimizer(OptimizerKind::kSgd, *store_, OptimizerOptions{});
  EXPECT_THROW(make_optimizer(OptimizerKind::kSgd, *store_, OptimizerOptions{}),
               Error);  // state added twice
  auto other_store = make_store(*backend_);
  EXPECT_THROW(opt->step(*other_store, 0.1), Error);
  EXPECT_THROW(opt->step(*store_, std::nan("")), Error);
  EXPECT_THROW(opt->set_step_count(-1), Error);
  EXPECT_EQ(opt->step_count(), 0);
}

// ---- gradient norm and clipping

// A stand-in group of `size` ranks for the norm's two reductions: the other ranks contribute
// `others` to a sum, and each call is logged so the test sees which groups were reduced.
class FakeGroup final : public Communicator {
 public:
  FakeGroup(std::string name, double others, std::vector<std::string>& log)
      : name_(std::move(name)), others_(others), log_(log) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string name() const override { return name_; }
  void all_reduce(float*, int64_t, ReduceOp) override { unexpected("all_reduce(float)"); }
  void all_reduce(double* buf, int64_t count, ReduceOp op) override {
    EXPECT_EQ(count, 1);
    EXPECT_EQ(op, ReduceOp::kSum);
    log_.push_back(name_ + " " + std::to_string(*buf));
    *buf += others_;
  }
  void all_gather(const float*, float*, int64_t) override { unexpected("all_gather"); }
  void reduce_scatter(const float*, float*, int64_t, ReduceOp) override {
    unexpected("reduce_scatter");
  }
  void broadcast(float*, int64_t, int) override { unexpected("broadcast"); }
  void broadcast_bytes(void*, int64_t, int) override { unexpected("broadcast_bytes"); }
  void send(const float*, int64_t, int, int) override { unexpected("send"); }
  void recv(float*, int64_t, int, int) override { unexpected("recv"); }
  std::unique_ptr<Request> isend(const float*, int64_t, int, int) override {
    unexpected("isend");
    return nullptr;
  }
  std::unique_ptr<Request> irecv(float*, int64_t, int, int) override {
    unexpected("irecv");
    return nullptr;
  }
  std::unique_ptr<Request> iall_reduce(float*, int64_t, ReduceOp) override {
    unexpected("iall_reduce");
    return nullptr;
  }
  std::unique_ptr<Request> iall_gather(const float*, float*, int64_t) override {
    unexpected("iall_gather");
    return nullptr;
  }
  std::unique_ptr<Request> ireduce_scatter(const float*, float*, int64_t, ReduceOp) override {
    unexpected("ireduce_scatter");
    return nullptr;
  }
  std::unique_ptr<Request> iall_reduce_bf16(uint16_t*, int64_t) override {
    unexpected("iall_reduce_bf16");
    return nullptr;
  }
  std::unique_ptr<Request> iall_gather_bf16(const uint16_t*, uint16_t*, int64_t) override {
    unexpected("iall_gather_bf16");
    return nullptr;
  }
  std::unique_ptr<Request> ireduce_scatter_bf16(const uint16_t*, uint16_t*, int64_t) override {
    unexpected("ireduce_scatter_bf16");
    return nullptr;
  }
  void barrier() override { unexpected("barrier"); }
  MPI_Comm mpi_comm() const override { return MPI_COMM_SELF; }

 private:
  void unexpected(const char* what) { ADD_FAILURE() << "gradient norm called " << what; }
  std::string name_;
  double others_;
  std::vector<std::string>& log_;
};

// Three parameters: one split across tp (every rank counts its block), one tp-replicated (only
// tp rank 0 counts it) and the last stage's tied wte (never counted).
std::unique_ptr<ParameterStore> make_norm_store(Backend& backend) {
  auto store = std::make_unique<ParameterStore>(backend);
  auto add = [&](const char* name, int64_t n, bool replicated, bool tied) {
    ParameterSpec spec;
    spec.name = name;
    spec.shape = {n};
    spec.local_numel = n;
    spec.slabs = {Slab{{0}, {n}, 0}};
    spec.tp_replicated = replicated;
    spec.tied_copy = tied;
    store->add(std::move(spec));
  };
  add("split", 2, false, false);
  add("ln.weight", 2, true, false);
  add("wte", 1, false, true);
  add("split2", 1, false, false);
  store->allocate();
  backend.copy_from_host(store->grads(), std::vector<float>{3, 4, 1, 2, 10, 2}.data(),
                         6 * sizeof(float));
  return store;
}

TEST(GradClip, LocalSumCountsEachParameterOnce) {
  auto backend = make_cpu_backend(1);
  auto store = make_norm_store(*backend);
  EXPECT_DOUBLE_EQ(local_grad_sum_squares(*store, 0), 9 + 16 + 1 + 4 + 4);  // tied wte left out
  EXPECT_DOUBLE_EQ(local_grad_sum_squares(*store, 1), 9 + 16 + 4);          // replicated too
}

TEST(GradClip, GlobalNormReducesOverTpThenPp) {
  auto backend = make_cpu_backend(1);
  auto store = make_norm_store(*backend);
  std::vector<std::string> log;
  FakeGroup tp("tp", 70.0 - 34.0, log), pp("pp", 144.0 - 70.0, log);
  EXPECT_DOUBLE_EQ(global_grad_norm(*store, 0, tp, pp), 12.0);  // sqrt(34 + 36 + 74)
  EXPECT_EQ(log,
            (std::vector<std::string>{"tp " + std::to_string(34.0), "pp " + std::to_string(70.0)}));
}

// Every factorisation of the job into (tp, dp, pp): each rank's gradients depend on its tp rank
// and stage only (dp replicas agree after the dp reduction), and the norm every rank gets is the
// closed form over the tp x pp model, with replicated and tied parameters counted once.
TEST(GradClip, GlobalNormOverEveryGrid) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  auto backend = make_cpu_backend(1);
  for (int tp = 1; tp <= world; ++tp) {
    for (int pp = 1; pp <= world / tp; ++pp) {
      if (world % (tp * pp) != 0) continue;
      GridOptions options;
      options.shape = GridShape{tp, world / (tp * pp), pp};
      ProcessGrid grid(MPI_COMM_WORLD, options);
      const int t = grid.tp_rank(), s = grid.stage();
      ParameterStore store(*backend);
      auto add = [&](const char* name, bool replicated, bool tied) {
        ParameterSpec spec;
        spec.name = name;
        spec.shape = {2};
        spec.local_numel = 2;
        spec.slabs = {Slab{{0}, {2}, 0}};
        spec.tp_replicated = replicated;
        spec.tied_copy = tied;
        store.add(std::move(spec));
      };
      add("split", false, false);     // grads (t+1, s+1): a different block on every tp rank
      add("ln.weight", true, false);  // (s+0.5, 0): the same on every tp rank
      if (grid.is_first_stage() || grid.is_last_stage())
        add("wte", false, pp > 1 && grid.is_last_stage());  // (t+2, 0) on both stages
      store.allocate();
      std::vector<float> g = {float(t + 1), float(s + 1), float(s + 0.5), 0.0f, float(t + 2), 0.0f};
      g.resize(static_cast<size_t>(store.total_numel()));
      backend->copy_from_host(store.grads(), g.data(), g.size() * sizeof(float));

      double expected = 0.0;
      for (int ti = 0; ti < tp; ++ti) {
        expected += (ti + 2.0) * (ti + 2.0);  // the first stage's wte only
        for (int si = 0; si < pp; ++si)
          expected += (ti + 1.0) * (ti + 1.0) + (si + 1.0) * (si + 1.0);
      }
      for (int si = 0; si < pp; ++si) expected += (si + 0.5) * (si + 0.5);
      EXPECT_NEAR(global_grad_norm(store, grid), std::sqrt(expected), 1e-12 * std::sqrt(expected))
          << "tp " << tp << " dp " << world / (tp * pp) << " pp " << pp;
    }
  }
}

TEST(GradClip, ClipCoefficient) {
  EXPECT_DOUBLE_EQ(clip_coefficient(12.0, 1.0), 1.0 / (12.0 + 1e-6));
  EXPECT_DOUBLE_EQ(clip_coefficient(0.5, 1.0), 1.0);
  // At exactly max_norm torch still scales by 1/(1 + 1e-6).
  EXPECT_DOUBLE_EQ(clip_coefficient(1.0, 1.0), 1.0 / (1.0 + 1e-6));
  EXPECT_LT(clip_coefficient(1.0, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(clip_coefficient(0.0, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(clip_coefficient(1e9, 0.0), 1.0);  // off
  EXPECT_DOUBLE_EQ(clip_coefficient(std::nan(""), 0.0), 1.0);
  EXPECT_THROW(clip_coefficient(std::nan(""), 1.0), Error);
  EXPECT_THROW(clip_coefficient(1.0, -1.0), Error);
}

TEST(GradClip, ScaleGradsIsExact) {
  auto backend = make_cpu_backend(1);
  auto store = make_norm_store(*backend);
  std::vector<float> before = download(*backend, store->grads(), store->total_numel());
  const double coef = clip_coefficient(12.0, 1.0);
  scale_grads(*store, coef);
  std::vector<float> after = download(*backend, store->grads(), store->total_numel());
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(after[i], before[i] * static_cast<float>(coef)) << i;
  scale_grads(*store, 1.0);
  EXPECT_EQ(download(*backend, store->grads(), store->total_numel()), after);
}

}  // namespace
}  // namespace gpt
