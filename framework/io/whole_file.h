// Whole files. Writing goes through "<path>.tmp", renamed over path once complete, so the name
// never shows a partial file (the rename is atomic within a file system); on any failure the
// temporary is removed and a one-line error names the path. Reading takes the file at once, and
// only from a regular file (framework/user_files.h).
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>

namespace gpt {

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write,
                           bool binary = true);

// The file's bytes; none when it is not a regular file or cannot be read (the caller names what
// it was for).
std::optional<std::string> read_whole_file(const std::string& path);

}  // namespace gpt
