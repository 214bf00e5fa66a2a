"""LLM.sleep / wake_up (vLLM's): memory released at each level, requests refused while asleep,
and every output after wake_up equal, bit for bit, to the output before the sleep."""
import pytest

import vosti

from vosti import SamplingParams

PROMPTS = ["The capital of France is", "1, 2, 3,"]


def outputs(llm):
    sp = SamplingParams(n=2, temperature=1.0, seed=11, max_tokens=8, logprobs=2, logits_digests=True)
    return [[(c.token_ids, c.token_logprobs, c.logits_digests) for c in o.outputs] for o in llm.generate(PROMPTS, sp)]


@pytest.mark.parametrize("level", [1, 2])
def test_sleep_frees_memory_and_wake_restores_every_bit(llm, level):
    before = outputs(llm)
    deployment = llm.deployment
    assert llm.runner_info["kv_cache_bytes"] > 0
    llm.sleep(level)
    try:
        assert llm.is_sleeping
        assert llm.runner_info["kv_cache_bytes"] == 0
        assert (llm.runner_info["weight_bytes"] == 0) == (level == 2)
        with pytest.raises(RuntimeError, match="asleep"):
            llm.generate(PROMPTS[0], SamplingParams(max_tokens=2))
        with pytest.raises(RuntimeError, match="asleep"):
            llm.sleep(1)
    finally:
        llm.wake_up(tags=["weights", "kv_cache"])
    assert not llm.is_sleeping
    assert llm.runner_info["kv_cache_bytes"] > 0
    assert llm.deployment == deployment
    assert outputs(llm) == before
    llm.wake_up()  # awake: a no-op


def test_bad_level_and_deployment_fields(llm):
    with pytest.raises(ValueError, match="level"):
        llm.sleep(3)
    d = llm.deployment
    assert d["deployment_id"] == llm.deployment_id and d["weights_id"] == llm.weights_id
    for k in ("model", "weights_dtype", "kv_cache_dtype", "kernel_plan", "device", "vosti_version"):
        assert d[k]


def test_pinned_deployment(llm):
    pin = llm.deployment_id
    out = llm.generate(PROMPTS[0], SamplingParams(max_tokens=2, seed=1), deployment_id=pin)
    assert out[0].deployment_id == pin
    assert llm.score(out[0].prompt_token_ids, out[0].outputs[0].token_ids, deployment_id=pin).deployment_id == pin
    with pytest.raises(vosti.DeploymentMismatch) as e:
        llm.generate(PROMPTS[0], SamplingParams(max_tokens=2), deployment_id="0" * 32)
    assert "0" * 32 in str(e.value) and pin in str(e.value)
    with pytest.raises(vosti.DeploymentMismatch):
        list(llm.stream(PROMPTS[0], SamplingParams(max_tokens=2), deployment_id="0" * 32))
    assert llm.stats()["num_running"] == 0 and llm.stats()["num_waiting"] == 0
