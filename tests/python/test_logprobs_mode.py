"""LLM(logprobs_mode=...), vLLM's four modes: the same tokens and logits digests as the session's
(raw_logprobs) llm; processed logprobs are the log-softmax of the row the sampler drew from (top-k's
kept tokens carry all the mass, the dropped ones -inf); raw logits are the row's values; prompt
positions report the raw row; a bad mode raises naming the option."""
import math

import numpy as np
import pytest

import vosti
from vosti import SamplingParams

PROMPTS = ["The capital of France is", "def fib(n):\n    return"]


def f32(xs):
    return np.asarray(xs, dtype=np.float32).tobytes()


@pytest.fixture(scope="module")
def modes(model_path, device):
    return {m: vosti.LLM(model_path, device=device, num_threads=2, max_num_seqs=8, logprobs_mode=m)
            for m in ("raw_logits", "processed_logprobs", "processed_logits")}


def run(llm, params):
    return [o.outputs[0] for o in llm.generate(PROMPTS, params)]


def test_modes_change_no_token_and_no_digest(llm, modes):
    p = SamplingParams(temperature=0.8, top_k=3, seed=11, max_tokens=12, logprobs=5, logits_digests=True)
    base = run(llm, p)
    for mode, other in modes.items():
        for a, b in zip(base, run(other, p)):
            assert b.token_ids == a.token_ids, mode
            assert b.logits_digests == a.logits_digests, mode


def test_processed_logprobs_put_all_mass_on_the_kept_tokens(llm, modes):
    p = SamplingParams(temperature=0.7, top_k=3, seed=5, max_tokens=10, logprobs=5)
    raw = run(llm, p)
    for a, b in zip(raw, run(modes["processed_logprobs"], p)):
        for pos, top in enumerate(b.logprobs):
            values = sorted((lp.logprob for lp in top.values()), reverse=True)
            finite = [v for v in values if v > -1e30]
            assert len(finite) == 3, (pos, values)  # top-k kept exactly 3
            assert math.isclose(sum(math.exp(v) for v in finite), 1.0, rel_tol=1e-5)
        assert f32(b.token_logprobs) != f32(a.token_logprobs)  # temperature 0.7 reshapes the row


def test_processed_equals_raw_without_processing(llm, modes):
    p = SamplingParams(temperature=0, max_tokens=8, logprobs=3)
    for a, b in zip(run(llm, p), run(modes["processed_logprobs"], p)):
        assert f32(b.token_logprobs) == f32(a.token_logprobs)


def test_raw_logits_report_the_rows_values(llm, modes):
    p = SamplingParams(temperature=0, max_tokens=8, logprobs=4, prompt_logprobs=2)
    raw = llm.generate(PROMPTS, p)
    got = modes["raw_logits"].generate(PROMPTS, p)
    for a, b in zip(raw, got):
        for pos, top in enumerate(b.outputs[0].logprobs):
            chosen = b.outputs[0].token_ids[pos]
            best = max(lp.logprob for lp in top.values())
            assert top[chosen].logprob == best  # greedy: the chosen token holds the row's maximum
            # logits minus the row's log-normaliser are the logprobs: one shift for every entry
            shifts = {round(top[t].logprob - a.outputs[0].logprobs[pos][t].logprob, 3) for t in top}
            assert len(shifts) == 1, shifts
        same = modes["processed_logits"].generate([PROMPTS[0]], p)[0]
        if b.prompt == PROMPTS[0]:
            lb = [d and {t: x.logprob for t, x in d.items()} for d in b.prompt_logprobs]
            ls = [d and {t: x.logprob for t, x in d.items()} for d in same.prompt_logprobs]
            assert lb == ls  # prompt positions: processed_logits reports the raw row's values


def test_a_bad_mode_names_the_option(model_path, device):
    with pytest.raises(Exception, match="logprobs_mode"):
        vosti.LLM(model_path, device=device, num_threads=2, logprobs_mode="processed")
