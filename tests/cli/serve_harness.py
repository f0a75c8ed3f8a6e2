"""A serve process for tests: started on a free loopback port (read from its first line),
requests through urllib with a timeout, metrics read back, stopped with SIGTERM to every rank."""

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

import gpt_harness as h

HTTP_TIMEOUT = 60


class Server:
    """serve on a free loopback port; stopped (SIGTERM, then killed) by stop()."""

    def __init__(self, checkpoint, np=1, options=(), startup_timeout=60, shutdown_timeout=10,
                 env=None, unset=()):
        """env: variables added to the environment; unset: names removed from it."""
        self.np = np
        cmd = h.command("serve", ["--checkpoint", checkpoint, "--port", "0", "--threads", "1",
                                  "--shutdown-timeout", shutdown_timeout] + list(options), np)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True, text=True, errors="replace",
                                     env={k: v for k, v in {**os.environ, **(env or {})}.items()
                                          if k not in unset})
        deadline = time.monotonic() + startup_timeout
        self.port = None
        while time.monotonic() < deadline and self.port is None:
            line = self.proc.stdout.readline()
            if not line:
                break
            found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if found:
                self.port = int(found.group(1))
        if self.port is None:
            h.kill_group(self.proc)
            out, err = self.proc.communicate()
            raise AssertionError(f"serve did not start\n{out}\n{err}")

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def request(self, path, body=None, raw=None, timeout=HTTP_TIMEOUT):
        """(status, headers, body text) of a GET, or a POST of `body` (JSON) or `raw` bytes."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None
                                            else None)
        req = urllib.request.Request(self.url(path), data=data,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read().decode("utf-8", "replace")

    def complete(self, prompt, max_tokens, temperature, seed, stream=False):
        body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": temperature,
                "seed": seed, "stream": stream}
        status, _, text = self.request("/v1/completions", body)
        assert status == 200, (status, text)
        if not stream:
            return json.loads(text)["choices"][0]["text"]
        events = [line[len("data: "):] for line in text.split("\n") if line.startswith("data: ")]
        assert events[-1] == "[DONE]", events[-3:]
        return "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1])

    def metric(self, name):
        _, _, text = self.request("/metrics")
        found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
        return float(found.group(1)) if found else None

    def wait_for_tokens(self, timeout=20):
        """Until the server has generated a token (a request is running)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.metric("serve_generation_tokens_total"):
            time.sleep(0.02)

    def ranks(self):
        """The pids of serve's ranks: mpiexec's children, or the singleton itself."""
        if self.np == 1:
            return [self.proc.pid]
        children = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True,
                                  text=True).stdout.split()
        return [int(p) for p in children] or [self.proc.pid]

    def stop(self, timeout=30):
        """SIGTERM to every rank, as Slurm's scancel sends it to every task (mpiexec itself would
        answer SIGTERM with SIGKILL after a grace period, docs/OPERATIONS.md); returns (exit code,
        stdout, stderr)."""
        for pid in self.ranks():
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            h.kill_group(self.proc)
            out, err = self.proc.communicate()
            raise AssertionError(f"serve did not stop within {timeout} s\n{out}\n{err}")
        return self.proc.returncode, out, err
