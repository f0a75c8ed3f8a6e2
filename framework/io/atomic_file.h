// Writing a file so that its name never shows a partial one: the content goes to "<path>.tmp",
// which is renamed over path once complete; on any failure the temporary is removed and a
// one-line error names the path. The rename is atomic within a file system.
#pragma once

#include <functional>
#include <ostream>
#include <string>

namespace gpt {

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write,
                           bool binary = true);

}  // namespace gpt
