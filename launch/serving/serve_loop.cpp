// serve's step loop (see serve_loop.h).
#include "launch/serving/serve_loop.h"

#include <algorithm>
#include <deque>
#include <exception>
#include <map>

#include "framework/agreement.h"
#include "framework/check.h"
#include "framework/failpoint.h"
#include "framework/logging.h"
#include "framework/rng.h"
#include "launch/inference/prompt_text.h"
#include "launch/inference/sampling.h"
#include "launch/inference/stop_tokens.h"
#include "launch/runtime/signals.h"
#include "launch/serving/completion_api.h"
#include "launch/serving/step_plan.h"

namespace gpt {

namespace {

// Tags of the activations between stages and of the tokens back to rank 0; apart from the
// tags generate and the trainer use.
constexpr int kServeActivationTag = 32766;
constexpr int kServeTokenTag = 32765;

double seconds_between(ServeClock::time_point a, ServeClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The token for each logit row, drawn as generate draws its first sample's tokens.
std::vector<int32_t> sample_rows(const std::vector<std::vector<float>>& logits,
                                 const std::vector<RowSampling>& sampling) {
  GPT_CHECK(logits.size() == sampling.size(), "sampled rows and their options disagree");
  std::vector<int32_t> tokens(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    const RowSampling& s = sampling[i];
    const CounterRng rng(s.seed, "generate");
    const double uniform = static_cast<double>(rng.bits(s.draw) >> 11) * 0x1p-53;
    tokens[i] = static_cast<int32_t>(sample_token(logits[i], s.options, uniform));
  }
  return tokens;
}

// The longest tail of `text` that begins one of the stop strings: a stream holds it back, since
// the next token may complete the stop string, which is never sent.
size_t stop_prefix_tail(const std::string& text, const std::vector<std::string>& stops) {
  size_t tail = 0;
  for (const std::string& stop : stops)
    for (size_t n = std::min(stop.size() - 1, text.size()); n > tail; --n)
      if (text.compare(text.size() - n, n, stop, 0, n) == 0) {
        tail = n;
        break;
      }
  return tail;
}

class Rank0 {
 public:
  Rank0(ServeFront& front, int pp, int sampler, MPI_Comm world)
      : f_(front), pp_(pp), sampler_(sampler), world_(world) {}

  StepPlan next_plan(int64_t step, std::map<int64_t, std::vector<int32_t>>& local_tokens);

 private:
  void take_tokens(int64_t step, std::map<int64_t, std::vector<int32_t>>& local_tokens);
  // Appends the token, updates the request's text; the finish reason, empty while it runs.
  std::string apply_token(ScheduledSequence& s, int32_t token);
  void end_request(ServedRequest& r, const std::string& reason);
  // The request cannot be finished (an exception in its own handling): a 500 for it alone.
  void fail_request(ServedRequest& r, const std::exception& e);
  // Queue, running and cache gauges. Published before a request is answered, so a client that
  // reads /metrics after its answer sees the state without its sequence.
  void publish_state();

  ServeFront& f_;
  int pp_, sampler_;
  MPI_Comm world_;
  bool stopping_ = false, aborted_ = false;
  ServeClock::time_point deadline_;
};

void Rank0::end_request(ServedRequest& r, const std::string& reason) {
  // Counted before the answer is released, so /metrics read after it includes this request.
  f_.metrics.request_finished(reason);
  f_.metrics.latency(seconds_between(r.arrived, ServeClock::now()));
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.done = true;
    if (r.finish_reason.empty()) r.finish_reason = reason;
    r.releasable = r.text.size();
  }
  r.notify();
}

void Rank0::fail_request(ServedRequest& r, const std::exception& e) {
  log::warn0("serve: request " + std::to_string(r.id) + " failed: " + e.what());
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.error_status = 500;
    r.error_message = std::string("the request failed: ") + e.what();
  }
  end_request(r, "error");
}

void Rank0::publish_state() {
  f_.metrics.state(static_cast<int64_t>(f_.scheduler.waiting()),
                   static_cast<int64_t>(f_.scheduler.running()), f_.scheduler.kv_usage());
}

std::string Rank0::apply_token(ScheduledSequence& s, int32_t token) {
  ServedRequest& r = *s.request;
  failpoint("serve.request", r.id);  // tests of a failure in one request's handling
  const CompletionRequest& q = r.request;
  const auto now = ServeClock::now();
  const bool end_of_text = is_stop_token(f_.stop_ids, token);
  s.tokens.push_back(token);
  const int64_t generated = s.generated();
  if (generated == 1) {
    s.first_token = now;
    f_.metrics.first_token(seconds_between(r.arrived, now));
  }
  s.last_token = now;
  f_.metrics.tokens(0, 1);
  std::string text;
  if (!end_of_text) {
    const std::vector<int32_t> tokens(s.tokens.begin() + s.prompt_length, s.tokens.end());
    std::lock_guard<std::mutex> lock(f_.tokenizer_mutex);
    text = continuation_text(f_.tokenizer, q.prompt, tokens);
  }
  std::string reason;
  if (end_of_text) reason = "stop";
  size_t cut = std::string::npos;
  for (const std::string& stop : q.stop) cut = std::min(cut, text.find(stop));
  if (cut != std::string::npos) {
    text.resize(cut);
    reason = "stop";
  }
  if (reason.empty() && generated >= q.max_tokens) reason = "length";
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.completion_tokens = generated;
    if (!end_of_text) r.text = text;
    if (reason.empty()) {
      const size_t whole = complete_utf8_prefix(r.text);
      const size_t held = stop_prefix_tail(r.text.substr(0, whole), q.stop);
      r.releasable = std::max(r.streamed, whole - held);
    }
  }
  r.notify();
  if (!reason.empty() && generated > 1)
    f_.metrics.per_output_token(seconds_between(s.first_token, s.last_token) /
                                static_cast<double>(generated - 1));
  return reason;
}

void Rank0::take_tokens(int64_t step, std::map<int64_t, std::vector<int32_t>>& local_tokens) {
  const int64_t planned = step - pp_;
  std::vector<ScheduledSequence*> sequences = f_.scheduler.take_expected(planned);
  if (sequences.empty()) return;
  std::vector<int32_t> tokens(sequences.size());
  if (sampler_ == 0) {
    auto it = local_tokens.find(planned);
    GPT_CHECK(it != local_tokens.end() && it->second.size() == tokens.size(),
              "the tokens of step " << planned << " are missing");
    tokens = std::move(it->second);
    local_tokens.erase(it);
  } else {
    GPT_MPI_CHECK(MPI_Recv(tokens.data(), static_cast<int>(tokens.size()), MPI_INT32_T, sampler_,
                           kServeTokenTag, world_, MPI_STATUS_IGNORE));
  }
  std::vector<std::pair<std::shared_ptr<ServedRequest>, std::string>> finished;
  for (size_t i = 0; i < sequences.size(); ++i) {
    std::string reason;
    try {
      reason = apply_token(*sequences[i], tokens[i]);
    } catch (const std::exception& e) {
      fail_request(*sequences[i]->request, e);
      f_.scheduler.finish(sequences[i]);
      continue;
    }
    if (reason.empty()) continue;
    finished.emplace_back(sequences[i]->request, std::move(reason));
    f_.scheduler.finish(sequences[i]);  // frees the sequence: its blocks go back first
  }
  if (finished.empty()) return;
  publish_state();
  for (const auto& [request, reason] : finished) end_request(*request, reason);
}

StepPlan Rank0::next_plan(int64_t step, std::map<int64_t, std::vector<int32_t>>& local_tokens) {
  take_tokens(step, local_tokens);
  const std::vector<std::shared_ptr<ServedRequest>> dropped = f_.scheduler.drop_cancelled(step);
  publish_state();
  for (const std::shared_ptr<ServedRequest>& r : dropped) end_request(*r, "abort");
  if (!stopping_ && stop_requested()) {
    stopping_ = true;
    f_.inbox.close();
    deadline_ = ServeClock::now() + std::chrono::duration_cast<ServeClock::duration>(
                                        std::chrono::duration<double>(f_.shutdown_timeout_s));
    log::info0("serve: stop requested; finishing " + std::to_string(f_.scheduler.running()) +
               " running and " + std::to_string(f_.scheduler.waiting()) +
               " waiting requests (at most " + GPT_MSG(f_.shutdown_timeout_s) + " s)");
  }
  if (stopping_ && !aborted_ && ServeClock::now() >= deadline_) {
    aborted_ = true;
    f_.scheduler.cancel_all();
  }
  const bool idle = f_.scheduler.idle() && !f_.scheduler.in_flight();
  // Requests that arrived after the inbox closed were answered 503 there; those taken before
  // still run.
  for (std::shared_ptr<ServedRequest>& r : f_.inbox.take(
           idle && !stopping_ ? std::chrono::milliseconds(50) : std::chrono::milliseconds(0))) {
    f_.metrics.tokens(static_cast<int64_t>(r->request.prompt.size()), 0);
    failpoint("serve.loop", r->id);  // tests of a failure of the loop itself
    try {
      f_.scheduler.add(r);
    } catch (const std::exception& e) {
      fail_request(*r, e);
    }
  }
  if (stopping_ && f_.scheduler.idle() && !f_.scheduler.in_flight()) {
    StepPlan stop;
    stop.kind = StepPlan::Kind::kStop;
    return stop;
  }
  StepPlan plan = f_.scheduler.plan(step);
  f_.inbox.set_held(f_.scheduler.waiting());
  f_.metrics.step(plan.batch.rows());
  publish_state();
  return plan;
}

// The barriers of the heartbeat: every rank joins one on each step whose plan is marked; rank 0
// marks a step only while none of its own is pending, so at most one is in flight there.
class Heartbeats {
 public:
  explicit Heartbeats(MPI_Comm world) : world_(world) {}
  void join() {
    MPI_Request request;
    GPT_MPI_CHECK(MPI_Ibarrier(world_, &request));
    pending_.push_back(request);
  }
  // Drops the completed barriers; whether one completed.
  bool completed() {
    bool any = false;
    while (!pending_.empty()) {
      int done = 0;
      GPT_MPI_CHECK(MPI_Test(&pending_.front(), &done, MPI_STATUS_IGNORE));
      if (!done) break;
      pending_.pop_front();
      any = true;
    }
    return any;
  }
  bool none_pending() const { return pending_.empty(); }
  void finish() {
    for (MPI_Request& request : pending_) GPT_MPI_CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    pending_.clear();
  }

 private:
  MPI_Comm world_;
  std::deque<MPI_Request> pending_;
};

}  // namespace

void run_serve_loop(Runtime& rt, DecodeEngine& engine, ServeFront* front) {
  ProcessGrid& grid = rt.grid();
  MPI_Comm world = grid.world().mpi_comm();
  const int pp = grid.shape().pp, stage = grid.stage();
  const int sampler = grid.rank_of(0, 0, pp - 1);
  const bool samples = comm_rank(world) == sampler;
  std::optional<Rank0> rank0;
  if (front != nullptr) rank0.emplace(*front, pp, sampler, world);
  std::deque<StepPlan> recent;                           // recent[i]: the plan of step - i
  std::map<int64_t, std::vector<int32_t>> local_tokens;  // rank 0 samples itself (pp 1, tp 0)
  Heartbeats heartbeats(world);
  for (int64_t step = 0;; ++step) {
    StepPlan planned;
    if (rank0) {
      if (heartbeats.completed()) front->health.beat();
      planned = rank0->next_plan(step, local_tokens);
      planned.heartbeat = heartbeats.none_pending();
    }
    StepPlan plan = broadcast_plan(world, rank0 ? &planned : nullptr);
    if (plan.heartbeat) heartbeats.join();
    if (!rank0) heartbeats.completed();
    if (plan.kind == StepPlan::Kind::kStop) break;
    recent.push_front(std::move(plan));
    if (static_cast<int>(recent.size()) > pp) recent.pop_back();
    if (static_cast<int>(recent.size()) <= stage) continue;
    const StepPlan& mine = recent[static_cast<size_t>(stage)];
    if (mine.kind != StepPlan::Kind::kRun) continue;
    const std::vector<std::vector<float>> logits = engine.run(mine.batch, kServeActivationTag);
    if (!samples || mine.batch.logit_rows.empty()) continue;
    std::vector<int32_t> tokens = sample_rows(logits, mine.sampling);
    if (sampler == 0) {
      local_tokens[step - stage] = std::move(tokens);
    } else {
      GPT_MPI_CHECK(MPI_Send(tokens.data(), static_cast<int>(tokens.size()), MPI_INT32_T, 0,
                             kServeTokenTag, world));
    }
  }
  heartbeats.finish();
  engine.finish_sends();
}

}  // namespace gpt
