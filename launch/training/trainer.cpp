// The training loop (see trainer.h).
#include "launch/training/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "framework/agreement.h"
#include "framework/check.h"
#include "framework/failpoint.h"
#include "framework/families/model_family.h"
#include "framework/io/checkpoint_writer.h"
#include "framework/json.h"
#include "framework/logging.h"
#include "framework/timer.h"
#include "launch/runtime/evaluation.h"
#include "launch/runtime/signals.h"
#include "launch/training/trace.h"
#include "layers/embedding.h"
#include "optimizers/grad_clip.h"
#include "parallel/layer_sizes.h"

namespace gpt {
namespace {

constexpr int kMaxConsecutiveSkips = 5;

// Seconds as H:MM:SS, or M:SS under an hour.
std::string clock_text(double seconds) {
  const long long s = std::isfinite(seconds) && seconds > 0 ? std::llround(seconds) : 0;
  char text[32];
  if (s >= 3600) {
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  } else {
    std::snprintf(text, sizeof text, "%lld:%02lld", s / 60, s % 60);
  }
  return text;
}

// The passes the schedule's own bubble share assumes: F = B-input = W. Where a block past the
// first stage runs its weight half inside its input half (weight_half_at_once: under bf16 in a
// whole B), the input gradient goes back after both: B-input 2, W 0.
ActionCosts equal_passes(const Schedule& schedule, Precision precision) {
  const ChunkRecompute rc{.split_backward = schedule.splits_backward()};
  if (!weight_half_at_once(rc, false, precision == Precision::kBf16, 0)) return {};
  return {.forward = 1, .backward_input = 2, .backward_weight = 0, .comm = 0, .rendezvous = true};
}

}  // namespace

Trainer::Trainer(const TrainOptions& options, Runtime& rt, const TokenDataset& train,
                 const TokenDataset* validation, Optimizer& optimizer, TrainState state,
                 std::string config_json, MetricsWriter& metrics)
    : options_(options),
      rt_(rt),
      train_(train),
      validation_(validation),
      optimizer_(optimizer),
      state_(state),
      config_json_(std::move(config_json)),
      lr_schedule_{options.lr, options.min_lr, options.warmup_steps, options.steps},
      metrics_(metrics),
      dp_buckets_(rt.store(), rt.grid().dp(), rt.bucket_plan(), options.layout.grad_reduce_dtype),
      schedule_(rt.schedule()),
      theoretical_bubble_(
          simulate(schedule_, equal_passes(schedule_, rt.store().backend().precision()))
              .bubble_fraction),
      executor_(rt.grid().pp(), options.layout.virtual_stages),
      chunks_(rt.pipeline_chunks()) {
  for (ModelChunk& chunk : chunks_) chunk_pointers_.push_back(&chunk);
  rt_.tp().set_overlap_comm(options.overlap_tp_comm);
}

// This dp rank's share [r G/dp, (r+1) G/dp) of the step's samples (docs/DESIGN.md "Data").
Trainer::StepBatch Trainer::read_step_batch() const {
  const int64_t T = rt_.model().seq_len, B = rt_.stage().micro_batch();
  const int64_t per_rank = options_.global_batch_size / rt_.grid().shape().dp;
  const int64_t windows = train_.num_windows(T);
  StepBatch batch;
  batch.microbatches = per_rank / B;
  batch.tokens.resize(static_cast<size_t>(per_rank * T));
  batch.targets.resize(batch.tokens.size());
  const int64_t first_sample = state_.consumed_samples + rt_.grid().dp_rank() * per_rank;
  if (!rank_reads_data(rt_)) return batch;  // a middle stage: its batch is never read
  for (int64_t i = 0; i < per_rank; ++i) {
    const int64_t window =
        sample_window(first_sample + i, windows, options_.data_order, options_.seed);
    read_window(train_, window, T, batch.tokens.data() + i * T, batch.targets.data() + i * T);
  }
  return batch;
}

// The schedule's forwards and backwards over the batch, then the gradients summed over dp (the
// buckets posted during the backward) and over the tied wte copies. Returns this rank's sum of
// token losses (the last stage's; 0 elsewhere).
double Trainer::forward_backward(const StepBatch& batch, StepStats& stats) {
  ProcessGrid& grid = rt_.grid();
  const int64_t T = rt_.model().seq_len, B = rt_.stage().micro_batch();
  // Each microbatch's mean loss is scaled by 1/(microbatches * dp): the step's gradient is that
  // of the mean over all G*T targets.
  const float loss_scale = 1.0f / static_cast<float>(B * T * batch.microbatches * grid.shape().dp);
  MicrobatchData data{batch.tokens.data(),
                      batch.targets.data(),
                      static_cast<int>(batch.microbatches),
                      loss_scale,
                      {}};
  dp_buckets_.begin_step();
  // Each chunk's final weight passes hand its finished parameters to the dp buckets.
  auto ready = [this](size_t first, size_t end) { dp_buckets_.mark_ready(first, end); };
  // Each layer's forward first waits for its parameters' gather, if the last update's is still
  // in flight. Host time: with NCCL the wait is an event the compute stream waits on.
  param_gather_wait_s_ = 0.0;
  auto needed = [this](size_t first, size_t end) {
    if (!dp_buckets_.gathering()) return;
    ScopedTimer timer(param_gather_wait_s_);
    dp_buckets_.wait_gathered(first, end);
  };
  for (ModelChunk& chunk : chunks_) chunk.begin(&data, ready, needed);
  const PipelineStats pipeline = executor_.run(schedule_, chunk_pointers_);
  stats.dp_comm_s += param_gather_wait_s_;
  stats.pp_wait_s = pipeline.wait_s;
  stats.peak_caches = pipeline.peak_caches;
  double loss_sum = 0.0;
  for (const ModelChunk& chunk : chunks_)
    if (chunk.has_head()) loss_sum += chunk.loss_sum();
  {  // Gradients: sum over dp replicas (each already scaled by 1/dp), then the tied wte copies.
    ScopedTimer timer(stats.dp_comm_s, &rt_.backend());
    dp_buckets_.finish();
  }
  // Summed over tp after dp: the buckets above must not be in flight over the same memory.
  rt_.stage().reduce_partial_tp_grads();
  Communicator* embedding = describe(rt_.model()).tied_head ? grid.embedding() : nullptr;
  if (embedding != nullptr) {
    // Under the distributed optimizer, this rank's shard of wte: wte's own bucket gives it the
    // same elements on both stages. A gradient reduction like the dp one, timed with it: it is
    // no part of the pipeline's wait.
    ParameterStore& store = rt_.store();
    const Parameter* wte =
        store.find(family_of(rt_.model()).edge_parameters(rt_.model()).token_embedding);
    ScopedTimer timer(stats.dp_comm_s, &rt_.backend());
    for (const StatePiece& piece : store.state_pieces(*wte))
      embedding->all_reduce(store.update_grads() + piece.state_offset, piece.numel, ReduceOp::kSum);
  }
  return loss_sum;
}

// Clipping and the optimizer step, or no update where the loss or the gradient norm is not finite
// (both are the same on every rank, so every rank skips, or stops, alike).
void Trainer::apply_update(StepStats& stats) {
  ParameterStore& store = rt_.store();
  stats.grad_norm = global_grad_norm(store, rt_.grid());
  stats.lr = lr_schedule_.at(stats.step);
  last_step_finite_ = std::isfinite(stats.grad_norm) && std::isfinite(stats.loss);
  if (!last_step_finite_) {
    stats.skipped = true;
    ++consecutive_skips_;
    GPT_WARN0("step " << stats.step << ": loss " << stats.loss << ", gradient norm "
                      << stats.grad_norm << "; update skipped (" << consecutive_skips_
                      << " in a row)");
    if (consecutive_skips_ >= kMaxConsecutiveSkips)
      throw AgreedError(GPT_MSG("training diverged: the loss or gradient norm was not finite in "
                                << consecutive_skips_ << " steps in a row (to step " << stats.step
                                << "); no checkpoint written (lower --lr, or resume from an "
                                   "earlier checkpoint)"));
    return;
  }
  consecutive_skips_ = 0;
  if (options_.grad_clip > 0)
    scale_grads(store, clip_coefficient(stats.grad_norm, options_.grad_clip));
  optimizer_.step(store, stats.lr);
  if (dp_buckets_.sharded()) {  // every replica takes the shards the others updated
    ScopedTimer timer(stats.dp_comm_s, &rt_.backend());
    dp_buckets_.post_gather();
    if (!options_.overlap_param_gather) dp_buckets_.wait_all_gathered();
  }
}

StepStats Trainer::train_step() {
  ProcessGrid& grid = rt_.grid();
  const int64_t tokens = options_.global_batch_size * rt_.model().seq_len;
  StepStats stats;
  stats.step = state_.step + 1;
  rt_.tp().reset_seconds();
  for (Communicator* c : {&grid.tp(), &grid.dp(), &grid.pp()}) c->reset_bytes_moved();
  const double start = now_seconds();

  rt_.store().zero_grads();
  // A bad token fails on the ranks that read it: every rank learns of it here, not in a later
  // collective the failed rank never joins.
  StepBatch batch;
  agree_on_failure(grid.world().mpi_comm(), [&] { batch = read_step_batch(); });
  const double loss_sum = forward_backward(batch, stats);
  stats.loss = grid.sum_tp_replicated(loss_sum) / static_cast<double>(tokens);
  apply_update(stats);
  rt_.backend().synchronize();
  state_.step = stats.step;
  state_.consumed_samples += options_.global_batch_size;

  stats.step_time_s = now_seconds() - start;
  stats.tp_comm_s = rt_.tp().seconds();
  stats.compute_s = stats.step_time_s - stats.tp_comm_s - stats.dp_comm_s - stats.pp_wait_s;
  stats.tp_bytes = grid.tp().bytes_moved();
  stats.dp_bytes = grid.dp().bytes_moved();
  stats.pp_bytes = grid.pp().bytes_moved();
  return stats;
}

void Trainer::log_step(const StepStats& s) {
  const double tokens = static_cast<double>(options_.global_batch_size * rt_.model().seq_len);
  const double tokens_per_s = tokens / s.step_time_s;
  const double gflops = rt_.model().flops_per_token() * tokens_per_s / 1e9;
  const Json line = {{"step", s.step},
                     {"loss", s.loss},
                     {"lr", s.lr},
                     {"grad_norm", s.grad_norm},
                     {"tokens_per_s", tokens_per_s},
                     {"gflops", gflops},
                     {"step_time_s", s.step_time_s},
                     {"compute_s", s.compute_s},
                     {"tp_comm_s", s.tp_comm_s},
                     {"dp_comm_s", s.dp_comm_s},
                     {"pp_wait_s", s.pp_wait_s},
                     {"tp_bytes", s.tp_bytes},
                     {"dp_bytes", s.dp_bytes},
                     {"pp_bytes", s.pp_bytes},
                     {"peak_caches", s.peak_caches},
                     {"mem_peak_bytes", rt_.backend().memory().peak_total()},
                     {"skipped", s.skipped}};
  metrics_.write(line);
  last_step_s_ = s.step_time_s;
  interval_loss_sum_ += s.loss;
  ++interval_steps_;
  // After the second step (the first one warms up), a long run says so once.
  if (s.step == loop_first_step_ + 2 && s.step < options_.steps) {
    const double per_step = s.step_time_s;
    const double rest = per_step * static_cast<double>(options_.steps - s.step);
    if (rest > 3600)
      GPT_WARN0("at " << std::lround(1e3 * per_step) << " ms a step, the remaining "
                      << options_.steps - s.step << " steps take about " << clock_text(rest)
                      << " (H:MM:SS; --steps sets the length)");
  }
  if (s.step % options_.log_every != 0 && s.step != options_.steps) return;
  // Elapsed and remaining time at this process's pace so far, evaluations and saves included.
  const double elapsed = now_seconds() - loop_start_s_;
  const double remaining = elapsed / static_cast<double>(s.step - loop_first_step_) *
                           static_cast<double>(options_.steps - s.step);
  char text[400];
  int length = std::snprintf(
      text, sizeof text,
      "step %lld/%lld | loss %.4f (avg %.4f) | lr %.2e | gnorm %.3f | %.0f ms | %.0f tok/s | "
      "elapsed %s | ETA %s%s",
      static_cast<long long>(s.step), static_cast<long long>(options_.steps), s.loss,
      interval_loss_sum_ / static_cast<double>(interval_steps_), s.lr, s.grad_norm,
      1e3 * s.step_time_s, tokens_per_s, clock_text(elapsed).c_str(), clock_text(remaining).c_str(),
      s.skipped ? " | skipped" : "");
  interval_loss_sum_ = 0.0;
  interval_steps_ = 0;
  if (options_.log_detail && length > 0 && length < static_cast<int>(sizeof text)) {
    auto megabytes = [](int64_t bytes) { return static_cast<double>(bytes) / 1e6; };
    std::snprintf(text + length, sizeof text - static_cast<size_t>(length),
                  " | %.1f GFLOP/s | compute %.1f ms | tp %.1f ms %.2f MB | dp %.1f ms %.2f MB | "
                  "pp wait %.1f ms (%.0f%%, schedule %.0f%%) %.2f MB, %d caches",
                  gflops, 1e3 * s.compute_s, 1e3 * s.tp_comm_s, megabytes(s.tp_bytes),
                  1e3 * s.dp_comm_s, megabytes(s.dp_bytes), 1e3 * s.pp_wait_s,
                  100.0 * s.pp_wait_s / s.step_time_s, 100.0 * theoretical_bubble_,
                  megabytes(s.pp_bytes), s.peak_caches);
  }
  log::info0(text);
}

void Trainer::run_validation() {
  if (validation_ == nullptr) return;
  wait_for_weights();
  const EvalResult r = evaluate(rt_, *validation_, options_.eval_windows);
  char text[160];
  std::snprintf(text, sizeof text, "step %5lld | val loss %.4f | val ppl %.3f (%lld windows)",
                static_cast<long long>(state_.step), r.loss, std::exp(r.loss),
                static_cast<long long>(r.windows));
  log::info0(text);
  metrics_.write(Json{{"step", state_.step}, {"val_loss", r.loss}});
}

std::string Trainer::save_checkpoint() {
  ProcessGrid& grid = rt_.grid();
  // A reduction over each of this rank's weights (not the padding between them) and one
  // collective: cheap beside the write.
  ParameterStore& store = rt_.store();
  wait_for_weights();
  double sum_squares = 0.0;
  for (const Parameter& p : store.params())
    sum_squares += rt_.backend().sum_squares(p.value, p.local_numel);
  double diverged = last_step_finite_ && std::isfinite(sum_squares) ? 0.0 : 1.0;
  grid.world().all_reduce(&diverged, 1, ReduceOp::kMax);
  if (diverged > 0)
    throw AgreedError(GPT_MSG("training diverged: at step "
                              << state_.step
                              << " the loss, gradients or weights are not finite; no checkpoint "
                                 "written (lower --lr, or resume from an earlier checkpoint)"));
  CheckpointMeta meta;
  meta.step = state_.step;
  meta.consumed_samples = state_.consumed_samples;
  meta.seed = options_.seed;
  meta.config_json = config_json_;
  meta.tokenizer = train_.tokenizer;
  meta.layout = rt_.layout();
  OptimizerMeta opt;
  opt.type = optimizer_.type();
  opt.hyperparameters = optimizer_.hyperparameters();
  opt.step = optimizer_.step_count();
  opt.state_names = optimizer_.state_names();
  const int tp_rank = grid.tp_rank(), dp_rank = grid.dp_rank();
  // One writer per logical block: dp rank 0, tp rank 0 for replicated tensors, the first
  // stage's wte. Sharded optimizer state: every dp rank writes its own shard of it.
  WriteOwner owner = [tp_rank, dp_rank](const Parameter& p) {
    return dp_rank == 0 && p.counts_once_over_tp_pp(tp_rank);
  };
  WriteOwner state_owner = [tp_rank](const Parameter& p) {
    return p.counts_once_over_tp_pp(tp_rank);
  };
  const bool sharded = store.optimizer_state_sharded();
  // One collective operation on world for the watchdog: a write stuck on the file system, or a
  // rank that never arrives, shows as a wait in it.
  OperationLog::Wait writing(grid.operations(),
                             grid.operations().issue(grid.channel_of_world(), "checkpoint write"));
  const double write_start = now_seconds();
  const std::string path = write_checkpoint(
      options_.checkpoint_dir, meta, &opt, store, owner, grid.world().mpi_comm(),
      options_.keep_last, sharded ? &state_owner : nullptr, nullptr, &verified_checkpoints_);
  const double write_s = now_seconds() - write_start;
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", write_s);
  log::info0("saved checkpoint " + path + " in " + seconds + " s");
  check_stop_grace(write_s);
  return path;
}

void Trainer::check_stop_grace(double write_s) {
  if (stop_grace_checked_) return;
  stop_grace_checked_ = true;
  const char* warning = std::getenv("GPT_WARNING_S");
  if (warning == nullptr || std::getenv("SLURM_JOB_ID") == nullptr) return;
  // slurmctld checks time limits every 30 s, so the warning may come that much late.
  const double grace = std::atof(warning), needed = 30.0 + last_step_s_ + write_s;
  if (needed > grace)
    GPT_WARN0("a stop before the time limit needs about "
              << std::lround(needed) << " s (30 s of slurmctld's interval, a "
              << std::lround(last_step_s_) << " s step, a " << std::lround(write_s)
              << " s checkpoint write) but the warning "
              << "comes " << warning << " s before it: raise GPT_WARNING_S and --signal=B:USR1@T"
              << " (docs/OPERATIONS.md, \"Sizing the grace\")");
}

void Trainer::write_trace_if_asked() {
  if (options_.trace.empty()) return;
  executor_.set_recording(false);
  const int64_t n = write_trace(options_.trace, rt_.grid(), executor_.events(),
                                options_.layout.virtual_stages, schedule_name(schedule_.kind));
  executor_.clear_events();
  log::info0("wrote trace " + options_.trace + " (" + std::to_string(n) + " events)");
}

int Trainer::run() {
  if (state_.step == 0 && options_.steps == 0) {  // --steps 0: the initial weights alone
    save_checkpoint();
    return 0;
  }
  if (state_.step >= options_.steps) {
    GPT_LOG0("the checkpoint is at step " << state_.step << ", --steps is " << options_.steps
                                          << ": nothing to train");
    return 0;
  }
  const int64_t tokens_per_step = options_.global_batch_size * rt_.model().seq_len;
  GPT_LOG0("training " << rt_.model().num_parameters(true) << " parameters, " << rt_.layout()
                       << " on " << rt_.backend().name()
                       << (rt_.transport() ? std::string(", device buffers over ") +
                                                 transport_name(*rt_.transport())
                                           : std::string())
                       << ", " << tokens_per_step << " tokens per step, steps " << state_.step + 1
                       << ".." << options_.steps);
  bool saved_last = false;
  // --trace records steps 2..4 of the run (the first is warm-up); a one-step run records it.
  const int64_t first_step = state_.step + 1;
  const int64_t trace_first = options_.steps > first_step ? first_step + 1 : first_step;
  const int64_t trace_last = std::min<int64_t>(options_.steps, first_step + 3);
  loop_start_s_ = now_seconds();
  loop_first_step_ = state_.step;
  while (state_.step < options_.steps) {
    if (!options_.trace.empty()) {
      const int64_t step = state_.step + 1;
      executor_.set_recording(step >= trace_first && step <= trace_last);
      executor_.set_step(static_cast<int>(step));
    }
    const StepStats stats = train_step();
    log_step(stats);
    failpoint("train.step", state_.step);  // tests that signal a run held at a known step
    saved_last = false;
    if (options_.eval_every > 0 && state_.step % options_.eval_every == 0) run_validation();
    if (options_.save_every > 0 && state_.step % options_.save_every == 0) {
      save_checkpoint();
      saved_last = true;
    }
    // Agree on stop requests at the step boundary: any rank's signal stops all.
    double stop_any = stop_requested() ? 1.0 : 0.0;
    rt_.grid().world().all_reduce(&stop_any, 1, ReduceOp::kMax);
    if (stop_any > 0 && state_.step < options_.steps) {
      if (!saved_last) save_checkpoint();
      write_trace_if_asked();
      log::info0("stop requested: checkpoint written at step " + std::to_string(state_.step) +
                 "; resume with --resume auto");
      return kExitStopped;
    }
  }
  if (options_.eval_every > 0 && state_.step % options_.eval_every != 0) run_validation();
  // Every save waits for the last parameter gather first, so none is left in flight here.
  if (!saved_last) save_checkpoint();
  write_trace_if_asked();
  return 0;
}

}  // namespace gpt
