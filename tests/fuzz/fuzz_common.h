// What every fuzz target checks, and the files it feeds its reader through. The contract: a
// reader of an outside file either succeeds or throws gpt::Error with a message that is one line,
// at most kMaxMessageBytes long and not an internal check's text ("... [expr at file.cpp:12]",
// which means the input reached an invariant instead of a rule). Anything else is a finding and
// aborts the run: another exception type, a crash, a sanitizer report, a hang (-timeout) or an
// allocation past -malloc_limit_mb / -rss_limit_mb.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "framework/check.h"

namespace gpt::fuzz {

// A message names a file or two and a rule; a hostile file's text is quoted in excerpts only.
constexpr size_t kMaxMessageBytes = 600;

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// An internal check's message ends with " [<expression> at <source file>:<line>]".
inline bool internal_check_text(const std::string& message) {
  if (message.empty() || message.back() != ']') return false;
  const size_t open = message.rfind(" [");
  if (open == std::string::npos) return false;
  const std::string tail = message.substr(open);
  return tail.find(" at ") != std::string::npos &&
         (tail.find(".cpp:") != std::string::npos || tail.find(".h:") != std::string::npos);
}

inline void check_message(const std::string& message) {
  if (message.empty()) finding("an error with an empty message");
  if (message.find('\n') != std::string::npos || message.find('\r') != std::string::npos)
    finding("an error message of more than one line: " + message);
  if (message.size() > kMaxMessageBytes)
    finding("an error message of " + std::to_string(message.size()) +
            " bytes: " + message.substr(0, 300) + "...");
  if (internal_check_text(message)) finding("an internal check failed on input: " + message);
}

// Runs the reader: success or a well-formed gpt::Error passes; anything else aborts.
template <typename Read>
void expect_success_or_input_error(Read&& read) {
  try {
    read();
    if (std::getenv("GPT_FUZZ_VERBOSE") != nullptr) std::fprintf(stderr, "read\n");
  } catch (const Error& e) {
    check_message(e.what());
    // GPT_FUZZ_VERBOSE=1: each input's error, for seeing what a corpus exercises.
    if (std::getenv("GPT_FUZZ_VERBOSE") != nullptr)
      std::fprintf(stderr, "input error: %s\n", e.what());
    return;
  } catch (const std::exception& e) {
    finding(std::string("an exception other than gpt::Error: ") + e.what());
  } catch (...) {
    finding("an exception of unknown type");
  }
}

// This process's folder for the files a reader is given ($TMPDIR or /tmp), removed at exit.
inline const std::filesystem::path& work_dir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path d =
        std::filesystem::temp_directory_path() / ("gpt_fuzz_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(work_dir(), ec);
    });
    return d;
  }();
  return dir;
}

// Writes `bytes` to work_dir()/name (replacing it) and returns the path.
inline std::string write_file(const std::string& name, std::string_view bytes) {
  const std::string path = (work_dir() / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// An empty folder work_dir()/name (its previous files removed).
inline std::string fresh_dir(const std::string& name) {
  const std::filesystem::path dir = work_dir() / name;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// Several files in one input, as `head` prints them: each starts with a line "==> NAME <==" and
// runs to the next such line. Names other than the `allowed` ones are dropped; bytes before the
// first header are the first allowed name's.
inline std::vector<std::pair<std::string, std::string>> split_files(
    std::string_view input, const std::vector<std::string>& allowed) {
  std::vector<std::pair<std::string, std::string>> files;
  std::string name = input.starts_with("==> ") ? "" : allowed.front();
  size_t start = 0;
  auto close = [&](size_t end) {
    if (!name.empty()) files.emplace_back(name, std::string(input.substr(start, end - start)));
  };
  size_t pos = 0;
  while ((pos = input.find("==> ", pos)) != std::string_view::npos) {
    if (pos > 0 && input[pos - 1] != '\n') {
      ++pos;
      continue;
    }
    const size_t end = input.find(" <==\n", pos);
    if (end == std::string_view::npos) break;
    close(pos > 0 ? pos - 1 : 0);
    const std::string_view candidate = input.substr(pos + 4, end - pos - 4);
    name.clear();
    for (const std::string& a : allowed)
      if (candidate == a) name = a;
    start = end + 5;
    pos = start;
  }
  close(input.size());
  return files;
}

}  // namespace gpt::fuzz
