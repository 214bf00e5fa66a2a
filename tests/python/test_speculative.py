"""LLM(speculative_config=...): lossless speculative decoding. Tokens, text, logprobs and logits
digests equal the run without speculation (the session's llm), greedy and seeded, with stop strings
and max_tokens inside accepted runs; drafts really ran; a bad config raises naming the field."""
import numpy as np
import pytest

import vosti
from vosti import SamplingParams

# Prompts whose answers copy spans of them: n-gram drafts get accepted.
PROMPTS = [
    "Repeat the list exactly: apple, banana, cherry, date, elderberry, fig, grape. "
    "Repeat the list exactly: apple, banana,",
    "def add(a, b):\n    return a + b\n\ndef add(a, b):\n",
    "One two three four five six seven eight. One two three",
]


def f32(xs):
    return np.asarray(xs, dtype=np.float32).tobytes()


@pytest.fixture(scope="module")
def spec_llm(model_path, device):
    if device != "cpu":
        pytest.skip("speculative decoding runs on the cpu device only")
    return vosti.LLM(model_path, device=device, num_threads=2, max_num_seqs=32,
                     speculative_config={"method": "ngram", "num_speculative_tokens": 4,
                                         "prompt_lookup_min": 1, "prompt_lookup_max": 4})


def outputs(llm, params):
    return [o.outputs[0] for o in llm.generate(PROMPTS, params)]


@pytest.mark.parametrize("params", [
    dict(temperature=0, max_tokens=32),
    dict(temperature=0.8, top_p=0.9, seed=7, max_tokens=32),
    dict(temperature=0, max_tokens=5),
])
def test_outputs_equal_the_outputs_without_speculation(llm, spec_llm, params):
    before = spec_llm.stats()
    p = SamplingParams(logprobs=2, logits_digests=True, **params)
    for a, b in zip(outputs(llm, p), outputs(spec_llm, p)):
        assert b.token_ids == a.token_ids
        assert b.text == a.text
        assert f32(b.token_logprobs) == f32(a.token_logprobs)
        assert b.logits_digests == a.logits_digests
        assert b.finish_reason == a.finish_reason
    after = spec_llm.stats()
    assert after["num_draft_tokens"] > before["num_draft_tokens"]
    if params["max_tokens"] > 5 and params["temperature"] == 0:
        assert after["num_accepted_tokens"] > before["num_accepted_tokens"]
    assert after["num_blocks_used"] == 0


def test_a_stop_string_inside_an_accepted_run_stops_where_it_stops_without(llm, spec_llm):
    base = outputs(llm, SamplingParams(temperature=0, max_tokens=24))
    for i, b in enumerate(base):
        if len(b.text) < 8:
            continue
        stop = b.text[5:8]
        p = SamplingParams(temperature=0, max_tokens=24, stop=stop)
        want = llm.generate(PROMPTS[i], p)[0].outputs[0]
        got = spec_llm.generate(PROMPTS[i], p)[0].outputs[0]
        assert (got.token_ids, got.text, got.finish_reason) == (want.token_ids, want.text, want.finish_reason)
        assert want.finish_reason == "stop"


def test_a_bad_config_names_the_problem(model_path):
    with pytest.raises(ValueError, match="num_speculative_tokens"):
        vosti.LLM(model_path, speculative_config={"method": "ngram", "num_speculative_tokens": 0})
    with pytest.raises(ValueError, match="unknown method"):
        vosti.LLM(model_path, speculative_config={"method": "medusa", "num_speculative_tokens": 2})
