"""Start and stop a live `vosti serve` for the server tests; small HTTP helpers.

The binary comes from $VOSTI_BIN (set by CTest) or build/vosti; the model from
$VOSTI_DEFAULT_MODEL. Without a model the tests exit 77 (CTest's SKIP_RETURN_CODE)
with a message saying why.
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def skip(message):
    print(f"SKIP: {message}")
    sys.exit(SKIP)


def require_model():
    model = os.environ.get("VOSTI_DEFAULT_MODEL", "")
    if not model or not os.path.exists(model):
        skip("VOSTI_DEFAULT_MODEL is unset or missing; run scripts/fetch-model and export its path")
    binary = os.environ.get("VOSTI_BIN") or os.path.join(REPO, "build", "vosti")
    if not os.path.exists(binary):
        skip(f"no vosti binary at {binary}; build it or set VOSTI_BIN")
    return binary, model


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A `vosti serve` process on a free loopback port."""

    def __init__(self, binary, model, extra_args=(), api_key=None):
        self.port = free_port()
        self.api_key = api_key
        self.log = tempfile.NamedTemporaryFile(prefix="vosti-serve-", suffix=".log", delete=False)
        args = [binary, "serve", "--model", model, "--port", str(self.port), "--served-model-name", "smollm2"]
        if api_key:
            args += ["--api-key", api_key]
        args += list(extra_args)
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log)
        deadline = time.time() + 180
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vosti serve exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                if self.request("GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.proc.kill()
        raise RuntimeError("vosti serve did not become healthy in 180 s:\n" + self.log_text())

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.port}"

    def log_text(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()[-5000:]

    def headers(self, auth=True):
        h = {"Content-Type": "application/json"}
        if auth and self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h

    def request(self, method, path, body=None, headers=None, raw=None, timeout=300):
        """Returns (status, parsed JSON or text)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
            conn.request(method, path, body=data, headers=headers if headers is not None else self.headers())
            resp = conn.getresponse()
            text = resp.read()
            try:
                return resp.status, json.loads(text)
            except ValueError:
                return resp.status, text.decode(errors="replace")
        finally:
            conn.close()

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def stream(self, path, body, timeout=300):
        """POSTs a streaming request; returns (status, [parsed chunks], saw_done)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("POST", path, body=json.dumps(body).encode(), headers=self.headers())
            resp = conn.getresponse()
            if resp.status != 200:
                return resp.status, [json.loads(resp.read())], False
            chunks, done = [], False
            for line in resp:
                line = line.decode().rstrip("\n")
                if not line.startswith("data: "):
                    continue
                payload = line[len("data: "):]
                if payload == "[DONE]":
                    done = True
                    break
                chunks.append(json.loads(payload))
            return 200, chunks, done
        finally:
            conn.close()

    def metrics(self):
        status, text = self.request("GET", "/metrics")
        assert status == 200, text
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                values[name] = float(value)
        return values

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def wait_idle(self, timeout=60):
        """Waits until no sequence runs or waits and no KV block is held; returns the metrics."""
        deadline = time.time() + timeout
        while True:
            m = self.metrics()
            idle = (m["vosti_num_requests_running"] == 0 and m["vosti_num_requests_waiting"] == 0 and
                    m["vosti_kv_blocks_used"] == 0 and m["vosti_http_requests_active"] == 0)
            if idle or time.time() > deadline:
                return m
            time.sleep(0.1)

    def stop(self, timeout=60):
        """SIGTERM; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
