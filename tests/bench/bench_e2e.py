#!/usr/bin/env python3
"""`vosti bench` end to end on the default model (skips without it, exit 77):

- the in-process target and a live `vosti serve` on the same seeded workload (greedy, EOS
  honoured) report the same prompt and output token counts, request by request;
- --check-determinism against the server compares token ids and logits digests: identical;
- bad arguments exit 2 naming the flag; an unreachable server exits 1 naming the URL;
- a server killed mid-run gives a partial report, the JSON, and exit 1 within a bound; one
  that stops answering (SIGSTOP) fails its requests after --request-timeout and stops the run;
- Ctrl-C (SIGINT) prints what was measured so far, writes the JSON, exits 130;
- --sweep-concurrency with --plot writes the PNG plots (matplotlib);
- a prompts file (text and chat entries): in-process and HTTP count the same tokens;
- a peer server without digests (a stand-in for llama-server, strict about unknown fields):
  --check-determinism compares token text and logprobs and says so, and reports every
  mismatch of a peer whose logprobs depend on the batch.
Every run is small (seconds on 2 cores); no timing is asserted.
"""
import hashlib
import http.server
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import server_harness as h  # noqa: E402

WORKLOAD = ["--num-prompts", "8", "--input-len", "16:48", "--output-len", "8:24", "--seed", "3",
            "--max-concurrency", "4", "--no-progress"]
passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {name} {detail}")


def bench(binary, args, timeout=300):
    p = subprocess.run([binary, "bench", *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def per_request(path):
    with open(path) as f:
        doc = json.load(f)
    return doc, [(r["index"], r["ok"], r["prompt_tokens"], r["output_tokens"]) for r in doc["runs"][0]["requests"]]


def bad_arguments(binary, tmp):
    for args, needle in ((["--input-len", "0"], "--input-len"), (["--output-len", "9:3"], "--output-len"),
                         (["--preset", "nope"], "unknown preset"), (["--workload", "file"], "--prompts-file"),
                         (["--base-url", "https://x:1"], "https"), (["--request-rate", "-2"], "--request-rate"),
                         (["--sweep-concurrency", "1,4", "--max-concurrency", "2"], "--sweep-concurrency"),
                         (["--frobnicate"], "frobnicate")):
        rc, out, err = bench(binary, args)
        check(f"bad argument {args} exits 2", rc == 2, f"rc={rc} {err[-300:]}")
        check(f"bad argument {args} names the problem", needle in err + out, err[-300:])
    port = h.free_port()
    rc, out, err = bench(binary, ["--base-url", f"http://127.0.0.1:{port}", *WORKLOAD])
    check("an unreachable server exits 1", rc == 1, f"rc={rc}")
    check("the error names the URL", f"127.0.0.1:{port}" in err, err[-300:])
    rc, out, _ = bench(binary, ["--list-presets"])
    check("--list-presets lists cpu-small and rollout", rc == 0 and "cpu-small" in out and "rollout" in out)


def same_token_counts(binary, server, tmp):
    a, b = os.path.join(tmp, "inproc.json"), os.path.join(tmp, "http.json")
    rc, out, err = bench(binary, [*WORKLOAD, "--threads", "2", "-o", a])
    check("in-process run exits 0", rc == 0, f"rc={rc} {err[-500:]}")
    check("the table is printed", "TTFT" in out and "TPOT" in out and "throughput" in out, out[-500:])
    check("in-process: the engine's step time split (forward, sampling, bookkeeping)",
          "engine steps" in out and "bookkeeping" in out, out[-500:])
    rc, out, err = bench(binary, ["--base-url", server.base_url, *WORKLOAD, "-o", b])
    check("HTTP run exits 0", rc == 0, f"rc={rc} {err[-500:]}")
    doc_a, ra = per_request(a)
    doc_b, rb = per_request(b)
    check("8 requests answered in-process", sum(r[1] for r in ra) == 8, ra)
    check("in-process and HTTP: the same prompt and output token counts, request by request", ra == rb, f"{ra} vs {rb}")
    total = doc_a["runs"][0]["metrics"]["total_output_tokens"]
    check("the same total output tokens", total == doc_b["runs"][0]["metrics"]["total_output_tokens"] and total > 8)
    check("the JSON records commit, machine and command", all(k in doc_b for k in ("commit", "machine", "command")) and
          doc_b["machine"]["cpu"] != "" and "bench" in doc_b["command"])
    check("the server is recognised as Vosti", doc_b["target"]["server"] == "vosti", doc_b["target"])
    m = doc_b["runs"][0]["metrics"]
    check("HTTP: prefix-cache and preemption counters from /metrics",
          m["prefix_cache_hit_rate"] is not None and m["preemptions"] is not None, m)
    shares = [doc_a["runs"][0]["metrics"][f"engine_{k}_fraction"] for k in ("forward", "sampling", "bookkeeping")]
    check("in-process: the step-time shares are recorded and add up to 1",
          None not in shares and abs(sum(shares) - 1) < 1e-9 and shares[0] > 0.5, shares)
    check("HTTP: no engine step time", m["engine_step_s"] is None, m)


def prompts_file(binary, server, tmp):
    path = os.path.join(tmp, "prompts.jsonl")
    with open(path, "w") as f:
        f.write(json.dumps({"prompt": "The capital of France is", "max_tokens": 12}) + "\n")
        f.write(json.dumps({"messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 10}) + "\n")
        f.write(json.dumps({"conversations": [{"from": "human", "value": "Say hi."}, {"from": "gpt", "value": "Hi!"}]})
                + "\n")
    a, b = os.path.join(tmp, "file_a.json"), os.path.join(tmp, "file_b.json")
    args = ["--prompts-file", path, "--no-progress"]
    rc_a, _, err_a = bench(binary, [*args, "-o", a])
    rc_b, _, err_b = bench(binary, ["--base-url", server.base_url, *args, "-o", b])
    check("prompts file: both targets exit 0", rc_a == 0 and rc_b == 0, err_a[-300:] + err_b[-300:])
    _, ra = per_request(a)
    _, rb = per_request(b)
    check("prompts file (text, chat, ShareGPT): the same token counts in-process and over HTTP", ra == rb and
          len(ra) == 3, f"{ra} vs {rb}")


class PeerHandler(http.server.BaseHTTPRequestHandler):
    """A stand-in for a peer server (llama-server style): no token ids, no digests, unknown
    fields refused; output text and logprobs derived from the prompt and seed. With
    server.batch_variant set, a logprob moves when several requests run at once."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [{"id": "peer", "owned_by": "llamacpp"}]})
        else:
            self.send_json(404, {"error": {"message": "not found"}})

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        allowed = {"model", "prompt", "max_tokens", "temperature", "seed", "stream", "stream_options", "ignore_eos",
                   "logprobs"}
        if set(req) - allowed:
            self.send_json(400, {"error": {"message": f"unknown fields {sorted(set(req) - allowed)}"}})
            return
        server = self.server
        with server.lock:
            server.in_flight += 1
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            key = json.dumps([req["prompt"], req.get("seed")])
            for i in range(req["max_tokens"]):
                time.sleep(0.01)
                h = int(hashlib.sha256(f"{key}/{i}".encode()).hexdigest(), 16)
                piece = " w" + str(h % 50)
                logprob = -(h % 1000) / 100
                with server.lock:
                    if server.batch_variant and server.in_flight > 1 and i == 2:
                        logprob -= 0.001
                chunk = {"object": "text_completion", "choices": [{"index": 0, "text": piece, "finish_reason": None,
                         "logprobs": {"tokens": [piece], "token_logprobs": [logprob]}}]}
                self.send_event(chunk)
            self.send_event({"object": "text_completion", "choices": [],
                             "usage": {"prompt_tokens": len(req["prompt"]), "completion_tokens": req["max_tokens"]}})
            self.send_event("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
        finally:
            with server.lock:
                server.in_flight -= 1

    def send_event(self, obj):
        data = ("data: " + (obj if isinstance(obj, str) else json.dumps(obj)) + "\n\n").encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def peer_determinism(binary, tmp):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), PeerHandler)
    server.lock, server.in_flight, server.batch_variant = threading.Lock(), 0, False
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    args = ["--base-url", url, "--num-prompts", "6", "--input-len", "8", "--output-len", "5", "--ignore-eos",
            "--max-concurrency", "3", "--no-progress", "--check-determinism"]
    try:
        rc, out, err = bench(binary, args)
        check("a peer without digests: --check-determinism exits 0 when it is stable", rc == 0,
              f"rc={rc} {out[-600:]} {err[-300:]}")
        check("a peer without digests: compares token text and logprobs, and says so",
              "token text and logprobs" in out and "do not prove" in out, out[-600:])
        server.batch_variant = True
        rc, out, err = bench(binary, args)
        check("a batch-variant peer: exit 1", rc == 1, f"rc={rc}")
        check("a batch-variant peer: every mismatch is printed", "MISMATCH request" in out and "position 2: logprob"
              in out and "DIFFERS" in out, out[-800:])
    finally:
        server.shutdown()


def determinism(binary, server, tmp):
    out_json = os.path.join(tmp, "det.json")
    rc, out, err = bench(binary, ["--base-url", server.base_url, "--num-prompts", "6", "--input-len", "8:40",
                                  "--output-len", "12", "--temperature", "0.8", "--seed", "9", "--no-progress",
                                  "--check-determinism", "-o", out_json])
    check("--check-determinism exits 0", rc == 0, f"rc={rc} {out[-800:]} {err[-300:]}")
    check("it compares token ids and logits digests", "logits digests" in out and "IDENTICAL" in out, out[-800:])
    d = json.load(open(out_json))["determinism"]
    check("every position of every request was compared", d["requests_compared"] == 6 and
          d["positions_compared"] > 6 and d["identical"], d)


def server_dies(binary, model, tmp):
    server = h.Server(binary, model, ["--no-access-log"])
    out_json = os.path.join(tmp, "dies.json")
    p = subprocess.Popen([binary, "bench", "--base-url", server.base_url, "--num-prompts", "60", "--input-len", "16",
                          "--output-len", "24", "--ignore-eos", "--max-concurrency", "2", "--no-progress",
                          "-o", out_json], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120  # kill it once a few requests have finished (bounded)
    while time.time() < deadline:
        finished = sum(v for k, v in server.metrics().items() if k.startswith("vosti_request_finished_total"))
        if finished >= 3:
            break
        time.sleep(0.2)
    server.proc.kill()
    server.proc.wait()
    try:
        out, err = p.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        p.kill()
        check("a dead server does not hang the benchmark", False)
        return
    check("a dead server: exit 1", p.returncode == 1, f"rc={p.returncode}")
    check("a dead server: the partial report says why", "STOPPED EARLY" in out and "unreachable" in out, out[-600:])
    m = json.load(open(out_json))["runs"][0]["metrics"]
    check("a dead server: the JSON keeps what was measured", 0 < m["completed"] < 60 and m["not_sent"] > 0, m)


def server_stalls(binary, model, tmp):
    """A server that stops answering (SIGSTOP) fails the requests after --request-timeout."""
    server = h.Server(binary, model, ["--no-access-log"])
    p = subprocess.Popen([binary, "bench", "--base-url", server.base_url, "--num-prompts", "60", "--input-len", "16",
                          "--output-len", "24", "--ignore-eos", "--max-concurrency", "2", "--no-progress",
                          "--request-timeout", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2)
    server.proc.send_signal(signal.SIGSTOP)
    try:
        out, err = p.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        p.kill()
        out = ""
        check("a stalled server does not hang the benchmark", False)
    finally:
        server.proc.send_signal(signal.SIGCONT)
        server.proc.kill()
        server.proc.wait()
    check("a stalled server: exit 1", p.returncode == 1, f"rc={p.returncode}")
    check("a stalled server: the report says it timed out", "timed out" in out and "STOPPED EARLY" in out, out[-600:])


def interrupted(binary, tmp):
    out_json = os.path.join(tmp, "int.json")
    p = subprocess.Popen([binary, "bench", "--num-prompts", "200", "--input-len", "16", "--output-len", "8",
                          "--ignore-eos", "--max-concurrency", "2", "--threads", "2", "--no-progress", "-o", out_json],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(6)
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        check("Ctrl-C ends the benchmark", False)
        return
    check("Ctrl-C: exit 130", p.returncode == 130, f"rc={p.returncode} {err[-300:]}")
    check("Ctrl-C: the report of what was measured", "interrupted" in out and "TTFT" in out, out[-600:])
    m = json.load(open(out_json))["runs"][0]["metrics"]
    check("Ctrl-C: the JSON holds the finished requests", 0 < m["completed"] < 200, m)


def plots(binary, server, tmp):
    plot_dir = os.path.join(tmp, "plots")
    rc, out, err = bench(binary, ["--base-url", server.base_url, "--num-prompts", "4", "--input-len", "8",
                                  "--output-len", "6", "--ignore-eos", "--sweep-concurrency", "1,2", "--no-progress",
                                  "--save-detailed", "--plot", plot_dir])
    check("--plot exits 0", rc == 0, f"rc={rc} {err[-500:]}")
    for name in ("latency_cdf.png", "sweep.png", "result.json"):
        path = os.path.join(plot_dir, name)
        ok = os.path.exists(path) and os.path.getsize(path) > 0
        if ok and name.endswith(".png"):
            ok = open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
        check(f"--plot wrote {name}", ok)


def main():
    binary, model = h.require_model()
    with tempfile.TemporaryDirectory() as tmp:
        bad_arguments(binary, tmp)
        server = h.Server(binary, model, ["--no-access-log"])
        try:
            same_token_counts(binary, server, tmp)
            determinism(binary, server, tmp)
            prompts_file(binary, server, tmp)
            plots(binary, server, tmp)
        finally:
            server.stop()
        peer_determinism(binary, tmp)
        server_dies(binary, model, tmp)
        server_stalls(binary, model, tmp)
        interrupted(binary, tmp)
    print(f"bench_e2e: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
