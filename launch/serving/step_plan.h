// What every rank of serve does in one step: rank 0 decides it (batch_scheduler.h) and broadcasts
// it; each stage runs the plan that entered the pipeline as many steps ago as its stage index;
// the last stage samples the rows whose logits were asked for with each row's own sampling
// options and draw (the counter RNG's number generate uses for that token), so that a request's
// tokens are the same whatever else was batched with it.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "launch/inference/sampling.h"
#include "layers/decode_rows.h"

namespace gpt {

struct RowSampling {
  SamplingOptions options;
  uint64_t seed = 0;
  uint64_t draw = 0;  // the token's index in its completion
};

struct StepPlan {
  enum class Kind : int32_t { kRun = 0, kIdle = 1, kStop = 2 };
  Kind kind = Kind::kIdle;
  bool heartbeat = false;  // every rank joins a barrier after this step (serve_loop.h)
  DecodeBatch batch;
  std::vector<RowSampling> sampling;  // one per batch.logit_rows
};

// Collective over `world`: rank 0 passes its plan, the others get it. The others wait without
// spinning a core (a test-and-sleep loop), since an idle server's ranks wait here most of the time.
StepPlan broadcast_plan(MPI_Comm world, const StepPlan* plan);

}  // namespace gpt
