"""Live-server tests of the RL trainers' routes of `vosti serve` (issue 42) on the default model:
the weight-sync protocol (vLLM's init/start/update/finish with base64 bytes, SGLang's
update_weights_from_disk), pause/resume in every mode, sleep/wake, the deployment id in every
response and pinned requests; bad bodies get a 4xx naming the problem and the old weights keep
serving; a weight update concurrent with 64 streaming clients loses no request and mixes no
weights inside one response.  Run: python3 tests/server/test_server_rl.py
"""
import base64
import os
import sys
import threading
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_harness as h  # noqa: E402

BINARY, MODEL = h.require_model()
try:
    import numpy as np
except ImportError:
    h.skip("numpy is missing; run scripts/setup --test")

SERVER = None
NAME = "smollm2"
HIDDEN = 576  # SmolLM2-135M, the default model
ORIGINAL = None  # GET /deployment at start


def setUpModule():
    global SERVER, ORIGINAL
    SERVER = h.Server(BINARY, MODEL, ["--max-num-seqs", "32", "--kv-cache-mb", "64", "--no-access-log"])
    status, ORIGINAL = SERVER.request("GET", "/deployment")
    assert status == 200, ORIGINAL


def tearDownModule():
    if SERVER:
        code = SERVER.stop()
        assert code == 0, f"vosti serve exited {code}:\n{SERVER.log_text()}"


def b64(array):
    return base64.b64encode(np.ascontiguousarray(array).tobytes()).decode()


def chunk(tensors):
    """{"update_info"} for [(name, array)] (float32, float16 arrays)."""
    return {"update_info": {"names": [n for n, _ in tensors],
                            "dtype_names": [str(a.dtype) for _, a in tensors],
                            "shapes": [list(a.shape) for _, a in tensors],
                            "data_base64": [b64(a) for _, a in tensors]}}


def ok(test, status, body, code=200):
    test.assertEqual(status, code, body)
    return body


def probe(prompt="The capital of France is", max_tokens=8, **extra):
    """A greedy completion with its digests; returns (digests, token ids, the 'vosti' object)."""
    status, body = SERVER.post("/v1/completions", dict(model=NAME, prompt=prompt, max_tokens=max_tokens,
                                                       temperature=0, ignore_eos=True, return_token_ids=True,
                                                       return_logits_digests=True, **extra))
    assert status == 200, body
    c = body["choices"][0]
    return c["logits_digests"], c["token_ids"], body["vosti"]


def update(test, tensors_chunks):
    ok(test, *SERVER.post("/init_weight_transfer_engine", {"init_info": {"backend": "http"}}))
    ok(test, *SERVER.post("/start_weight_update", {"is_checkpoint_format": True}))
    for c in tensors_chunks:
        ok(test, *SERVER.post("/update_weights", chunk(c)))
    return ok(test, *SERVER.post("/finish_weight_update", {}))


def restore(test):
    body = ok(test, *SERVER.post("/update_weights_from_disk", {"model_path": MODEL}))
    test.assertTrue(body["success"])
    test.assertEqual(body["weights_id"], ORIGINAL["weights_id"])
    return body


def error_of(test, status, body, code):
    test.assertEqual(status, code, body)
    return body["error"]["message"]


class DeploymentTest(unittest.TestCase):
    def test_every_response_names_the_deployment(self):
        status, d = SERVER.request("GET", "/deployment")
        ok(self, status, d)
        for k in ("deployment_id", "weights_id", "weights_version", "model", "weights_dtype", "kv_cache_dtype",
                  "kernel_plan", "device", "vosti_version"):
            self.assertIn(k, d)
        self.assertEqual(len(d["deployment_id"]), 32)
        _, _, v = probe()
        self.assertEqual(v["deployment_id"], d["deployment_id"])
        self.assertEqual(v["weights_id"], d["weights_id"])
        self.assertEqual(v["weights_version"], d["weights_version"])
        status, chunks, done = SERVER.stream("/v1/chat/completions", {
            "model": NAME, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "stream": True})
        self.assertTrue(done)
        for c in chunks:
            self.assertEqual(c["vosti"]["deployment_id"], d["deployment_id"])

    def test_pinned_requests(self):
        d = SERVER.request("GET", "/deployment")[1]
        probe(vosti={"deployment_id": d["deployment_id"]})
        wrong = "0" * 32
        msg = error_of(self, *SERVER.post("/v1/completions", {"model": NAME, "prompt": "Hi", "max_tokens": 2,
                                                               "vosti": {"deployment_id": wrong}}), 409)
        self.assertIn(wrong, msg)
        self.assertIn(d["deployment_id"], msg)
        headers = dict(SERVER.headers(), **{"X-Vosti-Deployment-Id": wrong})
        status, body = SERVER.request("POST", "/v1/completions", {"model": NAME, "prompt": "Hi", "max_tokens": 2},
                                      headers=headers)
        self.assertIn(d["deployment_id"], error_of(self, status, body, 409))
        headers = dict(SERVER.headers(), **{"X-Vosti-Deployment-Id": d["deployment_id"]})
        ok(self, *SERVER.request("POST", "/v1/completions", {"model": NAME, "prompt": "Hi", "max_tokens": 2},
                                 headers=headers))
        msg = error_of(self, *SERVER.post("/v1/completions", {"model": NAME, "prompt": "Hi",
                                                               "vosti": {"deployment": 1}}), 400)
        self.assertIn("vosti.deployment", msg)


class WeightSyncTest(unittest.TestCase):
    def test_update_changes_outputs_and_the_same_weights_restore_them(self):
        before, ids_before, v0 = probe()
        ones = np.ones(HIDDEN, dtype=np.float32)
        half = np.full(HIDDEN, 0.5, dtype=np.float16)
        body = update(self, [[("model.norm.weight", ones)], [("model.layers.0.input_layernorm.weight", half)]])
        self.assertEqual(body["weights_version"], v0["weights_version"] + 1)
        self.assertNotEqual(body["weights_id"], v0["weights_id"])
        self.assertNotEqual(body["deployment_id"], v0["deployment_id"])
        after, _, v1 = probe()
        self.assertEqual(v1["weights_id"], body["weights_id"])
        self.assertNotEqual(after, before)
        back = restore(self)
        self.assertEqual(back["deployment_id"], v0["deployment_id"])  # the id follows the values
        self.assertEqual(back["weights_version"], v0["weights_version"] + 2)
        again, ids_again, v2 = probe()
        self.assertEqual((again, ids_again), (before, ids_before))
        self.assertEqual(v2["weights_version"], back["weights_version"])

    def test_chunked_update_with_the_served_values_keeps_every_digest(self):
        try:
            import vosti
        except ImportError:
            self.skipTest("the vosti package does not import (PYTHONPATH=build/python)")
        llm = vosti.LLM(MODEL, skip_tokenizer_init=True, num_threads=1)
        served = llm.get_weights(["model.norm.weight", "model.layers.1.mlp.down_proj.weight"])
        del llm
        before, _, v0 = probe()
        # Two chunks; the down projection is 3.4 MiB of f32 (4.5 MiB as base64, under the 8 MiB body limit).
        body = update(self, [[("model.norm.weight", served["model.norm.weight"])],
                             [("model.layers.1.mlp.down_proj.weight", served["model.layers.1.mlp.down_proj.weight"])]])
        self.assertEqual(body["weights_id"], v0["weights_id"])
        self.assertEqual(body["deployment_id"], v0["deployment_id"])
        after, _, v1 = probe()
        self.assertEqual(after, before)
        self.assertEqual(v1["weights_version"], v0["weights_version"] + 1)

    def test_update_from_disk_with_the_same_file_keeps_every_digest(self):
        before, _, v0 = probe()
        body = restore(self)
        self.assertEqual(body["weights_version"], v0["weights_version"] + 1)
        after, _, v1 = probe()
        self.assertEqual(after, before)
        self.assertEqual(v1["weights_version"], body["weights_version"])

    def test_bad_bodies_name_the_problem_and_the_old_weights_keep_serving(self):
        before, _, v0 = probe()
        post = SERVER.post
        self.assertIn("without /start_weight_update", error_of(self, *post("/finish_weight_update", {}), 409))
        ones = np.ones(HIDDEN, dtype=np.float32)
        self.assertIn("without /start_weight_update",
                      error_of(self, *post("/update_weights", chunk([("model.norm.weight", ones)])), 409))
        self.assertIn("CUDA IPC", error_of(self, *post("/init_weight_transfer_engine",
                                                       {"init_info": {"backend": "ipc"}}), 501))
        self.assertIn("NCCL", error_of(self, *post("/init_weight_transfer_engine",
                                                   {"init_info": {"backend": "nccl"}}), 501))
        self.assertIn("'carrier'", error_of(self, *post("/init_weight_transfer_engine",
                                                        {"init_info": {"backend": "carrier"}}), 400))
        ok(self, *post("/init_weight_transfer_engine", {"init_info": {"backend": "http"}}))
        ok(self, *post("/start_weight_update", {}))
        self.assertIn("model.norm.weightx",
                      error_of(self, *post("/update_weights", chunk([("model.norm.weightx", ones)])), 400))
        self.assertIn("model.norm.weight", error_of(
            self, *post("/update_weights", chunk([("model.norm.weight", np.ones(HIDDEN + 1, np.float32))])), 400))
        self.assertIn("int8", error_of(
            self, *post("/update_weights", chunk([("model.norm.weight", np.ones(HIDDEN, np.int8))])), 400))
        bad = chunk([("model.norm.weight", ones)])
        bad["update_info"]["data_base64"] = ["@@@"]
        self.assertIn("base64", error_of(self, *post("/update_weights", bad), 400))
        short = chunk([("model.norm.weight", ones)])
        short["update_info"]["data_base64"] = [b64(ones[:-1])]
        self.assertIn("model.norm.weight", error_of(self, *post("/update_weights", short), 400))
        uneven = chunk([("model.norm.weight", ones)])
        uneven["update_info"]["shapes"] = []
        self.assertIn("equal length", error_of(self, *post("/update_weights", uneven), 400))
        ipc = chunk([("model.norm.weight", ones)])
        ipc["update_info"]["ipc_handles"] = []
        self.assertIn("CUDA IPC", error_of(self, *post("/update_weights", ipc), 501))
        self.assertIn("'extra'", error_of(self, *post("/update_weights", {"update_info": {}, "extra": 1}), 400))
        # Every chunk was refused whole: finishing swaps in the same values.
        body = ok(self, *post("/finish_weight_update", {}))
        self.assertEqual(body["weights_id"], v0["weights_id"])
        self.assertIn("/nonexistent", error_of(self, *post("/update_weights_from_disk",
                                                           {"model_path": "/nonexistent/model"}), 400))
        self.assertIn("flush_cache", error_of(self, *post("/update_weights_from_disk",
                                                          {"model_path": MODEL, "flush_cache": False}), 400))
        self.assertIn("model_path", error_of(self, *post("/update_weights_from_disk", {}), 400))
        self.assertIn("level", error_of(self, *post("/sleep?level=3", None), 400))
        self.assertIn("sideways", error_of(self, *post("/pause", {"mode": "sideways"}), 400))
        self.assertEqual(SERVER.request("GET", "/update_weights")[0], 405)
        after, _, v1 = probe()
        self.assertEqual(after, before)
        self.assertEqual(v1["weights_id"], v0["weights_id"])


class SleepTest(unittest.TestCase):
    def test_sleep_frees_memory_and_wake_restores_every_bit(self):
        before, ids, v0 = probe()
        for level in (1, 2):
            body = ok(self, *SERVER.post(f"/sleep?level={level}", None))
            self.assertEqual(body["kv_cache_bytes"], 0)
            if level == 2:
                self.assertEqual(body["weight_bytes"], 0)
            else:
                self.assertGreater(body["weight_bytes"], 0)
            self.assertEqual(SERVER.request("GET", "/is_sleeping")[1], {"is_sleeping": True, "level": level})
            m = SERVER.metrics()
            self.assertEqual(m["vosti_kv_cache_bytes"], 0)
            status, err = SERVER.post("/v1/completions", {"model": NAME, "prompt": "Hi", "max_tokens": 2})
            self.assertIn("wake_up", error_of(self, status, err, 503))
            self.assertIn("asleep", error_of(self, *SERVER.post("/sleep?level=1", None), 409))
            ok(self, *SERVER.post("/init_weight_transfer_engine", {}))
            self.assertIn("asleep", error_of(self, *SERVER.post("/start_weight_update", {}), 409))
            self.assertIn("asleep", error_of(self, *SERVER.post("/update_weights_from_disk",
                                                                {"model_path": MODEL}), 409))
            woke = ok(self, *SERVER.post("/wake_up", None))
            self.assertTrue(woke["was_asleep"])
            self.assertGreater(woke["kv_cache_bytes"], 0)
            after, ids_after, v1 = probe()
            self.assertEqual((after, ids_after), (before, ids), f"level {level}")
            self.assertEqual(v1, v0)
        self.assertFalse(ok(self, *SERVER.post("/wake_up", None))["was_asleep"])


def stream_in_thread(body, results, key):
    def run():
        results[key] = SERVER.stream("/v1/completions", body)
    t = threading.Thread(target=run)
    t.start()
    return t


LONG = dict(model=NAME, prompt="Tell me a long story about", max_tokens=48, temperature=0, ignore_eos=True,
            stream=True, return_logits_digests=True)


def digests_of(chunks):
    return [d for c in chunks for ch in c["choices"] for d in (ch.get("logits_digests") or [])]


class PauseTest(unittest.TestCase):
    def wait_running(self):
        deadline = time.time() + 60
        while SERVER.metrics()["vosti_num_requests_running"] < 1 and time.time() < deadline:
            time.sleep(0.02)

    def test_keep_freezes_and_resume_finishes_bit_identically(self):
        status, ref, done = SERVER.stream("/v1/completions", LONG)
        self.assertTrue(done)
        results = {}
        t = stream_in_thread(LONG, results, "kept")
        self.wait_running()
        ok(self, *SERVER.post("/pause", {"mode": "keep"}))
        self.assertEqual(SERVER.request("GET", "/is_paused")[1], {"is_paused": True})
        held = {}
        t2 = threading.Thread(target=lambda: held.update(r=probe()))
        t2.start()
        time.sleep(1.0)
        self.assertNotIn("r", held)  # held while paused
        self.assertTrue(t.is_alive())
        # The kept request holds old-weight KV: an update now would mix weights, so it is refused.
        msg = error_of(self, *SERVER.post("/update_weights_from_disk", {"model_path": MODEL}), 409)
        self.assertIn("in flight", msg)
        ok(self, *SERVER.post("/resume", None))
        t.join(120)
        t2.join(120)
        status, chunks, done = results["kept"]
        self.assertTrue(done)
        self.assertEqual(digests_of(chunks), digests_of(ref))
        self.assertIn("r", held)

    def test_wait_lets_requests_finish_and_abort_ends_them(self):
        for mode, reason in (("wait", "length"), ("abort", "abort")):
            results = {}
            t = stream_in_thread(LONG, results, mode)
            self.wait_running()
            ok(self, *SERVER.post(f"/pause?mode={mode}", None))
            t.join(120)
            status, chunks, done = results[mode]
            self.assertEqual(status, 200)
            self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], reason, mode)
            self.assertEqual(SERVER.metrics()["vosti_num_requests_running"], 0)
            ok(self, *SERVER.post("/resume", None))
            probe()


class SglangRoutesTest(unittest.TestCase):
    def test_sglang_names_do_what_their_vllm_twins_do(self):
        before, ids, v0 = probe()
        body = ok(self, *SERVER.post("/release_memory_occupation", {}))
        self.assertEqual((body["level"], body["weight_bytes"]), (2, 0))
        self.assertTrue(ok(self, *SERVER.post("/resume_memory_occupation", {}))["was_asleep"])
        ok(self, *SERVER.post("/pause_generation", {"mode": "in_place"}))
        self.assertTrue(SERVER.request("GET", "/is_paused")[1]["is_paused"])
        self.assertTrue(ok(self, *SERVER.post("/continue_generation", {}))["was_paused"])
        self.assertIn("in_place", error_of(self, *SERVER.post("/pause_generation", {"mode": "wait"}), 400))
        body = ok(self, *SERVER.post("/update_weights_from_disk", {"model_path": MODEL, "abort_all_requests": True}))
        self.assertEqual(body["weights_id"], v0["weights_id"])
        after, ids_after, _ = probe()
        self.assertEqual((after, ids_after), (before, ids))


class ConcurrentUpdateTest(unittest.TestCase):
    def test_update_under_64_streaming_clients_loses_nothing_and_mixes_nothing(self):
        prompts = [f"Story number {i}: once upon a time" for i in range(8)]
        b_weights = [("model.norm.weight", np.full(HIDDEN, 1.5, dtype=np.float32))]

        def body(i):
            return dict(model=NAME, prompt=prompts[i % len(prompts)], max_tokens=10, temperature=0, ignore_eos=True,
                        stream=True, return_logits_digests=True)

        def reference():
            out = {}
            for i in range(len(prompts)):
                status, chunks, done = SERVER.stream("/v1/completions", body(i))
                assert done
                out[i] = digests_of(chunks)
            return out

        ref = {ORIGINAL["weights_id"]: reference()}
        b_id = update(self, [b_weights])["weights_id"]
        ref[b_id] = reference()
        restore(self)

        def client(i):
            time.sleep((i % 16) * 0.05)
            status, chunks, done = SERVER.stream("/v1/completions", body(i))
            ids = {c["vosti"]["weights_id"] for c in chunks}
            return i, status, done, ids, digests_of(chunks)

        def toggler():
            time.sleep(0.3)
            update(self, [b_weights])
            time.sleep(0.3)
            restore(self)

        with ThreadPoolExecutor(65) as pool:
            tog = pool.submit(toggler)
            results = list(pool.map(client, range(64)))
            tog.result()
        seen = set()
        for i, status, done, ids, digests in results:
            self.assertEqual((status, done), (200, True), i)
            self.assertEqual(len(ids), 1, f"client {i} saw weights {ids} in one response")
            wid = ids.pop()
            seen.add(wid)
            self.assertEqual(digests, ref[wid][i % len(prompts)], f"client {i} on weights {wid}")
        print(f"weights seen by the 64 clients: {sorted(seen)}")
        self.assertEqual(SERVER.request("GET", "/deployment")[1]["weights_id"], ORIGINAL["weights_id"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
