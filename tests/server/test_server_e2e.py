"""Live-server tests of `vosti serve` on the default model: the official `openai`
client (streaming and not, completions and chat), curl, the determinism extensions,
bad input next to a good request, determinism under concurrent load, disconnects,
auth and graceful shutdown.  Run: python3 tests/server/test_server_e2e.py
"""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_harness as h  # noqa: E402

BINARY, MODEL = h.require_model()
try:
    import openai
except ImportError:
    h.skip("the `openai` package is missing; run scripts/setup --test")

SERVER = None
NAME = "smollm2"


def setUpModule():
    global SERVER
    SERVER = h.Server(BINARY, MODEL, ["--max-num-seqs", "32", "--kv-cache-mb", "64"])


def tearDownModule():
    if SERVER:
        code = SERVER.stop()
        assert code == 0, f"vosti serve exited {code}:\n{SERVER.log_text()}"


def client():
    return openai.OpenAI(base_url=SERVER.base_url + "/v1", api_key="unused", max_retries=0, timeout=300)


def extra(obj, name):
    return (obj.model_extra or {}).get(name)


class OpenAiClientTest(unittest.TestCase):
    def test_models_and_health(self):
        self.assertEqual(SERVER.request("GET", "/health")[0], 200)
        models = client().models.list()
        self.assertEqual([m.id for m in models.data], [NAME])

    def test_completion_stream_matches_non_stream(self):
        c = client()
        full = c.completions.create(model=NAME, prompt="The capital of France is", max_tokens=12, temperature=0)
        self.assertTrue(full.choices[0].text)
        self.assertIn(full.choices[0].finish_reason, ("stop", "length"))
        self.assertGreater(full.usage.prompt_tokens, 0)
        self.assertEqual(full.usage.total_tokens, full.usage.prompt_tokens + full.usage.completion_tokens)
        self.assertIsInstance(extra(full.choices[0], "seed"), int)
        chunks = list(c.completions.create(model=NAME, prompt="The capital of France is", max_tokens=12,
                                           temperature=0, stream=True, stream_options={"include_usage": True}))
        text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
        self.assertEqual(text, full.choices[0].text)
        self.assertEqual(chunks[-1].usage.completion_tokens, full.usage.completion_tokens)

    def test_chat_stream_matches_non_stream_with_logprobs(self):
        c = client()
        msgs = [{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Name a colour."}]
        full = c.chat.completions.create(model=NAME, messages=msgs, max_tokens=10, temperature=0, logprobs=True,
                                         top_logprobs=3)
        msg = full.choices[0].message
        self.assertEqual(msg.role, "assistant")
        self.assertTrue(msg.content)
        lp = full.choices[0].logprobs.content
        self.assertEqual(len(lp), full.usage.completion_tokens)
        self.assertEqual(len(lp[0].top_logprobs), 3)
        self.assertEqual(lp[0].top_logprobs[0].logprob, lp[0].logprob)  # greedy: the top one is chosen
        stream = c.chat.completions.create(model=NAME, messages=msgs, max_tokens=10, temperature=0, stream=True,
                                           logprobs=True)
        parts, logprobs = [], []
        for ch in stream:
            if ch.choices and ch.choices[0].delta.content:
                parts.append(ch.choices[0].delta.content)
            if ch.choices and ch.choices[0].logprobs:
                logprobs += [x.logprob for x in ch.choices[0].logprobs.content]
        self.assertEqual("".join(parts), msg.content)
        self.assertEqual(logprobs, [x.logprob for x in lp])  # bit-equal floats

    def test_seeded_sampling_and_n(self):
        c = client()
        kw = dict(model=NAME, prompt="Once upon a time", max_tokens=8, temperature=1.0, top_p=0.95)
        two = c.completions.create(n=2, seed=1234, **kw)
        self.assertEqual([extra(ch, "seed") for ch in two.choices], [1234, 1235])
        second = c.completions.create(seed=1235, **kw)
        self.assertEqual(second.choices[0].text, two.choices[1].text)
        unseeded = c.completions.create(**kw)
        replay = c.completions.create(seed=extra(unseeded.choices[0], "seed"), **kw)
        self.assertEqual(replay.choices[0].text, unseeded.choices[0].text)

    def test_echo_scores_the_prompt_with_zero_max_tokens(self):
        r = client().completions.create(model=NAME, prompt="Hello there, world", max_tokens=0, echo=True,
                                        logprobs=1)
        ch = r.choices[0]
        self.assertEqual(ch.text, "Hello there, world")
        self.assertIsNone(ch.logprobs.token_logprobs[0])
        self.assertEqual(len(ch.logprobs.tokens), r.usage.prompt_tokens)
        self.assertTrue(all(x <= 0 for x in ch.logprobs.token_logprobs[1:]))

    def test_token_ids_and_logits_digests(self):
        status, ids = SERVER.post("/tokenize", {"prompt": "Deterministic inference"})
        self.assertEqual(status, 200)
        r = client().completions.create(model=NAME, prompt=ids["tokens"], max_tokens=5, temperature=0,
                                        extra_body={"return_token_ids": True, "return_logits_digests": True})
        ch = r.choices[0]
        self.assertEqual(extra(ch, "prompt_token_ids"), ids["tokens"])
        self.assertEqual(len(extra(ch, "token_ids")), r.usage.completion_tokens)
        digests = extra(ch, "logits_digests")
        self.assertEqual(len(digests), r.usage.completion_tokens)
        self.assertTrue(all(len(d) == 32 and int(d, 16) >= 0 for d in digests))
        status, text = SERVER.post("/detokenize", {"tokens": extra(ch, "token_ids")})
        self.assertEqual((status, text["prompt"]), (200, ch.text))

    def test_sampling_masks_in_bodies_and_deltas(self):
        kw = dict(model=NAME, prompt="Once upon a time", max_tokens=8, temperature=0.9, top_p=0.9, seed=4,
                  extra_body={"top_k": 6, "return_sampling_mask": True, "return_token_ids": True})
        full = client().completions.create(**kw).choices[0]
        masks, tokens = extra(full, "sampling_masks"), extra(full, "token_ids")
        self.assertEqual(len(masks), len(tokens))
        for token, mask in zip(tokens, masks):
            self.assertTrue(1 <= len(mask) <= 6 and mask == sorted(mask) and token in mask, (token, mask))
        streamed = []
        for ch in client().completions.create(stream=True, **kw):
            if ch.choices:
                streamed += extra(ch.choices[0], "sampling_masks") or []
        self.assertEqual(streamed, masks)
        greedy = client().completions.create(model=NAME, prompt="Hi", max_tokens=3, temperature=0,
                                             extra_body={"return_sampling_mask": True})
        self.assertEqual(extra(greedy.choices[0], "sampling_masks"), [None] * greedy.usage.completion_tokens)

    def test_stop_strings(self):
        c = client()
        kw = dict(model=NAME, prompt="The capital of France is", max_tokens=16, temperature=0)
        full = c.completions.create(**kw).choices[0].text
        self.assertIn(".", full)
        stopped = c.completions.create(stop=["."], **kw).choices[0]
        self.assertEqual(stopped.finish_reason, "stop")
        self.assertEqual(stopped.text, full[:full.index(".")])

    def test_batch_prompts(self):
        r = client().completions.create(model=NAME, prompt=["One", "Two three"], max_tokens=3, temperature=0, n=2)
        self.assertEqual([ch.index for ch in r.choices], [0, 1, 2, 3])
        self.assertEqual(r.choices[0].text, r.choices[1].text)  # greedy: both choices agree

    def test_curl_streaming(self):
        if not shutil.which("curl"):
            self.skipTest("curl is not installed")
        body = json.dumps({"model": NAME, "prompt": "Hi", "max_tokens": 4, "stream": True})
        out = subprocess.run(["curl", "-sN", SERVER.base_url + "/v1/completions", "-H",
                              "Content-Type: application/json", "-d", body], capture_output=True, text=True,
                             timeout=120).stdout
        events = [e for e in out.split("\n\n") if e]
        self.assertEqual(events[-1], "data: [DONE]")
        self.assertTrue(all(e.startswith("data: ") for e in events))
        self.assertEqual(json.loads(events[0][6:])["object"], "text_completion")


BAD_REQUESTS = [
    # (description, method, path, body bytes, expected status, expected param or None)
    ("malformed JSON", "POST", "/v1/completions", b'{"prompt": "x",', 400, None),
    ("wrong type", "POST", "/v1/completions", b'{"prompt": "x", "max_tokens": "ten"}', 400, "max_tokens"),
    ("unknown field", "POST", "/v1/completions", b'{"prompt": "x", "temprature": 1}', 400, "temprature"),
    ("negative max_tokens", "POST", "/v1/completions", b'{"prompt": "x", "max_tokens": -1}', 400, "max_tokens"),
    ("huge max_tokens", "POST", "/v1/completions", b'{"prompt": "x", "max_tokens": 1000000}', 400, "max_tokens"),
    ("temperature < 0", "POST", "/v1/completions", b'{"prompt": "x", "temperature": -1}', 400, "temperature"),
    ("top_p 0", "POST", "/v1/completions", b'{"prompt": "x", "top_p": 0}', 400, "top_p"),
    ("top_p > 1", "POST", "/v1/completions", b'{"prompt": "x", "top_p": 1.5}', 400, "top_p"),
    ("invalid UTF-8", "POST", "/v1/completions", b'{"prompt": "\xff\xfe"}', 400, None),
    ("invalid token id", "POST", "/v1/completions", b'{"prompt": [1, 99999999]}', 400, "prompt"),
    ("negative token id", "POST", "/v1/completions", b'{"prompt": [-5]}', 400, "prompt"),
    ("unknown model", "POST", "/v1/completions", b'{"model": "gpt-9", "prompt": "x"}', 404, None),
    ("wrong method", "GET", "/v1/completions", None, 405, None),
    ("unknown path", "POST", "/v1/engines", b'{}', 404, None),
    ("empty messages", "POST", "/v1/chat/completions", b'{"messages": []}', 400, "messages"),
    ("bad logit_bias", "POST", "/v1/completions", b'{"prompt": "x", "logit_bias": {"999999": 1}}', 400, "logit_bias"),
]


class BadInputTest(unittest.TestCase):
    def check_error(self, status, body, want_status, want_param, what):
        self.assertEqual(status, want_status, f"{what}: {body}")
        self.assertIsInstance(body, dict, what)
        err = body["error"]
        self.assertTrue(err["message"], what)
        self.assertIn("type", err)
        if want_param:
            self.assertEqual(err["param"], want_param, what)

    def test_bad_requests_never_disturb_a_neighbour(self):
        good = {"model": NAME, "prompt": "The quick brown fox", "max_tokens": 24, "temperature": 0,
                "ignore_eos": True, "logprobs": 1, "stream": True}
        _, baseline, _ = SERVER.stream("/v1/completions", good)
        result = {}
        t = threading.Thread(target=lambda: result.update(r=SERVER.stream("/v1/completions", good)))
        t.start()
        for what, method, path, body, want, param in BAD_REQUESTS:
            status, reply = SERVER.request(method, path, raw=body)
            self.check_error(status, reply, want, param, what)
        status, reply = SERVER.post("/v1/completions", {"prompt": "word " * 9000, "max_tokens": 1})
        self.check_error(status, reply, 400, None, "prompt over the context length")
        self.assertIn("maximum context length is", reply["error"]["message"])
        status, reply = SERVER.request("POST", "/v1/completions", raw=b"x" * (9 << 20))
        self.assertEqual(status, 413)
        t.join()
        status, chunks, done = result["r"]
        self.assertEqual((status, done), (200, True))
        strip = lambda cs: [(c["choices"][0]["text"], c["choices"][0]["logprobs"]) for c in cs]  # noqa: E731
        self.assertEqual(strip(chunks), strip(baseline))


def fingerprint(body, seeded):
    """What must be bit-identical: token ids, logprobs (as JSON floats), digests (and the seed if one was given)."""
    return [(c["token_ids"], c["logprobs"]["token_logprobs"] if c["logprobs"] else None, c["logits_digests"],
             c["seed"] if seeded else None) for c in body["choices"]]


class DeterminismUnderLoadTest(unittest.TestCase):
    def test_concurrent_responses_are_bit_identical_to_sequential(self):
        rng = random.Random(5)
        probe_prompts = ["The history of", "def fibonacci(n):", "Paris is", "1, 2, 3, 5, 8,",
                         "In a distant galaxy, far away, there lived", "Q: What is 2+2?\nA:"]
        probes = []
        for i, p in enumerate(probe_prompts):
            sampling = {"temperature": 0} if i % 2 == 0 else {"temperature": 0.8, "top_k": 50, "seed": 100 + i}
            probes.append(dict(model=NAME, prompt=p, max_tokens=8, logprobs=2, ignore_eos=True,
                               return_token_ids=True, return_logits_digests=True, **sampling))
        reference = []
        for p in probes:
            status, body = SERVER.post("/v1/completions", p)
            self.assertEqual(status, 200, body)
            reference.append(fingerprint(body, "seed" in p))

        def noise(k):
            words = " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "omega"]) for _ in range(3 + k * 7))
            return dict(model=NAME, prompt=words, max_tokens=1 + k % 12, temperature=1.0, stream=k % 2 == 0)

        jobs = [("probe", i % len(probes)) for i in range(40)] + [("noise", k) for k in range(24)]
        rng.shuffle(jobs)

        def run(job):
            kind, i = job
            time.sleep(random.random() * 1.5)  # staggered arrivals
            if kind == "probe":
                status, body = SERVER.post("/v1/completions", probes[i])
                return kind, i, status, fingerprint(body, "seed" in probes[i]) if status == 200 else body
            req = noise(i)
            if req["stream"]:
                status, _, done = SERVER.stream("/v1/completions", req)
                return kind, i, status if done else 599, None
            return (kind, i) + (SERVER.post("/v1/completions", req)[0], None)

        with ThreadPoolExecutor(64) as pool:
            results = list(pool.map(run, jobs))
        for kind, i, status, fp in results:
            self.assertEqual(status, 200, (kind, i, fp))
            if kind == "probe":
                self.assertEqual(fp, reference[i], f"probe {i} differs under load")


class DisconnectTest(unittest.TestCase):
    def test_client_gone_mid_stream_frees_its_blocks(self):
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", SERVER.port, timeout=60)
        body = {"model": NAME, "prompt": "Tell me a long story.", "max_tokens": 400, "ignore_eos": True,
                "stream": True}
        conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        seen = 0
        for line in resp:
            if line.startswith(b"data: "):
                seen += 1
                if seen == 3:
                    break
        conn.sock.close()
        conn.close()
        m = SERVER.wait_idle(30)
        self.assertEqual(m["vosti_kv_blocks_used"], 0)
        self.assertEqual(m["vosti_num_requests_running"], 0)
        self.assertGreaterEqual(m.get('vosti_request_finished_total{finished_reason="abort"}', 0), 1)


class SpeculationTest(unittest.TestCase):
    """A server with n-gram speculation answers bit for bit as the plain one (tokens, logprobs,
    logits digests, streamed or not), counts its drafts in /metrics, and a client that leaves
    mid-stream leaves no KV block."""

    def test_speculating_server_answers_as_the_plain_one(self):
        spec = h.Server(BINARY, MODEL, ["--max-num-seqs", "32", "--kv-cache-mb", "64", "--speculative-config",
                                        '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1}'])
        try:
            prompts = ["One two three four five six seven eight. One two three",
                       "def add(a, b):\n    return a + b\n\ndef add(a, b):\n"]
            for prompt in prompts:
                for sampling in ({"temperature": 0}, {"temperature": 0.8, "top_p": 0.9, "seed": 11}):
                    body = {"model": NAME, "prompt": prompt, "max_tokens": 32, "logprobs": 2,
                            "return_token_ids": True, "return_logits_digests": True, **sampling}
                    want = SERVER.post("/v1/completions", body)
                    got = spec.post("/v1/completions", body)
                    self.assertEqual(want[0], 200, want[1])
                    self.assertEqual(got[0], 200, got[1])
                    a, b = want[1]["choices"][0], got[1]["choices"][0]
                    for key in ("text", "token_ids", "logits_digests", "logprobs", "finish_reason"):
                        self.assertEqual(a[key], b[key], key)
                    status, chunks, done = spec.stream("/v1/completions", {**body, "stream": True})
                    self.assertTrue(done)
                    self.assertEqual([t for c in chunks for t in c["choices"][0].get("token_ids") or []],
                                     a["token_ids"])
            m = spec.wait_idle(30)
            self.assertGreater(m["vosti_spec_decode_num_draft_tokens_total"], 0)
            self.assertGreater(m["vosti_spec_decode_num_accepted_tokens_total"], 0)
            self.assertEqual(m["vosti_kv_blocks_used"], 0)
        finally:
            self.assertEqual(spec.stop(), 0, spec.log_text())


class MetricsTest(unittest.TestCase):
    def test_metrics_exposition(self):
        client().completions.create(model=NAME, prompt="Metrics", max_tokens=3, temperature=0)
        m = SERVER.metrics()
        for name in ["vosti_num_requests_running", "vosti_num_requests_waiting", "vosti_kv_blocks_used",
                     "vosti_prefix_cache_hit_rate", "vosti_num_preemptions_total",
                     "vosti_generation_tokens_per_second", "vosti_time_to_first_token_seconds_count",
                     "vosti_time_per_output_token_seconds_count", "vosti_max_num_batched_tokens",
                     "vosti_max_num_seqs", "vosti_block_size", "vosti_max_model_len",
                     "vosti_prefix_caching_enabled"]:
            self.assertIn(name, m)
        self.assertGreater(m["vosti_time_to_first_token_seconds_count"], 0)
        self.assertGreater(m["vosti_generation_tokens_total"], 0)
        self.assertEqual(m["vosti_max_num_seqs"], 32)  # as the server was started
        self.assertEqual(m["vosti_block_size"], 16)


class ProtocolSupportTest(unittest.TestCase):
    """What a client needs to run the paper's protocol against the server (issue 40)."""

    def test_models_lists_the_token_domain(self):
        status, body = SERVER.request("GET", "/v1/models")
        self.assertEqual(status, 200)
        m = body["data"][0]
        self.assertEqual(m["vocab_size"], 49152)  # SmolLM2
        self.assertIsInstance(m["bos_token_id"], int)
        self.assertIn(m["bos_token_id"], m["special_token_ids"])
        self.assertTrue(m["eos_token_ids"])
        self.assertTrue(set(m["eos_token_ids"]) <= set(m["special_token_ids"]))
        self.assertEqual(m["special_token_ids"], sorted(set(m["special_token_ids"])))
        _, ids = SERVER.post("/tokenize", {"prompt": "<|im_start|>user"})
        self.assertIn(ids["tokens"][0], m["special_token_ids"])  # an added token

    def digests_of(self, prompt, **kw):
        body = dict(model=NAME, prompt=prompt, max_tokens=1, temperature=0, return_logits_digests=True, **kw)
        status, r = SERVER.post("/v1/completions", body)
        self.assertEqual(status, 200, r)
        return r["choices"][0]["logits_digests"], r["usage"]["prompt_tokens_details"]["cached_tokens"]

    def test_reset_prefix_cache_makes_cold_cold(self):
        prompt = [(i * 7919 + 13) % 40000 + 100 for i in range(70)]
        cold, cached = self.digests_of(prompt)
        self.assertEqual(cached, 0)
        warm, cached = self.digests_of(prompt)
        self.assertEqual(cached, 64)  # four full blocks of 16
        status, _ = SERVER.post("/reset_prefix_cache", {})
        self.assertEqual(status, 200)
        again, cached = self.digests_of(prompt)
        self.assertEqual(cached, 0)
        self.assertEqual(warm, cold)
        self.assertEqual(again, cold)
        self.assertEqual(SERVER.request("GET", "/reset_prefix_cache")[0], 405)

    def test_echo_digests_are_prefill_rows_as_full_rows(self):
        prompt = [(i * 104729 + 7) % 40000 + 100 for i in range(40)]
        echo, _ = self.digests_of(prompt, echo=True)
        self.assertEqual(len(echo), len(prompt) + 1)  # prompt positions, then the output position
        self.assertIsNone(echo[0])
        SERVER.post("/reset_prefix_cache", {})
        for j in (1, 17, 39, 40):  # the row that scored prompt[j] is the last row of a prefill of prompt[:j]
            last, _ = self.digests_of(prompt[:j])
            self.assertEqual(echo[j], last[0], f"prompt position {j}")


class AuthAndShutdownTest(unittest.TestCase):
    def test_api_key_and_graceful_shutdown(self):
        s = h.Server(BINARY, MODEL, ["--kv-cache-mb", "32"], api_key="s3cret")
        try:
            self.assertEqual(s.request("GET", "/health", headers={})[0], 200)
            self.assertEqual(s.request("GET", "/v1/models", headers={})[0], 401)
            bad = {"Authorization": "Bearer s3creT", "Content-Type": "application/json"}
            self.assertEqual(s.request("POST", "/v1/completions", {"prompt": "x"}, headers=bad)[0], 401)
            c = openai.OpenAI(base_url=s.base_url + "/v1", api_key="s3cret", max_retries=0)
            self.assertEqual(c.models.list().data[0].id, NAME)
            with self.assertRaises(openai.AuthenticationError):
                openai.OpenAI(base_url=s.base_url + "/v1", api_key="nope", max_retries=0).models.list()
            # SIGTERM while a request runs: it finishes, then the server exits 0.
            result = {}
            body = {"model": NAME, "prompt": "Count:", "max_tokens": 20, "ignore_eos": True, "stream": True}
            t = threading.Thread(target=lambda: result.update(r=s.stream("/v1/completions", body)))
            t.start()
            time.sleep(1.0)
            s.proc.send_signal(signal.SIGTERM)
            t.join(120)
            status, chunks, done = result["r"]
            self.assertEqual((status, done), (200, True))
            self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "length")
            self.assertEqual(s.proc.wait(60), 0, s.log_text())
        finally:
            s.stop()

    def test_shutdown_deadline_aborts_what_is_left(self):
        s = h.Server(BINARY, MODEL, ["--kv-cache-mb", "32", "--shutdown-timeout", "1"])
        try:
            result = {}
            body = {"model": NAME, "prompt": "Go on:", "max_tokens": 600, "ignore_eos": True, "stream": True}
            t = threading.Thread(target=lambda: result.update(r=s.stream("/v1/completions", body)))
            t.start()
            time.sleep(1.5)
            s.proc.send_signal(signal.SIGTERM)
            t.join(60)
            status, chunks, done = result["r"]
            self.assertEqual((status, done), (200, True))
            self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "abort")
            self.assertEqual(s.proc.wait(30), 0, s.log_text())
        finally:
            s.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
