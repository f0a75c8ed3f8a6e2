"""serve end to end (docs/SERVING.md), with a real HTTP client (urllib) against the running server
on loopback, every call with a timeout:

- batch invariance: at 1 rank, pp 2 and tp 2 x pp 2 (GPT-2) and tp 2 (Llama with grouped-query
  attention), six concurrent requests of different
  prompt lengths, greedy and seeded sampling, with chunked prefill (--max-batch-tokens 8) and a
  queue (--max-num-seqs 3), each give exactly generate's text for the same prompt, seed and
  layout; streamed text equals the whole response's;
- bad input: malformed JSON, wrong types, unknown fields, deep nesting, unknown endpoints and
  models, a body over the limit, a prompt beyond the context, a client too slow to send, a client
  that disconnects mid-stream (its sequence is freed), a full queue (503 with Retry-After), each
  answered with a JSON error while the server keeps serving;
- the HTTP transport's bounds: a chunked body over the limit (413), too many or too large header
  fields (431), a request trickled in byte by byte (cut off at --http-timeout however often a
  byte comes), requests pipelined in one write (each answered, in order), a burst of 200
  connections (every one answered);
- failures: the two requests that once took the server down (max_tokens 2^63 - 1, a prompt id
  the model has and the tokenizer lacks) get 400; a failure in one request's handling (a
  failpoint) is that request's 500 alone; a failure of the step loop answers every waiting
  request 503 and ends the job non-zero within seconds; a stopped rank (SIGSTOP) makes /health
  and the waiting requests 503 after --stall-timeout, and after SIGCONT the server serves again;
- SIGTERM finishes the running request and exits 0; a rank that dies ends the job with a non-zero
  exit naming it.

Run: /usr/bin/python3 test_serve.py --bin BUILD/bin [--mpiexec PATH --mpiexec-flags "..."]
"""

import concurrent.futures
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import gpt_harness as h  # noqa: E402
from serve_harness import Server  # noqa: E402

GPT2 = ["--model", "tiny", "--n-layer", "4", "--seq-len", "64", "--steps", "30",
        "--eval-every", "0", "--threads", "1"]
LLAMA = GPT2 + ["--arch", "llama", "--n-kv-head", "2", "--ffn-hidden-size", "48"]
LAYOUTS = {"1": (1, []), "tp2": (2, ["--tp", "2"]), "pp2": (2, ["--pp", "2"]),
           "tp2_pp2": (4, ["--tp", "2", "--pp", "2"])}
# (prompt, max_tokens, temperature, seed): prompts of 1 to 30 tokens (the bytes tokenizer), so
# that prefill runs in chunks of 8 rows beside other requests' decodes.
REQUESTS = [("1", 12, 0.0, 1), ("123+456=", 20, 0.0, 1), ("7+8=15\n9+9=", 9, 1.0, 7),
            ("555+555=1110\n1+2=3\n400+2=", 16, 0.8, 3), ("99", 30, 1.0, 11),
            ("12+34=46\n", 5, 0.0, 1)]
def raw_exchange(port, data, timeout=10, pause=0.0):
    """Sends `data` (bytes, or a list of parts sent `pause` seconds apart) on one connection and
    returns what comes back until the server closes it or `timeout` passes: (bytes, seconds from
    the first byte sent to the close)."""
    parts = data if isinstance(data, list) else [data]
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        start = time.monotonic()
        try:
            for part in parts:
                s.sendall(part)
                time.sleep(pause)
            s.shutdown(socket.SHUT_WR) if pause == 0.0 else None
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                received += chunk
        except (ConnectionResetError, BrokenPipeError):
            pass
        return received, time.monotonic() - start


def statuses(answer):
    """The status codes of the HTTP responses in `answer`, in order."""
    return [int(code) for code in re.findall(rb"HTTP/1\.1 (\d{3}) ", answer)]


class ServeTest(h.TempDirTest):
    @classmethod
    def setUpClass(cls):
        cls.folder = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"serve-test-{os.getpid()}")
        os.makedirs(cls.folder, exist_ok=True)
        cls.checkpoints = {}
        for family, options in (("gpt2", GPT2), ("llama", LLAMA)):
            out = os.path.join(cls.folder, family)
            h.train(options + ["--checkpoint-dir", out], tiny=False, timeout=120)
            cls.checkpoints[family] = h.checkpoint_file(out, 30)
        # A model whose embedding has rows past its tokenizer's 256 tokens, as Qwen's files do:
        # a data set of bytes that declares a vocabulary of 320.
        import h5py
        import numpy as np
        data = os.path.join(cls.folder, "padded.h5")
        with h5py.File(data, "w") as f:
            f.create_dataset("tokens", data=np.frombuffer(b"12+34=46\n" * 200, np.uint8)
                             .astype("uint16"))
            f.attrs["vocab_size"] = np.int64(320)
            f.attrs["tokenizer"] = "bytes"
        out = os.path.join(cls.folder, "padded")
        h.train(GPT2[:6] + ["--steps", "2", "--eval-every", "0", "--threads", "1", "--data", data,
                            "--checkpoint-dir", out], tiny=False, timeout=120)
        cls.checkpoints["padded"] = h.checkpoint_file(out, 2)

    @classmethod
    def tearDownClass(cls):
        import shutil
        shutil.rmtree(cls.folder, ignore_errors=True)

    def generate(self, family, np, layout, prompt, max_tokens, temperature, seed):
        # generate's layout: --pp, and the ranks / pp are tp ranks.
        pp = layout[layout.index("--pp") + 1] if "--pp" in layout else "1"
        out = h.run("generate", ["--checkpoint", self.checkpoints[family], "--prompt", prompt,
                                 "--max-new-tokens", max_tokens, "--temperature", temperature,
                                 "--seed", seed, "--threads", "1", "--pp", pp], np=np,
                    check=True).stdout
        self.assertTrue(out.startswith(prompt), out)
        text = out[len(prompt):]
        return text[:-1] if text.endswith("\n") and len(text) > 0 else text

    def check_invariance(self, family, layout_name):
        np, layout = LAYOUTS[layout_name]
        server = Server(self.checkpoints[family], np,
                        layout + ["--max-batch-tokens", "8", "--max-num-seqs", "3"])
        try:
            with concurrent.futures.ThreadPoolExecutor(len(REQUESTS) + 1) as pool:
                texts = list(pool.map(lambda r: server.complete(*r), REQUESTS))
                streamed = server.complete(*REQUESTS[2], stream=True)
            self.assertEqual(server.metric("serve_kv_cache_usage"), 0.0)
        finally:
            code, out, err = server.stop()
        self.assertEqual(code, 0, out + err)
        self.assertEqual(streamed, texts[2], "stream vs whole response")
        for (prompt, max_tokens, temperature, seed), text in zip(REQUESTS, texts):
            want = self.generate(family, np, layout, prompt, max_tokens, temperature, seed)
            # generate ends its output with a newline unless the text does.
            self.assertEqual(text.rstrip("\n"), want.rstrip("\n"),
                             f"{family} {layout_name}: {prompt!r}")

    def test_a_gpt2_one_rank(self):
        self.check_invariance("gpt2", "1")

    def test_a_gpt2_pp2(self):
        self.check_invariance("gpt2", "pp2")

    def test_a_gpt2_tp2_pp2(self):
        self.check_invariance("gpt2", "tp2_pp2")

    def test_a_llama_tp2(self):
        self.check_invariance("llama", "tp2")

    def test_b_bad_input_keeps_serving(self):
        server = Server(self.checkpoints["gpt2"], 1,
                        ["--max-body-bytes", "2048", "--http-timeout", "1"])
        try:
            cases = [
                (b"{not json", 400, "not valid JSON"),
                (b"[1, 2]", 400, "JSON object"),
                (b'{"prompt": 12}', 400, "'prompt' must be"),
                (b'{"prompt": "1", "max_tokens": "8"}', 400, "'max_tokens' must be"),
                (b'{"prompt": "1", "max_tokns": 8}', 400, "unknown field"),
                (b'{"prompt": "1", "n": 2}', 400, "'n' is not supported"),
                (b'{"prompt": "1", "temperature": 9}', 400, "'temperature' must be in"),
                (b'{"prompt": "1", "model": "other"}', 404, "does not exist"),
                (b'{"prompt": "' + b"1" * 60 + b'", "max_tokens": 8}', 400, "context of 64"),
                (b'{"prompt": [70000]}', 400, "is not in [0"),
                (b'{"prompt": ' + b"[" * 100 + b"]" * 100 + b"}", 400, "nested"),
                (b'{"prompt": "' + b"1" * 4000 + b'"}', 413, "over the limit"),
                # Once, its context check wrapped and the step loop failed: the server hung.
                (b'{"prompt": "1", "max_tokens": 9223372036854775807}', 400, "context of 64"),
            ]
            for raw, status, message in cases:
                got, _, text = server.request("/v1/completions", raw=raw)
                self.assertEqual(got, status, (raw[:40], text))
                self.assertIn(message, json.loads(text)["error"]["message"], raw[:40])
            got, _, text = server.request("/v1/nothing")
            self.assertEqual(got, 404)
            self.assertIn("no endpoint", json.loads(text)["error"]["message"])
            self.check_transport_bounds(server)
            # A client that sends half a request and waits: closed after --http-timeout.
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                          b"\r\n{")
                start = time.monotonic()
                s.recv(4096)  # returns when the server closes (or answers)
                self.assertLess(time.monotonic() - start, 8)
            # A client that leaves mid-stream: its sequence is cancelled and its blocks freed.
            body = json.dumps({"prompt": "1", "max_tokens": 60, "stream": True}).encode()
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                          b"application/json\r\nContent-Length: " + str(len(body)).encode() +
                          b"\r\n\r\n" + body)
                received = b""
                while b"data: " not in received:
                    chunk = s.recv(4096)
                    self.assertTrue(chunk, "the stream ended early")
                    received += chunk
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and server.metric(
                    'serve_requests_total{outcome="abort"}') is None:
                time.sleep(0.1)
            self.assertEqual(server.metric('serve_requests_total{outcome="abort"}'), 1.0)
            self.assertEqual(server.metric("serve_kv_cache_usage"), 0.0)
            # Still serving, and the health and model endpoints answer.
            self.assertEqual(server.complete("1+1=", 4, 0.0, 1),
                             self.generate("gpt2", 1, [], "1+1=", 4, 0.0, 1))
            self.assertEqual(server.request("/health")[0], 200)
            models = json.loads(server.request("/v1/models")[2])
            self.assertEqual(models["data"][0]["max_model_len"], 64)
        finally:
            code, out, err = server.stop()
        self.assertEqual(code, 0, out + err)

    def check_transport_bounds(self, server):
        """The HTTP transport's limits (--max-body-bytes 2048, --http-timeout 1)."""
        head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        # A chunked body counts against the limit as a whole one does.
        chunks = b"".join(b"3e8\r\n" + b" " * 1000 + b"\r\n" for _ in range(4)) + b"0\r\n\r\n"
        answer, _ = raw_exchange(server.port, head + b"Transfer-Encoding: chunked\r\n\r\n" + chunks)
        self.assertEqual(statuses(answer), [413], answer[:200])
        self.assertIn(b"over the limit of 2048 bytes", answer)
        # Header fields: at most 100, and 32 KiB in all.
        many = b"".join(b"X-F%d: 1\r\n" % i for i in range(150))
        answer, _ = raw_exchange(server.port, b"GET /health HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n")
        self.assertEqual(statuses(answer), [431], answer[:200])
        self.assertIn(b"151 header fields", answer)
        large = b"X-Big: " + b"a" * 40000 + b"\r\n"
        answer, _ = raw_exchange(server.port, b"GET /health HTTP/1.1\r\nHost: x\r\n" + large + b"\r\n")
        self.assertEqual(statuses(answer), [431], answer[:200])
        # Requests pipelined in one write are each answered, in order.
        body = b'{"prompt": "1+1=", "max_tokens": 3, "temperature": 0}'
        pipelined = (b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + head +
                     b"Content-Length: %d\r\n\r\n" % len(body) + body +
                     b"GET /v1/nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer, _ = raw_exchange(server.port, pipelined)
        self.assertEqual(statuses(answer), [200, 200, 404], answer[-300:])
        self.assertIn(b'"text_completion"', answer)
        # A request trickled in a byte at a time is cut off at --http-timeout (1 s) from its
        # start, however often a byte comes.
        trickle = [head + b"Content-Length: 100\r\n\r\n"] + [b" "] * 40
        answer, seconds = raw_exchange(server.port, trickle, timeout=15, pause=0.2)
        self.assertEqual(answer, b"")
        self.assertLess(seconds, 4)
        # A burst of connections: each one is taken (the listen backlog holds them) and answered.
        with concurrent.futures.ThreadPoolExecutor(200) as pool:
            bursts = list(pool.map(
                lambda _: raw_exchange(server.port, b"GET /health HTTP/1.1\r\nHost: x\r\n"
                                       b"Connection: close\r\n\r\n", timeout=30)[0],
                range(200)))
        self.assertEqual([statuses(a) for a in bursts], [[200]] * 200)

    def test_c_full_queue_answers_503(self):
        # Requests long enough (the Llama model at a long context) to overlap one another.
        server = Server(self.checkpoints["llama"], 1,
                        ["--max-num-seqs", "1", "--max-queue", "1", "--seq-len", "1024"])
        try:
            body = {"prompt": "1", "max_tokens": 500, "temperature": 0}
            with concurrent.futures.ThreadPoolExecutor(6) as pool:
                answers = list(pool.map(lambda _: server.request("/v1/completions", body),
                                        range(6)))
            statuses = sorted(a[0] for a in answers)
            self.assertIn(503, statuses)
            self.assertIn(200, statuses)
            for status, headers, text in answers:
                if status == 503:
                    self.assertEqual(headers.get("Retry-After"), "1")
                    self.assertIn("queue is full", json.loads(text)["error"]["message"])
        finally:
            code, out, err = server.stop()
        self.assertEqual(code, 0, out + err)

    def sigterm_while_running(self, shutdown_timeout, max_tokens):
        """SIGTERM once a long request has generated tokens; its response and serve's exit."""
        # The Llama model takes any context: a request long enough to be running at the signal.
        server = Server(self.checkpoints["llama"], 2, ["--pp", "2", "--seq-len", "2048"],
                        shutdown_timeout=shutdown_timeout)
        body = {"prompt": "1", "max_tokens": max_tokens, "temperature": 0}
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            running = pool.submit(server.request, "/v1/completions", body)
            server.wait_for_tokens()
            self.assertIsNone(server.metric('serve_requests_total{outcome="length"}'),
                              "the request ended before the signal: make it longer")
            start = time.monotonic()
            code, out, err = server.stop(timeout=shutdown_timeout + 30)
            status, _, text = running.result(timeout=30)
        self.assertEqual(code, 0, out + err)
        self.assertIn("serve: stopped", out)
        self.assertLess(time.monotonic() - start, shutdown_timeout + 20)
        self.assertEqual(status, 200, text)
        return json.loads(text)["choices"][0]

    def test_d_sigterm_finishes_running_requests(self):
        choice = self.sigterm_while_running(60, 400)
        self.assertEqual((choice["finish_reason"], len(choice["text"])), ("length", 400))

    def test_d_sigterm_aborts_after_the_shutdown_timeout(self):
        choice = self.sigterm_while_running(0.2, 2000)
        self.assertEqual(choice["finish_reason"], "abort")
        self.assertLess(len(choice["text"]), 2000)

    def test_d_sigterm_to_mpiexec_drains(self):
        """SIGTERM to a plain mpiexec (the grace the set-up installs: odls_base_sigkill_timeout
        5): its SIGCONT reaches the ranks at once, the running request finishes, rank 0 says so
        on mpiexec's own stderr at once, and mpiexec exits 1 (Open MPI's status after its kill
        sequence, docs/OPERATIONS.md)."""
        server = Server(self.checkpoints["llama"], 2, ["--pp", "2", "--seq-len", "2048"],
                        unset=["OMPI_MCA_odls_base_sigkill_timeout"])
        body = {"prompt": "1", "max_tokens": 150, "temperature": 0}
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            running = pool.submit(server.request, "/v1/completions", body)
            server.wait_for_tokens()
            start = time.monotonic()
            os.kill(server.proc.pid, signal.SIGTERM)
            status, _, text = running.result(timeout=30)
            answered = time.monotonic() - start
            # mpiexec's stderr, read as it comes: the stop's lines arrive before it ends.
            stopped_at = None
            for line in server.proc.stderr:
                if "serve: stopped" in line:
                    stopped_at = time.monotonic() - start
                    break
            out, err = server.proc.communicate(timeout=60)
            ended = time.monotonic() - start
        self.assertEqual(status, 200, text)
        self.assertEqual(json.loads(text)["choices"][0]["finish_reason"], "length")
        self.assertEqual(server.proc.returncode, 1, out + err)
        self.assertIsNotNone(stopped_at, out + err)
        self.assertLess(answered, 9)
        self.assertGreater(ended, stopped_at + 2, (stopped_at, ended))

    def test_e_dead_rank_ends_the_job(self):
        server = Server(self.checkpoints["gpt2"], 2, ["--pp", "2"])
        ranks = server.ranks()
        self.assertEqual(len(ranks), 2, ranks)
        os.kill(max(ranks), signal.SIGKILL)
        try:
            out, err = server.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            h.kill_group(server.proc)
            self.fail("the job did not end after a rank died")
        self.assertNotEqual(server.proc.returncode, 0)
        self.assertRegex(out + err, r"(?i)rank|process")

    def test_g_failure_of_one_request_is_its_own(self):
        # A prompt id the embedding has and the tokenizer lacks: once, decoding it failed the
        # step loop and the server hung.
        server = Server(self.checkpoints["padded"], 1, env={"GPT_FAILPOINT": "serve.request=2"})
        try:
            got, _, text = server.request("/v1/completions", {"prompt": [49, 300]})
            self.assertEqual(got, 400, text)
            self.assertIn("prompt token 300 is not in the tokenizer's vocabulary",
                          json.loads(text)["error"]["message"])
            first = server.complete("1+1=", 4, 0.0, 1)
            got, _, text = server.request("/v1/completions", {"prompt": "1+1=", "max_tokens": 4})
            self.assertEqual(got, 500, text)
            self.assertIn("failpoint serve.request=2", json.loads(text)["error"]["message"])
            self.assertEqual(server.complete("1+1=", 4, 0.0, 1), first)
            self.assertEqual(server.metric('serve_requests_total{outcome="error"}'), 1.0)
            self.assertEqual(server.metric("serve_kv_cache_usage"), 0.0)
        finally:
            code, out, err = server.stop()
        self.assertEqual(code, 0, out + err)

    def test_g_failure_of_the_loop_ends_the_job(self):
        server = Server(self.checkpoints["llama"], 2, ["--pp", "2", "--seq-len", "2048"],
                        env={"GPT_FAILPOINT": "serve.loop=1"})
        try:
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                running = pool.submit(server.request, "/v1/completions",
                                      {"prompt": "1", "max_tokens": 1900, "stream": True})
                server.wait_for_tokens()
                start = time.monotonic()
                failing = pool.submit(server.request, "/v1/completions",
                                      {"prompt": "2", "max_tokens": 4})
                status, _, text = failing.result(timeout=30)
                self.assertEqual(status, 503, text)
                self.assertIn("failpoint serve.loop=1", json.loads(text)["error"]["message"])
                # The stream had begun: its last events are the error and [DONE].
                status, _, text = running.result(timeout=30)
                self.assertEqual(status, 200, text)
                events = [e for e in text.split("\n") if e.startswith("data: ")]
                self.assertEqual(events[-1], "data: [DONE]")
                self.assertIn("failpoint serve.loop=1", json.loads(events[-2][6:])["error"]["message"])
            out, err = server.proc.communicate(timeout=30)
        except BaseException:
            h.kill_group(server.proc)
            raise
        self.assertNotEqual(server.proc.returncode, 0, out + err)
        self.assertLess(time.monotonic() - start, 20)
        errors = [line for line in err.splitlines() if line.startswith("error")]
        self.assertEqual(len(errors), 1, err)
        self.assertIn("failpoint serve.loop=1", errors[0])

    def test_h_stopped_rank_is_a_503_not_a_hang(self):
        server = Server(self.checkpoints["gpt2"], 2, ["--pp", "2", "--stall-timeout", "2"])
        try:
            ranks = server.ranks()
            self.assertEqual(len(ranks), 2, ranks)
            stopped = max(ranks)
            os.kill(stopped, signal.SIGSTOP)
            try:
                start = time.monotonic()
                status, _, text = server.request("/v1/completions",
                                                 {"prompt": "1+1=", "max_tokens": 4}, timeout=30)
                self.assertEqual(status, 503, text)
                self.assertIn("have not all taken part in a step", text)
                self.assertLess(time.monotonic() - start, 10)
                status, _, text = server.request("/health")
                self.assertEqual(status, 503, text)
            finally:
                os.kill(stopped, signal.SIGCONT)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and server.request("/health")[0] != 200:
                time.sleep(0.1)
            self.assertEqual(server.request("/health")[0], 200)
            self.assertEqual(server.complete("1+1=", 4, 0.0, 1),
                             self.generate("gpt2", 2, ["--pp", "2"], "1+1=", 4, 0.0, 1))
        finally:
            code, out, err = server.stop()
        self.assertEqual(code, 0, out + err)

    def test_f_bad_options_one_line_each(self):
        ck = ["--checkpoint", self.checkpoints["gpt2"]]
        cases = [([], 1, "--checkpoint is required"),
                 (ck + ["--tp", "2"], 1, "--tp 2 x --pp 1 must equal the 1 ranks"),
                 (ck + ["--port", "70000"], 1, "--port must be in"),
                 (ck + ["--block-size", "0"], 1, "--block-size must be in"),
                 (ck + ["--kv-cache-gb", "0.000001"], 1, "--kv-cache-gb"),
                 (ck + ["--seq-len", "65"], 1, "longer than the 64 positions"),
                 (["--checkpoint", os.path.join(self.folder, "missing.h5")], 1, "missing.h5"),
                 (ck + ["--pp", "3"], 2, "--tp 1 x --pp 3 must equal the 2 ranks")]
        for args, np, message in cases:
            result = h.run("serve", args + ["--port", "0"] if "--port" not in args else args,
                           np=np, timeout=60)
            self.assertEqual(result.returncode, 1, result.describe())
            errors = [line for line in result.stderr.splitlines() if "error" in line]
            self.assertTrue(errors and message in errors[0], result.describe())


if __name__ == "__main__":
    h.main()
