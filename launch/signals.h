// Stop requests: SIGTERM and SIGUSR1 (Slurm sends one before the time limit, with
// `--signal=USR1@T`) set a flag; the trainer agrees on it across ranks at the next step
// boundary, checkpoints, and exits with kExitStopped.
#pragma once

namespace gpt {

inline constexpr int kExitStopped = 3;  // a checkpoint for resuming was written

void install_stop_handlers();
bool stop_requested();  // this rank saw a signal

}  // namespace gpt
