"""A full disk during a checkpoint write: every rank ends within seconds with
one line naming the folder and the error, exit code 1, no step-*.h5.tmp left, and the previous
checkpoint intact and still the one `latest` names. The folder is a small tmpfs mounted here
(skipped, saying why, where mounting is not allowed). Three moments: the disk cannot hold the
tensors (caught before writing), it fills during the tensors' writes, and it fills after them,
in HDF5's metadata (free space between the tensors' size and the file's).

Run: /usr/bin/python3 test_full_disk.py --bin BUILD/bin [--mpiexec PATH --mpiexec-flags "..."]
"""

import hashlib
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import gpt_harness as h  # noqa: E402

# 3.2 M parameters with AdamW: about 37 MiB of tensors per checkpoint, at tp 2 x dp 2.
MODEL = ["--d-model", "256", "--n-layer", "4", "--micro-batch-size", "4", "--tp", "2",
         "--dp", "2", "--save-every", "1"]
NP = 4
TIMEOUT = 60  # a hang fails the test instead of blocking the suite


def free_bytes(path):
    s = os.statvfs(path)
    return s.f_bavail * s.f_frsize


def tensor_bytes(path):
    import h5py
    total = [0]
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: total.__setitem__(0, total[0] + o.size * 4)
                     if isinstance(o, h5py.Dataset) else None)
    return total[0]


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class FullDiskTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="gpt-full-disk-")
        self.mnt = os.path.join(self._tmp.name, "ck")
        os.makedirs(self.mnt)
        mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", self.mnt],
                               capture_output=True, text=True)
        if mount.returncode != 0:
            self._tmp.cleanup()
            self.skipTest("cannot mount a tmpfs (needs root): " + mount.stderr.strip())
        self.addCleanup(self._tmp.cleanup)
        self.addCleanup(subprocess.run, ["umount", "-l", self.mnt], capture_output=True)
        # The previous checkpoint, in the folder before the disk fills.
        h.train(MODEL + ["--steps", "1", "--checkpoint-dir", self.mnt], np=NP, timeout=TIMEOUT)
        self.previous = h.checkpoint_file(self.mnt, 1)
        self.previous_digest = digest(self.previous)
        self.tensors = tensor_bytes(self.previous)

    def fill_leaving(self, leave):
        """Fills the tmpfs so that `leave` bytes stay free."""
        with open(os.path.join(self.mnt, "filler"), "wb") as f:
            f.write(b"\0" * (free_bytes(self.mnt) - leave))

    def assert_clean_failure(self):
        result = h.train(MODEL + ["--steps", "2", "--resume", "auto",
                                  "--checkpoint-dir", self.mnt],
                         np=NP, timeout=TIMEOUT, check=False)
        self.assertEqual(result.returncode, 1, result.describe())
        errors = [line for line in (result.stdout + result.stderr).splitlines()
                  if line.startswith("error:")]
        self.assertEqual(len(errors), 1, result.describe())
        self.assertIn(self.mnt, errors[0])
        self.assertIn("MiB free", errors[0])
        self.assertNotIn("signal", result.stdout + result.stderr, result.describe())
        self.assertLess(result.seconds, 30, result.describe())
        # Nothing else: no temporary, and the run's lock on the folder (.lock) is let go and
        # removed even when the run ends in an error.
        names = sorted(os.listdir(self.mnt))
        self.assertEqual(names, ["filler", "latest", "step-00000001.h5"], result.describe())
        self.assertEqual(h.read_latest(self.mnt), "step-00000001.h5")
        self.assertEqual(digest(self.previous), self.previous_digest)
        return errors[0]

    def test_no_room_for_the_tensors(self):
        self.fill_leaving(self.tensors // 2)
        self.assertIn("no space left on device", self.assert_clean_failure())

    def test_disk_fills_during_the_tensor_writes(self):
        self.fill_leaving(self.tensors + 16 * 1024)  # passes the check, fills in the writes
        self.assert_clean_failure()

    def test_disk_fills_in_the_metadata(self):
        self.fill_leaving(self.tensors + 100 * 1024)  # tensors fit, the file's metadata not
        self.assert_clean_failure()


if __name__ == "__main__":
    h.main()
