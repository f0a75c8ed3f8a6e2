// Stop requests without an asynchronous signal handler (see signals.h). SIGTERM, SIGUSR1 and
// SIGINT are blocked in the main thread before any library starts a thread (from the ELF
// pre-initialiser, before shared-library constructors), so every thread inherits the block and no
// library call is ever interrupted by them; one watcher thread takes them with sigwait and sets
// the flag. The flag is a static object: it outlives every caller, as the watcher does. With it,
// whether start-up is over: until then the watcher ends the process itself (_exit, since the
// main thread may be inside MPI or a file system call, where no destructor may run under it).
//
// The launcher's stop. Open MPI's mpiexec (4.1) forwards neither SIGTERM nor SIGINT: told to stop
// (SIGTERM, or Ctrl-C), it runs its kill sequence, SIGCONT to every rank at once, SIGTERM
// odls_base_sigkill_timeout (T) seconds later, SIGKILL T seconds after that, and it shows none of
// the ranks' output until it ends (docs/OPERATIONS.md). A SIGCONT sent by the parent, the parent
// being an Open MPI launcher or daemon, that does not end a job-control stop (Ctrl-Z: mpiexec
// forwards SIGTSTP, which the watcher takes and turns into a SIGSTOP of its own), is the first
// step of that sequence: it is taken as a stop request at once, so the ranks have 2T rather than
// T for the step and the checkpoint, and rank 0's lines go from then on to the launcher's own
// stderr, where the user sees them at once.
#include "launch/runtime/signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
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
  sigaddset(&set, SIGCONT);
  sigaddset(&set, SIGTSTP);
  return set;
}

const char* signal_name(int signal_number) {
  switch (signal_number) {
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGCONT:
      return "mpiexec is ending the job (its SIGCONT: it was sent SIGTERM or Ctrl-C)";
    default:
      return "SIGINT";
  }
}

std::string parent_file(const char* name) {
  return "/proc/" + std::to_string(getppid()) + "/" + name;
}

// Open MPI's launchers and daemons: mpiexec, mpirun, orterun, orted (4.x), prterun, prted (5.x).
bool parent_is_mpi_launcher() {
  std::ifstream in(parent_file("comm"));
  std::string comm;
  std::getline(in, comm);
  for (const char* name : {"mpiexec", "mpirun", "orte", "prte", "prted"})
    if (comm.rfind(name, 0) == 0) return true;
  return false;
}

// Rank 0's lines to the launcher's stderr (open until the process ends).
void send_lines_to_launcher() {
  if (log::rank() != 0) return;
  if (std::FILE* stream = std::fopen(parent_file("fd/2").c_str(), "a"))
    log::send_rank0_lines_to(stream);
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
    bool job_control_stopped = false;
    while (true) {
      siginfo_t info{};
      const int signal_number = sigwaitinfo(&set, &info);
      if (signal_number < 0) continue;
      if (signal_number == SIGTSTP) {
        // Ctrl-Z (or mpiexec forwarding it): stop as the default action would; the SIGCONT
        // that resumes the process (fg) is then not a stop request.
        job_control_stopped = true;
        kill(getpid(), SIGSTOP);
        continue;
      }
      if (signal_number == SIGCONT) {
        const bool resumed = job_control_stopped;
        job_control_stopped = false;
        if (resumed || info.si_pid != getppid() || !parent_is_mpi_launcher()) continue;
        send_lines_to_launcher();
      }
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
