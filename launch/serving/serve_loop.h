// serve's step loop, on every rank: rank 0 plans each step (batch_scheduler.h) and broadcasts it
// (step_plan.h); each stage runs the plan that entered the pipeline `stage` steps ago through the
// decode engine; the last stage's first tp rank samples the rows whose logits were asked for and
// sends the tokens to rank 0, which has them when that group's next turn comes (pp steps later).
// Rank 0 turns tokens into text for the HTTP side (stop strings, the end-of-text token, max_tokens)
// and, on a stop request (SIGTERM), stops taking requests, lets the running ones finish for up to
// the shutdown timeout, aborts the rest, drains the pipeline and has every rank return. A failure
// in one request's own handling (its text cannot be decoded, it cannot be scheduled) fails that
// request alone (500). Every rank joins a barrier on the steps rank 0 marks, one barrier at a
// time: its completion is the heartbeat by which rank 0's HTTP side knows every rank is still
// stepping (serve_health.h).
#pragma once

#include <functional>
#include <mutex>
#include <vector>

#include "framework/text/text_tokenizer.h"
#include "launch/inference/decode_engine.h"
#include "launch/serving/batch_scheduler.h"
#include "launch/serving/serve_health.h"
#include "launch/serving/served_request.h"
#include "launch/serving/serving_metrics.h"

namespace gpt {

// What only rank 0 holds.
struct ServeFront {
  RequestInbox& inbox;
  ServingMetrics& metrics;
  BatchScheduler& scheduler;
  TextTokenizer& tokenizer;
  std::mutex& tokenizer_mutex;    // the HTTP threads tokenize prompts
  std::vector<int32_t> stop_ids;  // tokens that end a completion (launch/inference/stop_tokens.h)
  ServeHealth& health;
  double shutdown_timeout_s = 30.0;
};

// Runs until rank 0 sends the stop plan. front: rank 0's, null elsewhere.
void run_serve_loop(Runtime& rt, DecodeEngine& engine, ServeFront* front);

}  // namespace gpt
