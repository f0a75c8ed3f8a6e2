// Serialising and broadcasting serve's step plans (see step_plan.h). The plan goes between ranks
// of one job as a flat array of 64-bit words: its size first, then the words.
#include "launch/serving/step_plan.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "framework/check.h"

namespace gpt {

namespace {

class Words {
 public:
  std::vector<int64_t> data;
  size_t next = 0;
  void put(int64_t v) { data.push_back(v); }
  void put_double(double v) {
    int64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(bits));
    put(bits);
  }
  template <typename T>
  void put_list(const std::vector<T>& list) {
    put(static_cast<int64_t>(list.size()));
    for (T v : list) put(static_cast<int64_t>(v));
  }
  int64_t get() {
    GPT_CHECK(next < data.size(), "a step plan ends early");
    return data[next++];
  }
  double get_double() {
    const int64_t bits = get();
    double v = 0;
    std::memcpy(&v, &bits, sizeof(v));
    return v;
  }
  template <typename T>
  std::vector<T> get_list() {
    const int64_t n = get();
    GPT_CHECK(n >= 0 && static_cast<size_t>(n) <= data.size() - next,
              "a step plan's list of " << n);
    std::vector<T> list(static_cast<size_t>(n));
    for (T& v : list) v = static_cast<T>(get());
    return list;
  }
};

Words encode(const StepPlan& plan) {
  Words w;
  w.put(static_cast<int64_t>(plan.kind));
  w.put(plan.heartbeat ? 1 : 0);
  w.put_list(plan.batch.tokens);
  w.put_list(plan.batch.positions);
  w.put_list(plan.batch.slots);
  w.put_list(plan.batch.block_tables);
  w.put_list(plan.batch.logit_rows);
  w.put(static_cast<int64_t>(plan.sampling.size()));
  for (const RowSampling& s : plan.sampling) {
    w.put_double(s.options.temperature);
    w.put(s.options.top_k);
    w.put_double(s.options.top_p);
    w.put(static_cast<int64_t>(s.seed));
    w.put(static_cast<int64_t>(s.draw));
  }
  return w;
}

StepPlan decode(Words& w) {
  StepPlan plan;
  plan.kind = static_cast<StepPlan::Kind>(w.get());
  plan.heartbeat = w.get() != 0;
  plan.batch.tokens = w.get_list<int32_t>();
  plan.batch.positions = w.get_list<int32_t>();
  plan.batch.slots = w.get_list<int32_t>();
  plan.batch.block_tables = w.get_list<int32_t>();
  plan.batch.logit_rows = w.get_list<int32_t>();
  const int64_t n = w.get();
  GPT_CHECK(n >= 0 && n <= static_cast<int64_t>(w.data.size()), "a step plan's rows");
  plan.sampling.resize(static_cast<size_t>(n));
  for (RowSampling& s : plan.sampling) {
    s.options.temperature = w.get_double();
    s.options.top_k = w.get();
    s.options.top_p = w.get_double();
    s.seed = static_cast<uint64_t>(w.get());
    s.draw = static_cast<uint64_t>(w.get());
  }
  return plan;
}

// MPI_Ibcast, then waiting for it: spinning for a moment (a busy server's next plan comes at
// once), then sleeping between tests.
void broadcast_words(MPI_Comm world, int64_t* words, int64_t count) {
  MPI_Request request;
  GPT_MPI_CHECK(MPI_Ibcast(words, static_cast<int>(count), MPI_INT64_T, 0, world, &request));
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    int done = 0;
    GPT_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    if (std::chrono::steady_clock::now() - start > std::chrono::milliseconds(2))
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace

StepPlan broadcast_plan(MPI_Comm world, const StepPlan* plan) {
  Words w;
  if (plan != nullptr) w = encode(*plan);
  int64_t size = static_cast<int64_t>(w.data.size());
  broadcast_words(world, &size, 1);
  GPT_CHECK(size >= 1 && size < (int64_t{1} << 30), "a step plan of " << size << " words");
  w.data.resize(static_cast<size_t>(size));
  broadcast_words(world, w.data.data(), size);
  if (plan != nullptr) return *plan;
  return decode(w);
}

}  // namespace gpt
