// Signal handlers for stop requests (see signals.h). The flag must be a static object: a signal
// handler can reach nothing else.
#include "launch/signals.h"

#include <csignal>

namespace gpt {
namespace {
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int signal_number) {
  g_stop_signal = signal_number;
}
}  // namespace

void install_stop_handlers() {
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGUSR1, on_stop_signal);
}

bool stop_requested() {
  return g_stop_signal != 0;
}

}  // namespace gpt
