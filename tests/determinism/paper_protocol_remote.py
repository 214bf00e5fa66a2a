#!/usr/bin/env python3
"""`vosti verify --protocol paper --base-url` end to end, on a tiny random model with a tokenizer
(`vosti make-model --shape tiny-llama`): against a live `vosti serve` it gives the table the
in-process run gives (every relation, every count, all identical); against a deliberately
non-deterministic server (perturbing_server.py: logprobs that follow the batch size) it reports
the differences, says its evidence is weaker, and exits non-zero.
Run: VOSTI_BIN=build/vosti python3 tests/determinism/paper_protocol_remote.py
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "server"))
import server_harness as h  # noqa: E402

BINARY = os.environ.get("VOSTI_BIN") or os.path.join(h.REPO, "build", "vosti")
CONTEXT = "768"  # the paper's prompts cut to 766 tokens (the in-process CTests keep 1,280 on two families)
BUDGET = "1040"  # the server's step budget: over the longest chunk prompt and every budget to induce
WORK = tempfile.mkdtemp(prefix="vosti-paper-protocol-")
MODEL = os.path.join(WORK, "tiny-llama")


def verify(*args, expect):
    out = os.path.join(WORK, f"verify-{time.time_ns()}.json")
    cmd = [BINARY, "verify", "--protocol", "paper", "--max-context", CONTEXT, "--json", out, *args]
    started = time.time()
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    print(f"$ {' '.join(cmd)}  ({time.time() - started:.0f} s)\n{run.stdout[-3000:]}{run.stderr[-2000:]}",
          flush=True)
    assert run.returncode == expect, f"exit {run.returncode}, wanted {expect}"
    with open(out) as f:
        return json.load(f)["reports"]


def table(report):
    return [(r["relation"], r["expected"], r["tested"], r["identical"], r["status"]) for r in report["relations"]]


def setUpModule():
    if not os.path.exists(BINARY):
        h.skip(f"no vosti binary at {BINARY}; build it or set VOSTI_BIN")
    subprocess.run([BINARY, "make-model", "--shape", "tiny-llama", "--out", MODEL], check=True,
                   capture_output=True)


class PaperProtocolRemoteTest(unittest.TestCase):
    def test_a_vosti_server_gives_the_in_process_table(self):
        local = verify("--model", MODEL, expect=0)
        server = h.Server(BINARY, MODEL, ["--max-model-len", CONTEXT, "--max-num-batched-tokens", BUDGET,
                                          "--no-access-log"])
        try:
            remote = verify("--base-url", server.base_url, expect=0)
        finally:
            self.assertEqual(server.stop(), 0)
        self.assertEqual(table(remote[0]), table(local[0]))
        self.assertEqual([r["status"] for r in remote[0]["relations"]], ["pass"] * 4)
        self.assertEqual(sum(r["expected"] for r in remote[0]["relations"]), 784)
        self.assertIn("digests", remote[0]["evidence"])
        self.assertIn("full f32", local[0]["evidence"])
        # The server really was made cold and warm: every prefix case witnessed its hit.
        cache = remote[0]["relations"][3]
        self.assertTrue(all(w["valid"] for w in cache["witnesses"]))
        self.assertEqual(sum(w["label"].endswith("warm hit") for w in cache["witnesses"]), 14)

    def test_a_server_whose_logprobs_follow_the_batch_is_caught(self):
        port = h.free_port()
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "perturbing_server.py"), str(port)],
                                stdout=subprocess.PIPE, text=True)
        try:
            self.assertIn("listening", proc.stdout.readline())
            reports = verify("--base-url", f"http://127.0.0.1:{port}", "--server-token-budget", BUDGET, expect=1)
        finally:
            proc.terminate()
            proc.wait(30)
        rel = {r["relation"]: r for r in reports[0]["relations"]}
        self.assertEqual(rel["batch"]["status"], "MISMATCH")
        self.assertEqual(rel["batch"]["identical"], 4)  # only the single-prompt pairs agree: fresh vs isolated
        self.assertEqual(rel["pd"]["status"], "pass")      # one prompt a request: nothing moves
        self.assertEqual(rel["cache"]["status"], "pass")
        self.assertIn("WEAKER", reports[0]["evidence"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
