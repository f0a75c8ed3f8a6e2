// Stop requests without an asynchronous signal handler (see signals.h). SIGTERM and SIGUSR1 are
// blocked in the main thread before any library starts a thread (from the ELF pre-initialiser,
// before shared-library constructors), so every thread inherits the block and no library call is
// ever interrupted by them; one watcher thread takes them with sigwait and sets the flag. The
// flag is a static object: it outlives every caller, as the watcher does.
#include "launch/training/signals.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <thread>

namespace gpt {
namespace {

std::atomic<int> g_stop_signal{0};

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  return set;
}

}  // namespace

void block_stop_signals(int, char**, char**) {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void install_stop_handlers() {
  // A request that arrived during start-up is pending and is taken at once.
  std::thread([] {
    const sigset_t set = stop_signals();
    while (true) {
      int signal_number = 0;
      if (sigwait(&set, &signal_number) == 0) g_stop_signal.store(signal_number);
    }
  }).detach();
}

bool stop_requested() {
  return g_stop_signal.load() != 0;
}

}  // namespace gpt
