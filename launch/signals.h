// Stop requests: SIGTERM and SIGUSR1 (Slurm sends one before the time limit, with
// `--signal=USR1@T`) set a flag; the trainer agrees on it across ranks at the next step
// boundary, checkpoints, and exits with kExitStopped.
#pragma once

namespace gpt {

inline constexpr int kExitStopped = 3;  // a checkpoint for resuming was written

// Call first in main, before MPI_Init: every thread started afterwards inherits the block.
void block_stop_signals();
// Starts the thread that waits for the signals (after start-up, when stopping makes sense).
void install_stop_handlers();
bool stop_requested();  // this rank saw a signal

}  // namespace gpt
