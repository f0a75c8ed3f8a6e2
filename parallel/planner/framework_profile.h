// How the framework of a published run executed its step, where Megatron's regime
// (PrecisionRegime::kMegatronMixed) has to follow it to price that run: when the data-parallel
// reduction runs, how weight gradients accumulate over microbatches, and whether pipeline
// exchanges block the stage. docs/PLANNER.md, "Framework profiles", gives the source of each.
// This project's own regimes never read it.
#pragma once

namespace gpt {

struct FrameworkProfile {
  // The data-parallel gradient reduction runs in buckets during the backward (PyTorch's
  // DistributedDataParallel), not after the last microbatch's backward (Megatron-LM's local DDP,
  // DeepSpeed's pipeline engine).
  bool dp_overlapped = false;
  // The input gradient's tp reduction of a column-parallel linear runs beside that linear's
  // weight-gradient product (Megatron-LM from September 2021, Korthikanti et al. 2022 section
  // 4.2.2) instead of before it on the compute stream.
  bool tp_backward_overlapped = true;
  // Bytes moved per parameter, per microbatch after the first, to add a microbatch's weight
  // gradient to the accumulated one outside the product: autograd's in-place fp16 add (read
  // both, write one: 6). 0 where the weight-gradient product accumulates into the fp32 main
  // gradient itself (Megatron-LM's gradient-accumulation fusion, from 2022).
  double grad_accumulation_bytes = 0;
  // A stage's pipeline sends and receives block it until they complete, one after another
  // (DeepSpeed's pipeline engine: a broadcast in a two-rank group each), instead of running
  // beside its compute.
  bool blocking_p2p = false;
  // The pipeline runs DeepSpeed's TrainSchedule in lockstep (lockstep_pipeline.h) instead of
  // the layout's schedule.
  bool lockstep_pipeline = false;

  // Megatron-LM as of Korthikanti et al. 2022: local DDP after the backward, fused gradient
  // accumulation, p2p exchanges beside compute. What `plan` prices in Megatron's regime.
  static FrameworkProfile megatron_2022() { return {false, true, 0, true, false}; }
  // Megatron-LM as of Narayanan et al. 2021 (the SC21 scripts): tp reductions in line,
  // autograd's fp16 accumulation; PyTorch's DDP (`--DDP-impl torch`) or the local one.
  static FrameworkProfile megatron_2021(bool torch_ddp) {
    return {torch_ddp, false, 6, true, false};
  }
  // DeepSpeed's pipeline engine with Megatron-LM's 2021 layers (MT-NLG): gradients reduced
  // after the pipeline, tp reductions in line, fp16 autograd accumulation, blocking exchanges
  // in its lockstep schedule.
  static FrameworkProfile deepspeed_pipeline_2021() { return {false, false, 6, true, true}; }
};

}  // namespace gpt
