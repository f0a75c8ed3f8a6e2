// The checks of user-named files (see user_files.h).
#include "framework/user_files.h"

#include <filesystem>

#include "framework/check.h"

namespace gpt {

namespace fs = std::filesystem;

namespace {

// What a path that exists but is no regular file is, for messages.
const char* kind_of(fs::file_type type) {
  switch (type) {
    case fs::file_type::directory:
      return "is a directory, not a file";
    case fs::file_type::fifo:
      return "is a FIFO (named pipe), not a regular file";
    case fs::file_type::socket:
      return "is a socket, not a regular file";
    case fs::file_type::character:
    case fs::file_type::block:
      return "is a device, not a regular file";
    default:
      return "is not a regular file";
  }
}

}  // namespace

bool is_regular_file(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

void require_regular_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  const fs::file_type type = fs::status(path, ec).type();
  GPT_INPUT_CHECK(type != fs::file_type::not_found, what << " " << path << ": no such file");
  GPT_INPUT_CHECK(!ec, what << " " << path << ": cannot be read (" << ec.message() << ")");
  GPT_INPUT_CHECK(type == fs::file_type::regular, what << " " << path << ": " << kind_of(type));
}

void require_writable_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  const fs::file_type type = fs::status(path, ec).type();
  if (type == fs::file_type::not_found || type == fs::file_type::regular ||
      type == fs::file_type::character)
    return;
  GPT_INPUT_CHECK(!ec, what << " " << path << ": cannot be checked (" << ec.message() << ")");
  fail_input(GPT_MSG(what << " " << path << ": " << kind_of(type)));
}

}  // namespace gpt
