#!/usr/bin/env python3
"""The same request from many concurrent clients, mixed with random other traffic, against a
running `vosti serve`: every copy must get one and the same output, and logits digests equal to
those of the request sent alone. Standard library only (runs on the GPU machine as it is).

  tests/server/concurrent_digests.py --url http://127.0.0.1:8000 [--clients 64] [--others 32]

Prints a summary line; exits 1 on any difference or failed request.
"""
import argparse
import json
import random
import sys
import threading
import time
import urllib.request


def post(url, body, timeout=600):
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def stream(url, body, timeout=600):
    body = dict(body, stream=True)
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    n = 0
    with urllib.request.urlopen(req, timeout=timeout) as r:
        for line in r:
            if line.startswith(b"data: ") and line.strip() != b"data: [DONE]":
                n += 1
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--others", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--vocab", type=int, default=49152)
    a = ap.parse_args()

    probe = {"prompt": "The determinism of a served model is tested by", "max_tokens": a.max_tokens,
             "temperature": 0.8, "top_p": 0.95, "seed": 1234, "ignore_eos": True,
             "return_logits_digests": True, "return_token_ids": True, "logprobs": 2}
    alone = post(a.url, probe)["choices"][0]
    ref = (alone["token_ids"], alone["logits_digests"], alone["text"])

    results, errors = [None] * a.clients, []
    rng = random.Random(7)

    def client(i):
        try:
            results[i] = post(a.url, probe)["choices"][0]
        except Exception as e:  # noqa: BLE001 - any failure is a test failure
            errors.append(f"client {i}: {e}")

    def other(i):
        r = random.Random(100 + i)
        body = {"prompt": [r.randrange(a.vocab) for _ in range(r.randrange(4, 300))],
                "max_tokens": r.randrange(1, 96), "temperature": r.choice([0.0, 0.7, 1.0]),
                "seed": r.randrange(1 << 30), "ignore_eos": True, "top_k": r.choice([0, 20]),
                "return_logits_digests": r.random() < 0.5}
        try:
            stream(a.url, body) if i % 2 else post(a.url, body)
        except Exception as e:  # noqa: BLE001
            errors.append(f"other {i}: {e}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
    threads += [threading.Thread(target=other, args=(i,)) for i in range(a.others)]
    rng.shuffle(threads)
    t0 = time.time()
    for t in threads:
        t.start()
        time.sleep(0.002)
    for t in threads:
        t.join()
    wall = time.time() - t0
    outputs = {json.dumps([r["token_ids"], r["logits_digests"], r["text"]]) for r in results if r is not None}
    same = all(r is not None and (r["token_ids"], r["logits_digests"], r["text"]) == ref for r in results)
    print(f"concurrent_digests: {a.clients} identical requests + {a.others} others in {wall:.1f} s: "
          f"{len(outputs)} distinct output(s), equal to the request alone: {same}, "
          f"{len(ref[1])} digests per output, errors: {len(errors)}")
    for e in errors[:10]:
        print("  " + e)
    sys.exit(0 if same and not errors and len(outputs) == 1 else 1)


if __name__ == "__main__":
    main()
