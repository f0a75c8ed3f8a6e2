// The checkpoint folder (docs/DESIGN.md "Checkpoint"): step-%08d.h5 files named by step, the
// `latest` pointer to the newest, keep_last pruning, the temporaries of interrupted writes, and the
// search for the checkpoint to resume from.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace gpt {

// "<dir>/step-00000100.h5".
std::string checkpoint_path(const std::string& dir, int64_t step);

// Removes the temporaries a killed checkpoint write left in dir (step-*.h5.tmp, latest.tmp; never
// taken for checkpoints, but they hold disk space) and returns their names. Call on one rank,
// before this run writes.
std::vector<std::string> remove_interrupted_writes(const std::string& dir);

// The names each checkpoint write uses must take a file: `latest` as a directory fails the rename
// that replaces it after the step was trained, and latest.tmp as anything but a file fails its
// write (a FIFO would block it). Throws a one-line error naming the entry. (A `latest` that is a
// FIFO or a link is replaced by the rename, and --resume auto skips it.) Call on one rank, at
// start-up.
void check_pointer_entries(const std::string& dir);

// The step-*.h5 file names of dir, highest step first.
std::vector<std::string> step_file_names(const std::string& dir);

// Holds an exclusive lock on <dir>/.lock for its lifetime (flock: released when the process ends,
// however it ends): two runs writing one checkpoint folder would delete each other's temporary
// files and prune each other's checkpoints. Throws a one-line error when another run holds it.
// The file is removed when the lock is let go (a killed run leaves it, and the next run takes it
// over): a run that opened it just before may then hold a lock on a removed file, so the lock
// counts only once the locked file is still the one the folder names.
class CheckpointFolderLock {
 public:
  explicit CheckpointFolderLock(const std::string& dir);
  ~CheckpointFolderLock();
  CheckpointFolderLock(const CheckpointFolderLock&) = delete;
  CheckpointFolderLock& operator=(const CheckpointFolderLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

// The newest valid checkpoint in dir, "" if there is none: the one `latest` names, unless a
// valid file of a higher step was written after it (a run killed between writing a checkpoint
// and pointing `latest` at it; the log warns), then step-*.h5 by descending step. Collective over
// comm: each candidate is checked with open_checkpoint. Invalid files are skipped, with their
// reasons appended to skipped (when not null). Where step-*.h5 files exist but none is valid,
// throws a one-line error naming each and why: a fresh start would train over them.
std::string find_latest_checkpoint(const std::string& dir, std::vector<std::string>* skipped,
                                   MPI_Comm comm);

// What a program's --checkpoint names, as a checkpoint file: a checkpoint folder (or its `latest`
// pointer) gives the folder's newest valid checkpoint (find_latest_checkpoint; the files skipped
// and the one taken are logged on rank 0), anything else is returned as given. Collective; throws
// a one-line error for a folder without a valid checkpoint.
std::string resolve_checkpoint_argument(const std::string& given, MPI_Comm comm);

// The folder's part of a write's last phase (write_checkpoint, rank 0 alone); each throws
// gpt::Error on failure.

// fsync of a file, or of a directory (directory = true) so that a rename in it is durable.
void fsync_path(const std::string& path, bool directory);

// Rewrites <dir>/latest to name final_path, by temporary file, fsync and rename.
void point_latest_at(const std::string& dir, const std::string& final_path);

// The step files this process has read back whole, by name, size and modification time, and
// whether each was valid (every crc32): keep_last pruning then verifies each older checkpoint
// once, not at every save, and warns about an invalid one once. One per checkpoint folder a
// process writes to (the trainer's).
class VerifiedCheckpoints {
 public:
  // Whether `path` verifies: remembered, or read back now (rank 0 alone: every byte, serially).
  bool verifies(const std::string& path);

 private:
  std::map<std::tuple<std::string, uintmax_t, int64_t>, bool> files_;
};

// With keep_last > 0, removes the step files beyond the newest keep_last that verify (structure
// and every crc32). A file that does not verify is not counted, and is left for the user to
// look at (a warning names it): a checkpoint with one corrupt tensor must not push valid ones
// out. Beyond the count, files are removed unless they are not even complete checkpoints. The
// file just written is kept even when older-numbered than others (a run resumed from an earlier
// checkpoint): `latest` names it. `verified` (null: none) remembers what was read back.
void remove_beyond_keep_last(const std::string& dir, const std::string& final_path, int keep_last,
                             VerifiedCheckpoints* verified = nullptr);

}  // namespace gpt
