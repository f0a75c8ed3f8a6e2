// Whole-file writing and reading (see whole_file.h).
#include "framework/io/whole_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "framework/check.h"
#include "framework/user_files.h"

namespace gpt {

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write,
                           bool binary) {
  const std::string temp = path + ".tmp";
  bool written = false;
  {
    std::ofstream out(temp, binary ? std::ios::binary | std::ios::trunc : std::ios::trunc);
    if (out) {
      write(out);
      out.flush();
      written = out.good();
    }
  }
  std::error_code ec;
  if (written) std::filesystem::rename(temp, path, ec);
  if (!written || ec) {
    const std::string reason = ec ? ec.message() : std::strerror(errno);
    std::filesystem::remove(temp, ec);
    fail_input(GPT_MSG("cannot write " << path << " (" << reason << ")"));
  }
}

std::optional<std::string> read_whole_file(const std::string& path) {
  if (!is_regular_file(path)) return std::nullopt;  // a FIFO would block the read
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return text.str();
}

}  // namespace gpt
