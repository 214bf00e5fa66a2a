"""SamplingParams(return_routed_experts=True) on a mixture-of-experts model: an int32 array
[positions, MoE layers, top_k] per sequence, the same alone, batched and streamed; refused on a
dense model."""
import os

import numpy as np
import pytest

from vosti import SamplingParams

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MOE = os.path.join(REPO, "tests", "golden", "models", "qwen3-moe-tiny")


@pytest.fixture(scope="module")
def moe_llm(model_path):  # model_path: skips where the package does not import
    import vosti
    return vosti.LLM(MOE, skip_tokenizer_init=True, num_threads=2, max_num_seqs=8, max_num_batched_tokens=5)


def routed_params(**kw):
    return SamplingParams(temperature=0.8, seed=11, max_tokens=6, ignore_eos=True, return_routed_experts=True, **kw)


def test_routed_experts_shape_and_batch_invariance(moe_llm):
    prompt = [5, 17, 99, 3, 250, 7, 7, 1]
    alone = moe_llm.generate({"prompt_token_ids": prompt}, routed_params())[0].outputs[0]
    r = alone.routed_experts
    assert isinstance(r, np.ndarray) and r.dtype == np.int32
    layers = r.shape[1]
    assert r.shape == (len(prompt) + len(alone.token_ids) - 1, layers, 2)
    assert layers == 3  # qwen3-moe-tiny: three MoE layers, top-2
    assert (np.diff(r, axis=2) > 0).all(), "each entry's experts ascend"
    others = [{"prompt_token_ids": [i + 1, 2, 3, 4, 5, 6]} for i in range(5)]
    batch = moe_llm.generate(others + [{"prompt_token_ids": prompt}],
                             [SamplingParams(max_tokens=9, seed=i) for i in range(5)] + [routed_params()])
    assert all(o.outputs[0].routed_experts is None for o in batch[:5])
    crowded = batch[5].outputs[0]
    assert crowded.token_ids == alone.token_ids
    assert np.array_equal(crowded.routed_experts, r)
    last = None
    for update in moe_llm.stream([{"prompt_token_ids": prompt}], routed_params()):
        last = update
    assert last is not None and last.finished
    assert np.array_equal(last.outputs[0].routed_experts, r)


def test_a_dense_model_refuses_routed_experts(llm):
    with pytest.raises(ValueError, match="mixture-of-experts"):
        llm.generate([1, 2, 3], SamplingParams(max_tokens=2, return_routed_experts=True))


def test_routed_experts_equal_the_cli(moe_llm, vosti_bin):
    import json
    import subprocess
    prompt = [40, 41, 42, 43, 44]
    cli = subprocess.run([vosti_bin, "generate", "--model", MOE, "--prompt-ids", *map(str, prompt),
                          "--temperature", "0.8", "--seed", "11", "--max-tokens", "6", "--ignore-eos", "--json",
                          "--return-routed-experts"], capture_output=True, text=True, check=True, timeout=120)
    ref = json.loads(cli.stdout)
    out = moe_llm.generate({"prompt_token_ids": prompt}, routed_params())[0].outputs[0]
    assert out.token_ids == ref["ids"]
    assert np.array_equal(out.routed_experts, np.asarray(ref["routed_experts"], dtype=np.int32))
