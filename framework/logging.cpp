// Rank-aware line logger (see logging.h).
#include "framework/logging.h"

#include <atomic>
#include <cstdio>

namespace gpt::log {
namespace {
struct LoggerState {
  int rank = 0;
  int world = 1;
  bool quiet = false;
  std::atomic<std::FILE*> rank0_stream{nullptr};  // set from the signal watcher's thread
};
LoggerState g_logger;  // the one allowed global

void write_line(std::FILE* stream, const std::string& line) {
  std::string text = line + "\n";
  std::fwrite(text.data(), 1, text.size(), stream);
  std::fflush(stream);
}
}  // namespace

void set_rank(int global_rank, int world_size) {
  g_logger.rank = global_rank;
  g_logger.world = world_size;
}
int rank() {
  return g_logger.rank;
}
void set_quiet(bool quiet) {
  g_logger.quiet = quiet;
}

void send_rank0_lines_to(std::FILE* stream) {
  g_logger.rank0_stream = stream;
}

void info0(const std::string& line) {
  std::FILE* redirected = g_logger.rank0_stream.load();
  if (g_logger.rank == 0 && !g_logger.quiet) write_line(redirected ? redirected : stdout, line);
}
void info(const std::string& line) {
  if (g_logger.quiet) return;
  write_line(stdout,
             g_logger.world > 1 ? "[rank " + std::to_string(g_logger.rank) + "] " + line : line);
}
void warn0(const std::string& line) {
  std::FILE* redirected = g_logger.rank0_stream.load();
  if (g_logger.rank == 0) write_line(redirected ? redirected : stderr, "warning: " + line);
}
void error(const std::string& line) {
  write_line(stderr, "error: " + line);
}

}  // namespace gpt::log
