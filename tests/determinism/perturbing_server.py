#!/usr/bin/env python3
"""A deliberately non-deterministic OpenAI-compatible server, for testing `vosti verify
--protocol paper --base-url`: its logprobs move with the number of prompts in a request, as an
engine's whose kernels read the batch size would.

The "model" is a hash: the next token after a context is a function of the context alone, and so
are its top-20 logprobs, except that every logprob is shifted by 1e-3 per extra prompt in the
request. So a prompt alone and the same prompt batched with others report different logprobs
(the batch composition relation must fail) while greedy tokens never change. It has what the
protocol needs of a server: /v1/models with the vocabulary, a prefix cache that reports cached
tokens, and POST /reset_prefix_cache. Standard library only.

Run: python3 perturbing_server.py PORT   (prints "listening on PORT" when ready)
"""
import hashlib
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VOCAB = 512
SPECIAL = [0, 1, 2]
CONTEXT = 4096
BLOCK = 16


class State:
    lock = threading.Lock()
    seen = []  # prompts seen since the last reset (the "prefix cache")


def scores(context):
    """The 20 best (token, logprob) after `context`, best first: a function of the context."""
    digest = hashlib.sha256(json.dumps(context).encode()).digest()
    tokens = []
    for i in range(0, len(digest) - 1, 1):
        t = 3 + (digest[i] * 256 + digest[i + 1]) % (VOCAB - 3)
        if t not in tokens:
            tokens.append(t)
        if len(tokens) == 20:
            break
    while len(tokens) < 20:
        tokens.append(3 + (tokens[-1] + 7) % (VOCAB - 3))
    return [(t, -0.25 * (k + 1) - digest[k % 32] / 1024.0) for k, t in enumerate(tokens)]


def cached_tokens(prompt):
    best = 0
    for other in State.seen:
        n = 0
        while n < min(len(other), len(prompt) - 1) and other[n] == prompt[n]:
            n += 1
        best = max(best, n // BLOCK * BLOCK)
    return best


def complete(prompt, max_tokens, shift, as_ids):
    tokens, top = [], []
    context = list(prompt)
    for _ in range(max_tokens):
        ranked = scores(context)
        tokens.append(ranked[0][0])
        top.append([(t, lp + shift) for t, lp in ranked])
        context.append(ranked[0][0])
    name = (lambda t: f"token_id:{t}") if as_ids else (lambda t: f"t{t}")
    logprobs = {
        "tokens": [name(t) for t in tokens],
        "token_logprobs": [row[0][1] for row in top],
        "top_logprobs": [{name(t): lp for t, lp in row} for row in top],
        "text_offset": list(range(len(tokens))),
    }
    return tokens, logprobs


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/v1/models":
            return self.reply(200, {"object": "list", "data": [{
                "id": "perturbing", "object": "model", "owned_by": "perturbing-test-server",
                "max_model_len": CONTEXT, "vocab_size": VOCAB, "bos_token_id": 1,
                "eos_token_ids": [2], "special_token_ids": SPECIAL}]})
        if self.path == "/health":
            return self.reply(200, {"status": "ok"})
        self.reply(404, {"error": {"message": "unknown path " + self.path}})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path == "/reset_prefix_cache":
            with State.lock:
                State.seen = []
            return self.reply(200, {"status": "ok"})
        if self.path != "/v1/completions":
            return self.reply(404, {"error": {"message": "unknown path " + self.path}})
        prompts = body["prompt"]
        if prompts and isinstance(prompts[0], int):
            prompts = [prompts]
        shift = 1e-3 * (len(prompts) - 1)  # the planted bug: logprobs follow the batch size
        choices, cached, done = [], 0, []
        with State.lock:
            cached = sum(cached_tokens(prompt) for prompt in prompts)
        for i, prompt in enumerate(prompts):
            tokens, logprobs = complete(prompt, body.get("max_tokens", 16), shift,
                                        body.get("return_tokens_as_token_ids", False))
            choice = {"index": i, "text": "", "finish_reason": "length", "logprobs": logprobs}
            if body.get("return_token_ids"):
                choice["token_ids"] = tokens
            choices.append(choice)
            done.append(list(prompt) + tokens)
        with State.lock:
            State.seen.extend(done)  # prompts and outputs enter the cache, as an engine's blocks do
        usage = {"prompt_tokens": sum(map(len, prompts)), "completion_tokens": sum(body.get("max_tokens", 16)
                                                                                    for _ in prompts),
                 "prompt_tokens_details": {"cached_tokens": cached}}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        self.reply(200, {"id": "cmpl-x", "object": "text_completion", "model": "perturbing", "choices": choices,
                         "usage": usage})


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()
