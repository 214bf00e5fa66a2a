"""LLM.generate / chat / stream / score: the same bits as the CLI and the server, batched as
alone, scored as sampled."""
import json
import subprocess
import threading

import numpy as np
import pytest

from vosti import SamplingParams

PROMPT_IDS = [1, 504, 3458, 282, 4649, 314]


def f32(xs):
    return np.asarray(xs, dtype=np.float32).tobytes()


def test_generate_equals_the_cli(llm, vosti_bin, model_path, device):
    cli = subprocess.run([vosti_bin, "generate", "--model", model_path, "--device", device,
                          "--prompt-ids", *map(str, PROMPT_IDS),
                          "--temperature", "0.8", "--seed", "1234", "--max-tokens", "12", "--json"],
                         capture_output=True, text=True, check=True, timeout=300)
    ref = json.loads(cli.stdout)
    out = llm.generate(PROMPT_IDS, SamplingParams(temperature=0.8, seed=1234, max_tokens=12))[0].outputs[0]
    assert out.token_ids == ref["ids"]
    assert f32(out.token_logprobs) == f32(ref["logprobs"])
    assert out.text == ref["text"]
    assert out.seed == ref["seed"] == 1234
    assert out.finish_reason == ref["finish_reason"]


def test_generate_and_chat_equal_the_server(llm, vosti_bin, model_path, device):
    import server_harness

    server = server_harness.Server(vosti_bin, model_path, extra_args=["--device", device])
    try:
        body = {"model": "smollm2", "prompt": PROMPT_IDS, "max_tokens": 10, "temperature": 0.9, "seed": 77,
                "logprobs": 2, "return_token_ids": True, "return_logits_digests": True}
        status, r = server.post("/v1/completions", body)
        assert status == 200, r
        choice = r["choices"][0]
        out = llm.generate(PROMPT_IDS, SamplingParams(temperature=0.9, seed=77, max_tokens=10, logprobs=2,
                                                      logits_digests=True))[0].outputs[0]
        assert out.token_ids == choice["token_ids"]
        assert out.logits_digests == choice["logits_digests"]
        assert f32(out.token_logprobs) == f32(choice["logprobs"]["token_logprobs"])
        assert out.text == choice["text"]
        for mine, theirs in zip(out.logprobs, choice["logprobs"]["top_logprobs"]):
            top = {llm.get_tokenizer().decode([t]): lp.logprob for t, lp in mine.items() if lp.rank is not None}
            assert f32(sorted(top.values())) == f32(sorted(theirs.values()))

        messages = [{"role": "user", "content": "Name a colour."}]
        status, r = server.post("/v1/chat/completions", {"model": "smollm2", "messages": messages, "max_tokens": 10,
                                                         "temperature": 0.7, "seed": 5, "logprobs": True,
                                                         "return_logits_digests": True})
        assert status == 200, r
        choice = r["choices"][0]
        out = llm.chat(messages, SamplingParams(temperature=0.7, seed=5, max_tokens=10, logits_digests=True))
        assert out[0].outputs[0].text == choice["message"]["content"]
        assert out[0].outputs[0].logits_digests == choice["logits_digests"]
        assert f32(out[0].outputs[0].token_logprobs) == f32([c["logprob"] for c in choice["logprobs"]["content"]])
    finally:
        server.stop()


def _seq(o):
    return o.token_ids, f32(o.token_logprobs), o.logits_digests, o.text, o.seed


def test_batched_equals_one_by_one(llm):
    prompts = ["The capital of France is", "1, 2, 3,", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] * 5, "Once upon a time"]
    params = [SamplingParams(n=2, temperature=1.0, top_k=40, seed=100 + i, max_tokens=14, logits_digests=True)
              for i in range(len(prompts))]
    together = llm.generate(prompts, params)
    for i, p in enumerate(prompts):
        alone = llm.generate(p, params[i])[0]
        assert [_seq(o) for o in alone.outputs] == [_seq(o) for o in together[i].outputs]
        assert together[i].outputs[1].seed == 101 + i
    assert [o.prompt for o in together] == [p if isinstance(p, str) else None for p in prompts]


def test_concurrent_threads_share_the_batch_and_match(llm):
    params = SamplingParams(temperature=0.8, seed=9, max_tokens=16, logits_digests=True)
    expected = [_seq(llm.generate(f"Item {i}:", params)[0].outputs[0]) for i in range(4)]
    got = [None] * 4

    def work(i):
        got[i] = _seq(llm.generate(f"Item {i}:", params)[0].outputs[0])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == expected


def test_score_equals_generation_logprobs(llm):
    sp = SamplingParams(n=3, temperature=1.2, seed=4242, max_tokens=20, logprobs=3)
    out = llm.generate("Write a short poem about the sea.", sp)[0]
    completions = [c.token_ids for c in out.outputs]
    scores = llm.score([out.prompt_token_ids] * 3, completions, logprobs=3)
    for s, c in zip(scores, out.outputs):
        assert f32(s.logprobs) == f32(c.token_logprobs)
        assert [{t: lp.logprob for t, lp in d.items()} for d in s.top_logprobs] == \
               [{t: lp.logprob for t, lp in d.items()} for d in c.logprobs]
        assert s.weights_id == out.weights_id and s.deployment_id == out.deployment_id
    one = llm.score(out.prompt_token_ids, completions[0])
    assert f32(one.logprobs) == f32(out.outputs[0].token_logprobs)
    assert out.outputs[0].cumulative_logprob == pytest.approx(sum(out.outputs[0].token_logprobs))


def test_prompt_logprobs_match_score(llm):
    ids = llm.get_tokenizer().encode("The quick brown fox jumps over the lazy dog")
    out = llm.generate(ids, SamplingParams(max_tokens=1, temperature=0, prompt_logprobs=2))[0]
    assert out.prompt_logprobs[0] is None and len(out.prompt_logprobs) == len(ids)
    s = llm.score(ids[:1], ids[1:])
    assert f32([d[t].logprob for d, t in zip(out.prompt_logprobs[1:], ids[1:])]) == f32(s.logprobs)


def test_stream_adds_up_to_generate(llm):
    sp = SamplingParams(n=2, temperature=0.9, seed=31, max_tokens=12)
    whole = llm.generate("Tell me a joke.", sp)[0]
    for delta in (False, True):
        tokens, text = {0: [], 1: []}, {0: "", 1: ""}
        last = {}
        for update in llm.stream("Tell me a joke.", sp, delta=delta):
            c = update.outputs[0]
            if delta:
                tokens[c.index] += c.token_ids
                text[c.index] += c.text
            else:
                tokens[c.index], text[c.index] = c.token_ids, c.text
            last[c.index] = update
        for j in range(2):
            assert tokens[j] == whole.outputs[j].token_ids
            assert text[j] == whole.outputs[j].text
        assert any(u.finished for u in last.values())


def test_stream_closed_early_aborts(llm):
    stream = llm.stream(["Count to one hundred:"] * 3, SamplingParams(max_tokens=200, ignore_eos=True, seed=1))
    next(stream)
    stream.close()
    stats = llm.stats()
    assert stats["num_running"] == 0 and stats["num_blocks_used"] == 0
    assert llm.generate("Hi", SamplingParams(max_tokens=2))[0].outputs[0].token_ids


def test_stop_strings_and_token_ids(llm):
    base = llm.generate("1, 2, 3, 4,", SamplingParams(temperature=0, max_tokens=12))[0].outputs[0]
    assert base.finish_reason in ("length", "stop")
    stop_tok = base.token_ids[2]
    out = llm.generate("1, 2, 3, 4,", SamplingParams(temperature=0, max_tokens=12, stop_token_ids=[stop_tok]))
    c = out[0].outputs[0]
    assert c.token_ids == base.token_ids[:3] and c.finish_reason == "stop" and c.stop_reason == stop_tok
    stop = base.text[4:6]
    c = llm.generate("1, 2, 3, 4,", SamplingParams(temperature=0, max_tokens=12, stop=stop))[0].outputs[0]
    assert c.finish_reason == "stop" and c.stop_reason == stop and stop not in c.text
