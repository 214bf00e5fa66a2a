#!/usr/bin/env python3
"""Benchmark of `vosti serve` on loopback: HTTP overhead per request against the engine
time of the same request, and served output tokens/s at several concurrencies.

Overhead: sequential 1-token completions over one keep-alive connection; per request,
client-measured latency minus `engine_ms` from the server's access log (engine thread
time from the first add_request to the last output: what an in-process caller would
wait). Reports p50/p90. Throughput: C clients each sending completions of --tokens
output tokens (greedy, ignore_eos) back to back; total output tokens / wall time.

  python3 bench/server_bench.py [--bin build/vosti] [--model PATH] [--concurrency 1,8,64]
"""
import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "server"))
import server_harness as h  # noqa: E402


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def measure_overhead(server, num_requests):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    client_ms = {}
    body = json.dumps({"prompt": "Hello", "max_tokens": 1, "temperature": 0})
    for i in range(num_requests + 5):
        rid = f"bench-{i}"
        t0 = time.perf_counter()
        conn.request("POST", "/v1/completions", body=body,
                     headers={"Content-Type": "application/json", "X-Request-Id": rid})
        resp = conn.getresponse()
        resp.read()
        if i >= 5:  # the first few warm up caches
            client_ms[rid] = (time.perf_counter() - t0) * 1000
    conn.close()
    time.sleep(0.3)
    engine_ms = {}
    with open(server.log.name) as f:
        for line in f:
            if line.startswith("{"):
                rec = json.loads(line)
                if rec.get("request_id") in client_ms and "engine_ms" in rec:
                    engine_ms[rec["request_id"]] = rec["engine_ms"]
    overhead = [client_ms[r] - engine_ms[r] for r in client_ms if r in engine_ms]
    return overhead, list(client_ms.values()), list(engine_ms.values())


def measure_throughput(port, concurrency, requests_per_client, tokens):
    total = [0]
    lock = threading.Lock()
    errors = []

    def client(c):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
        for r in range(requests_per_client):
            body = {"prompt": f"Client {c} request {r}: write a story about", "max_tokens": tokens,
                    "temperature": 0, "ignore_eos": True}
            conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = json.loads(resp.read())
            if resp.status != 200:
                errors.append(data)
                continue
            with lock:
                total[0] += data["usage"]["completion_tokens"]
        conn.close()

    threads = [threading.Thread(target=client, args=(c,)) for c in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"errors: {errors[:2]}")
    return total[0], wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("VOSTI_BIN", os.path.join(h.REPO, "build", "vosti")))
    ap.add_argument("--model", default=os.environ.get("VOSTI_DEFAULT_MODEL", ""))
    ap.add_argument("--requests", type=int, default=100, help="sequential requests for the overhead")
    ap.add_argument("--tokens", type=int, default=32, help="output tokens per request for throughput")
    ap.add_argument("--concurrency", default="1,8,64")
    ap.add_argument("--server-args", default="", help="extra `vosti serve` flags, space separated")
    args = ap.parse_args()
    if not args.model or not os.path.exists(args.model):
        sys.exit("server_bench: pass --model or set VOSTI_DEFAULT_MODEL (scripts/fetch-model prints the path)")
    server = h.Server(args.bin, args.model, args.server_args.split())
    try:
        overhead, client, engine = measure_overhead(server, args.requests)
        print(f"HTTP overhead per request (n={len(overhead)}): p50 {statistics.median(overhead):.3f} ms, "
              f"p90 {percentile(overhead, 90):.3f} ms; client latency p50 {statistics.median(client):.2f} ms, "
              f"engine time p50 {statistics.median(engine):.2f} ms")
        print("| concurrency | requests | output tokens | wall s | output tokens/s |")
        print("|---|---|---|---|---|")
        for c in [int(x) for x in args.concurrency.split(",")]:
            per_client = max(1, 16 // c)
            tokens, wall = measure_throughput(server.port, c, per_client, args.tokens)
            print(f"| {c} | {c * per_client} | {tokens} | {wall:.2f} | {tokens / wall:.1f} |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
