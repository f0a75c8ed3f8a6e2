// What a file the user names must be before a program opens it (docs/DESIGN.md "Bad input"): a
// FIFO where a file is expected blocks the open or the read until someone writes to it (the run
// hangs), and a directory reads as an empty file (the run goes on with nothing). Every program
// checks the files it is given here first, so these cases are one-line input errors.
#pragma once

#include <string>

namespace gpt {

// True for a regular file (symbolic links followed); false for anything else or nothing.
bool is_regular_file(const std::string& path);

// A file the program will read (a data set, a config, a checkpoint, a prompt): a one-line input
// error "<what> <path>: ..." unless it is a regular file (missing, a directory, a FIFO, a socket
// or a device).
void require_regular_file(const std::string& path, const std::string& what);

// A file the program will write or append to (--metrics, --trace): absent, a regular file, or a
// character device such as /dev/null; a FIFO (its open waits for a reader), a socket or a
// directory is a one-line input error "<what> <path>: ...".
void require_writable_file(const std::string& path, const std::string& what);

}  // namespace gpt
