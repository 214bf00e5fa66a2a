#!/usr/bin/env python3
"""Vosti's CPU engine against llama.cpp on the same GGUF file, same threads, interleaved
(Vosti, llama.cpp, Vosti, llama.cpp, ...) so machine load hits both alike; medians reported.

  decode   build/bench/cpu_decode_bench --tg 128   vs  llama-bench -p 0 -n 128   (1 and 2 threads)
  prefill  build/bench/cpu_decode_bench --pp 64    vs  llama-bench -p 64 -n 0    (1 and 2 threads)
  server   16 concurrent /v1/completions x 64 tokens (greedy, ignore_eos) against
           `vosti serve --threads T` and `llama-server -np 16 -cb -t T`; output tokens/s
  memory   VmRSS of each server after the load, with Vosti's KV cache size and the file size
  big      decode of a second (8B-shaped) file: --tg N, 2 threads

llama.cpp is not part of Vosti: build it from PyPI's llama-cpp-python source package,
which carries llama.cpp's tree (bench/build_llama_cpp.sh does it under /tmp), and pass
its bin directory. Results are printed as Markdown and JSON lines.

  python3 bench/cpu_vs_llama_cpp.py --llama-bin /tmp/llamacpp/build/bin \\
      --model $(scripts/fetch-model) [--rounds 5] [--big /tmp/llama-3.1-8b-shape.Q4_K_M.gguf]
"""
import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_bench  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return out


def vosti_bench(args, threads, tg, pp, model=None, reps=1):
    out = run_json([os.path.join(args.build, "bench", "cpu_decode_bench"), "--model", model or args.model,
                    "--threads", str(threads), "--tg", str(tg), "--pp", str(pp), "--reps", str(reps)])
    r = json.loads(out.strip().splitlines()[-1])
    return r["tg_tok_s"] if tg else r["pp_tok_s"]


def llama_bench(args, threads, tg, pp, model=None, reps=1):
    out = run_json([os.path.join(args.llama_bin, "llama-bench"), "-m", model or args.model, "-t", str(threads),
                    "-p", str(pp), "-n", str(tg), "-r", str(reps), "-o", "json"])
    rows = json.loads(out)
    return rows[0]["avg_ts"], rows[0].get("build_commit", "?")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, argv, port, log_name):
        self.port = port
        self.log = open(log_name, "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=self.log)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{argv[0]} exited: see {log_name}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"{argv[0]} did not become healthy")

    def rss_mb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def load(port, concurrency, tokens):
    """concurrency clients, one completion each of `tokens` tokens; output tokens/s."""
    total, wall = server_bench.measure_throughput(port, concurrency, 1, tokens)
    return total / wall


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--llama-bin", required=True, help="llama.cpp's build/bin (llama-bench, llama-server)")
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--server-threads", type=int, default=2)
    ap.add_argument("--big", default="", help="an 8B-shaped GGUF (bench/make_q4km_gguf.py) for a decode comparison")
    ap.add_argument("--big-tokens", type=int, default=16)
    ap.add_argument("--skip", default="", help="comma list of decode,prefill,server,big to skip")
    args = ap.parse_args()
    skip = set(args.skip.split(",")) - {""}
    results = {}
    commit = "?"
    threads = [int(t) for t in args.threads.split(",")]
    print(f"load average at start: {os.getloadavg()}", flush=True)

    for what, tg, pp in (("decode tg128", 128, 0), ("prefill pp64", 0, 64)):
        if what.split()[0] in skip:
            continue
        for t in threads:
            v, l = [], []
            for _ in range(args.rounds):
                v.append(vosti_bench(args, t, tg, pp))
                rate, commit = llama_bench(args, t, tg, pp)
                l.append(rate)
            results[f"{what} t{t}"] = (median(v), median(l), v, l)
            print(json.dumps({"test": f"{what} t{t}", "vosti": v, "llama.cpp": l}), flush=True)

    if "server" not in skip:
        t = args.server_threads
        vp, lp = free_port(), free_port()
        vosti = Server([os.path.join(args.build, "vosti"), "serve", "--model", args.model, "--port", str(vp),
                        "--threads", str(t), "--max-num-seqs", "16", "--no-access-log"], vp, "/tmp/vosti-serve.log")
        llama = Server([os.path.join(args.llama_bin, "llama-server"), "-m", args.model, "--port", str(lp), "-t", str(t),
                        "-np", "16", "-cb", "-c", str(16 * 160)], lp, "/tmp/llama-server.log")
        try:
            v, l = [], []
            for _ in range(args.rounds):
                v.append(load(vp, 16, 64))
                l.append(load(lp, 16, 64))
            results["server 16x64"] = (median(v), median(l), v, l)
            print(json.dumps({"test": "server 16x64", "vosti": v, "llama.cpp": l}), flush=True)
            results["rss_mb"] = (vosti.rss_mb(), llama.rss_mb(), [], [])
            print(json.dumps({"test": "rss_mb", "vosti": results["rss_mb"][0], "llama.cpp": results["rss_mb"][1]}),
                  flush=True)
        finally:
            vosti.stop()
            llama.stop()

    if args.big and "big" not in skip:
        v, l = [], []
        for _ in range(max(1, args.rounds // 2)):
            # reps 3, median: the first repetition faults the mapped file in (llama-bench warms up
            # likewise before it measures).
            v.append(vosti_bench(args, 2, args.big_tokens, 0, model=args.big, reps=3))
            l.append(llama_bench(args, 2, args.big_tokens, 0, model=args.big)[0])
        results[f"8B-shape Q4_K_M decode tg{args.big_tokens} t2"] = (median(v), median(l), v, l)
        print(json.dumps({"test": "big", "vosti": v, "llama.cpp": l}), flush=True)

    print(f"\nllama.cpp build_commit {commit}; load average at end: {os.getloadavg()}")
    print("| test | Vosti | llama.cpp | Vosti / llama.cpp |")
    print("|---|---|---|---|")
    for k, (v, l, _, _) in results.items():
        unit = "MB" if k == "rss_mb" else "tok/s"
        print(f"| {k} | {v:.1f} {unit} | {l:.1f} {unit} | {v / l:.2f}x |")


if __name__ == "__main__":
    main()
