// Stop requests without an asynchronous signal handler (see signals.h). SIGTERM, SIGUSR1 and
// SIGINT are blocked in the main thread before any library starts a thread (from the ELF
// pre-initialiser, before shared-library constructors), so every thread inherits the block and no
// library call is ever interrupted by them; one watcher thread takes them with sigwait and sets
// the flag. The flag is a static object: it outlives every caller, as the watcher does. With it,
// whether start-up is over: until then the watcher ends the process itself (_exit, since the
// main thread may be inside MPI or a file system call, where no destructor may run under it).
#include "launch/training/signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "framework/logging.h"

namespace gpt {
namespace {

std::atomic<int> g_stop_signal{0};
std::atomic<bool> g_at_steps{false};

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGINT);
  return set;
}

const char* signal_name(int signal_number) {
  switch (signal_number) {
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "SIGINT";
  }
}

}  // namespace

void block_stop_signals(int, char**, char**) {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void install_stop_handlers(const char* on_stop) {
  // A request that arrived during start-up is pending and is taken at once.
  std::thread([on_stop] {
    const sigset_t set = stop_signals();
    int interrupts = 0;
    while (true) {
      int signal_number = 0;
      if (sigwait(&set, &signal_number) != 0) continue;
      const bool first = g_stop_signal.exchange(signal_number) == 0;
      if (!g_at_steps.load()) {
        log::info(std::string(signal_name(signal_number)) +
                  " before the first step: nothing trained to save; ending the job now (exit " +
                  std::to_string(kExitStopped) + ", --resume auto continues where it started)");
        _exit(kExitStopped);
      }
      // Said at once, not only once the checkpoint is written: under mpirun the ranks have a
      // grace period and then SIGKILL (docs/OPERATIONS.md), and the log should show that the
      // request was taken even when the grace was too short for the step and the write.
      if (first)
        log::info0(std::string(signal_name(signal_number)) + ": " + on_stop +
                   (signal_number == SIGINT ? " (Ctrl-C again: quit at once without one)" : ""));
      if (signal_number != SIGINT) continue;
      // Ctrl-C: the first one is a stop request like the others; someone who presses it again
      // does not want to wait for the step and the write. _exit: the other threads are mid-step,
      // no destructor may run under them.
      if (++interrupts > 1) {
        log::error("interrupted again: quitting without a checkpoint");
        _exit(kExitInterrupted);
      }
    }
  }).detach();
}

void take_stop_requests_at_steps() {
  g_at_steps.store(true);
}

bool stop_requested() {
  return g_stop_signal.load() != 0;
}

}  // namespace gpt
