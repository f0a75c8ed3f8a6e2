"""The communication watchdog (--comm-timeout, docs/OPERATIONS.md "Watchdog"), end to end at 4
ranks (--tp 2 --pp 2): one rank stopped with SIGSTOP ends the job with exit code 4 within 60 s
and a report naming the stopped rank as the likely culprit; a healthy run under a short timeout
finishes and leaves no heartbeat (nor their folder) behind.

Start-up, at 2 ranks whose rank 1 is stopped where it opens the data set (strace injects SIGSTOP
into that openat), so that rank 0 waits for it in start-up's next collective: --startup-timeout
ends the job with exit code 4 and a line naming what rank 0 was doing; without a deadline, a stop
request to rank 0 ends the job at once with exit code 3.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import gpt_harness as h  # noqa: E402

WATCHDOG_EXIT_CODE = 4
LAYOUT = ["--tp", "2", "--pp", "2", "--threads", "1", "--log-every", "50"]


class WatchdogTest(h.TempDirTest):

    def test_stopped_rank_is_named_and_the_job_ends(self):
        ck = self.path("ck")
        beats = os.path.join(ck, ".watchdog")
        cmd = h.command("train", h.with_tiny(LAYOUT + ["--steps", "1000000", "--comm-timeout", "20",
                                                       "--checkpoint-dir", ck]), np=4)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        stopped_pid = None
        try:
            # Rank 2 (tp 0, stage 1) publishes its pid in its heartbeat; stop it once it trains.
            deadline = time.monotonic() + 60
            heartbeat = os.path.join(beats, "rank-00002.json")
            while time.monotonic() < deadline and proc.poll() is None and stopped_pid is None:
                try:
                    with open(heartbeat) as f:
                        beat = json.load(f)
                    if beat["channels"].get("world[0-3]", {}).get("issued", 0) > 20:
                        stopped_pid = beat["pid"]
                except (OSError, ValueError):
                    pass
                time.sleep(0.1)
            self.assertIsNotNone(stopped_pid, "rank 2 never published a heartbeat while training")
            os.kill(stopped_pid, signal.SIGSTOP)
            stopped_at = time.monotonic()
            out, err = proc.communicate(timeout=90)
            took = time.monotonic() - stopped_at
        except BaseException:
            h.kill_group(proc)
            proc.communicate()
            raise
        finally:
            if stopped_pid is not None:
                try:
                    os.kill(stopped_pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        why = f"\n--- stdout ---\n{out[-2000:]}\n--- stderr ---\n{err[-4000:]}"
        self.assertEqual(proc.returncode, WATCHDOG_EXIT_CODE, why)
        self.assertLess(took, 60, why)
        self.assertIn("waited longer than --comm-timeout 20 s", err, why)
        culprits = [line.strip() for line in err.splitlines() if "likely culprit:" in line]
        self.assertEqual(len(culprits), 1, why)
        self.assertTrue(culprits[0].startswith(
            "likely culprit: rank 2 (tp 0, dp 0, stage 1, host "), why)
        self.assertIn(f"pid {stopped_pid})", culprits[0], why)
        self.assertIn("no heartbeat for", culprits[0], why)
        # Every other rank waited on a channel rank 2 belongs to.
        waits = [line for line in err.splitlines() if " timed out in " in line]
        self.assertGreaterEqual(len(waits), 1, why)
        with open(os.path.join(beats, "report.txt")) as f:
            self.assertIn(culprits[0], f.read())

    def test_healthy_run_under_a_short_timeout_finishes(self):
        ck, metrics = self.path("ck"), self.path("m.jsonl")
        h.train(LAYOUT + ["--steps", "30", "--comm-timeout", "2", "--checkpoint-dir", ck,
                          "--save-every", "10", "--metrics", metrics], np=4, timeout=120)
        self.assertEqual(len(h.step_lines(h.read_metrics(metrics))), 30)
        self.assertFalse(os.path.exists(os.path.join(ck, ".watchdog")))


def stat_of(pid):
    """(state, parent pid) of a process, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return fields[0], int(fields[1])


class StartupTest(h.TempDirTest):

    def start_with_rank1_stopped(self, options):
        """mpiexec of 2 ranks, rank 1 under strace, which stops it with SIGSTOP when it opens the
        data set; returns the process once rank 0 is known to be waiting (its start-up line) and
        rank 1 stopped."""
        if shutil.which("strace") is None:
            self.fail("strace is missing (scripts/install_deps.sh installs it)")
        data = self.path("d")
        h.run("prepare-data", ["--input", self.write_text(), "--output", data + "/x"], check=True)
        data += "/x.train.h5"
        args = h.on_cpu_unless_named("train", h.with_tiny(
            ["--data", data, "--steps", "5", "--checkpoint-dir", self.path("ck")] + options))
        train = h.binary("train")
        cmd = ([h.MPIEXEC] + h.MPIEXEC_FLAGS + ["-n", "1", train] + args +
               [":", "-n", "1", "strace", "-f", "-qq", "-o", "/dev/null", "-P", data, "-e",
                "inject=openat:signal=SIGSTOP", train] + args)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        self.addCleanup(lambda: (h.kill_group(proc), proc.communicate()))
        deadline, held = time.monotonic() + 60, 0
        while time.monotonic() < deadline and proc.poll() is None:
            # This job's ranks: train processes whose parent, or its parent (strace), is mpiexec.
            states = {}
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    if os.readlink(f"/proc/{pid}/exe") != os.path.realpath(train):
                        continue
                    state, ppid = stat_of(pid)
                    if proc.pid in (ppid, stat_of(ppid)[1]):
                        states[int(pid)] = state
                except (OSError, ValueError, IndexError):
                    pass
            stopped = [p for p, st in states.items() if st in ("t", "T")]
            running = [p for p, st in states.items() if st not in ("t", "T")]
            # strace holds rank 1 at each of its system calls for a moment: only a stop that lasts
            # is the injected one (by then rank 0 is past MPI_Init, so its signals are blocked).
            held = held + 1 if stopped and running else 0
            if held >= 10:
                return proc, running[0]
            time.sleep(0.1)
        self.fail("rank 1 was never stopped at its data set")

    def write_text(self):
        path = self.path("in.txt")
        with open(path, "w") as f:
            f.write("a small text for a data set. " * 400)
        return path

    def test_startup_timeout_ends_a_stuck_start(self):
        proc, _ = self.start_with_rank1_stopped(["--startup-timeout", "3"])
        out, err = proc.communicate(timeout=60)
        why = f"\n--- stdout ---\n{out[-2000:]}\n--- stderr ---\n{err[-3000:]}"
        self.assertEqual(proc.returncode, WATCHDOG_EXIT_CODE, why)
        self.assertIn("error: start-up did not reach the first step within "
                      "--startup-timeout 3 s (this rank was loading the checkpoint and data sets)",
                      err, why)

    def test_stop_request_during_startup_ends_the_job_at_once(self):
        proc, rank0 = self.start_with_rank1_stopped(["--startup-timeout", "0"])
        os.kill(rank0, signal.SIGUSR1)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
        why = f"\n--- stdout ---\n{out[-2000:]}\n--- stderr ---\n{err[-3000:]}"
        self.assertEqual(proc.returncode, 3, why)
        self.assertLess(took, 20, why)
        self.assertIn("[rank 0] SIGUSR1 before the first step: nothing trained to save; ending the "
                      "job now", out, why)
        self.assertFalse(os.path.exists(self.path("ck")), why)  # start-up had not come to it


if __name__ == "__main__":
    h.main()
