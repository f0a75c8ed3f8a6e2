"""The communication watchdog (--comm-timeout, docs/OPERATIONS.md "Watchdog"), end to end at 4
ranks (--tp 2 --pp 2): one rank stopped with SIGSTOP ends the job with exit code 4 within 60 s
and a report naming the stopped rank as the likely culprit; a healthy run under a short timeout
finishes and leaves no heartbeat (nor their folder) behind.
"""

import json
import os
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


if __name__ == "__main__":
    h.main()
