// Stop requests: SIGTERM, SIGUSR1 (Slurm sends one before the time limit, with
// `--signal=USR1@T`), SIGINT (Ctrl-C) and the SIGCONT with which Open MPI's mpiexec starts ending
// the job when it is sent SIGTERM or Ctrl-C (signals.cpp says how it is told apart) set a flag; the
// trainer agrees on it across ranks at the next step boundary, checkpoints, and exits with
// kExitStopped. A second SIGINT ends the process at once with kExitInterrupted. Before the first
// step there is nothing new to save and start-up may be blocked for long (a collective waiting for
// a slow rank, a file system): a request then ends the process at once with kExitStopped, the
// checkpoint to resume from being the one the run started from (or none); under mpiexec or srun
// --kill-on-bad-exit the launcher then ends the other ranks. A program that takes stop requests
// blocks those signals and SIGTSTP (Ctrl-Z, which the watcher turns into a stop of the process)
// from the first code of the process that runs (GPT_BLOCK_STOP_SIGNALS_AT_START).
#pragma once

namespace gpt {

inline constexpr int kExitStopped = 3;  // a checkpoint for resuming was written
// 128 + SIGINT, what a shell reports for a program that Ctrl-C ended.
inline constexpr int kExitInterrupted = 130;

// Blocks SIGTERM, SIGUSR1, SIGINT, SIGCONT and SIGTSTP in the calling thread; every thread started
// afterwards inherits the block. The signature is that of an ELF pre-initialiser (the arguments are
// unused).
void block_stop_signals(int argc = 0, char** argv = nullptr, char** envp = nullptr);
// Starts the thread that waits for the signals, in start-up mode (a request ends the process).
// `on_stop` is what the log says a request does once running (train: a checkpoint, then exit).
void install_stop_handlers(const char* on_stop = "stopping after this step with a checkpoint");
// Start-up is over: from now on a request is taken at the next step boundary.
void take_stop_requests_at_steps();
bool stop_requested();  // this rank saw a signal

}  // namespace gpt

// Said once at namespace scope in a program's main file: the dynamic loader runs
// block_stop_signals from the executable's .preinit_array, before the constructors of the shared
// libraries (Open MPI, HDF5, oneDNN, Boost, libstdc++) and before main, where the block used to
// be: a signal during those constructors took its default action and ended the rank (exit 138).
// What remains unprotected is the loader mapping and relocating the ~50 libraries, before any
// code of the program runs (docs/OPERATIONS.md, "Running under Slurm", has the measurements).
// Only a program's main file may say this: a pre-initialiser in a library would block the signals
// of every program linking it, also of those that never wait for them.
#define GPT_BLOCK_STOP_SIGNALS_AT_START()                                                 \
  [[gnu::used, gnu::section(".preinit_array")]] static void (*const gpt_block_at_start_)( \
      int, char**, char**) = ::gpt::block_stop_signals
