"""Bounded load test of `vosti serve` on loopback: VOSTI_LOAD_CLIENTS (256) concurrent
streaming clients for VOSTI_LOAD_SECONDS (60) s, a quarter of requests dropped by their
client at a random moment. Passes when there is no 5xx and no failed connection, the
server never crashes, every KV block is free at the end (/metrics), resident memory
is back near its warmed-up baseline, and SIGTERM then exits 0.
Run: python3 tests/server/test_server_load.py
"""
import http.client
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_harness as h  # noqa: E402

CLIENTS = int(os.environ.get("VOSTI_LOAD_CLIENTS", "256"))
SECONDS = float(os.environ.get("VOSTI_LOAD_SECONDS", "60"))
ABORTED = 'vosti_request_finished_total{finished_reason="abort"}'
WORDS = ["river", "stone", "light", "orbit", "maple", "signal", "copper", "harbor", "window", "garden"]


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.status = {}
        self.completed = self.dropped = 0
        self.failures = []

    def add(self, **kw):
        with self.lock:
            for k, v in kw.items():
                if k == "status":
                    self.status[v] = self.status.get(v, 0) + 1
                elif k == "failure":
                    self.failures.append(v)
                else:
                    setattr(self, k, getattr(self, k) + v)


def one_request(port, rng, tally):
    body = {"prompt": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40))),
            "max_tokens": rng.randint(1, 6), "temperature": rng.choice([0.0, 0.7]), "stream": True}
    drop_after = rng.randint(0, 3) if rng.random() < 0.25 else None  # events to read before leaving
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
        if drop_after == 0:
            tally.add(dropped=1)
            return
        resp = conn.getresponse()
        tally.add(status=resp.status)
        if resp.status != 200:
            tally.add(failure=f"HTTP {resp.status}: {resp.read()[:200]!r}")
            return
        events = 0
        for line in resp:
            if line.startswith(b"data: [DONE]"):
                tally.add(completed=1)
                return
            if line.startswith(b"data: "):
                events += 1
                if drop_after is not None and events >= drop_after:
                    tally.add(dropped=1)
                    return
        tally.add(failure="stream ended without [DONE]")
    except (OSError, http.client.HTTPException) as e:
        tally.add(failure=f"{type(e).__name__}: {e}")
    finally:
        if conn.sock:
            conn.sock.close()
        conn.close()


def run_clients(port, num_clients, seconds, seed):
    tally = Tally()
    deadline = time.time() + seconds

    def client(i):
        rng = random.Random(seed * 1000 + i)
        time.sleep(rng.random() * 2)  # staggered start
        while time.time() < deadline:
            one_request(port, rng, tally)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(num_clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 600)
    return tally


def main():
    binary, model = h.require_model()
    server = h.Server(binary, model, ["--max-num-seqs", "64", "--kv-cache-mb", "64", "--no-access-log"])
    ok = True
    try:
        warm = run_clients(server.port, CLIENTS, 5, seed=1)
        server.wait_idle(120)
        rss_base = server.rss_kib()
        start = time.time()
        tally = run_clients(server.port, CLIENTS, SECONDS, seed=2)
        elapsed = time.time() - start
        m = server.wait_idle(120)
        rss_end = server.rss_kib()
        fivexx = {k: v for k, v in m.items() if k.startswith('vosti_http_responses_total{code="5')}
        print(f"load: {CLIENTS} clients for {elapsed:.0f} s: {tally.completed} completed, {tally.dropped} dropped by "
              f"the client, statuses {tally.status}, {len(tally.failures)} failures (warm-up: {warm.completed} "
              f"completed)")
        print(f"load: KV blocks used at the end {m['vosti_kv_blocks_used']:.0f} of {m['vosti_kv_blocks_total']:.0f}; "
              f"running {m['vosti_num_requests_running']:.0f}, waiting {m['vosti_num_requests_waiting']:.0f}; "
              f"aborted sequences {m.get(ABORTED, 0):.0f}")
        print(f"load: RSS {rss_base / 1024:.1f} MiB after warm-up, {rss_end / 1024:.1f} MiB after the load")
        checks = [
            (server.proc.poll() is None, "the server is still running"),
            (not tally.failures, f"no failed request (first: {tally.failures[:3]})"),
            (not fivexx, f"no 5xx response ({fivexx})"),
            (tally.completed > 0 and tally.dropped > 0, "requests both completed and were dropped"),
            (m["vosti_kv_blocks_used"] == 0, "every KV block is free"),
            (m["vosti_num_requests_running"] == 0 and m["vosti_num_requests_waiting"] == 0, "the engine is idle"),
            (rss_end <= rss_base * 1.25 + 32 * 1024, "RSS back near the warmed-up baseline (+25% + 32 MiB)"),
        ]
        for passed, what in checks:
            print(f"load: {'PASS' if passed else 'FAIL'}: {what}")
            ok &= passed
    finally:
        code = server.stop()
        print(f"load: SIGTERM -> exit code {code}")
        ok &= code == 0
        if not ok:
            print(server.log_text())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
