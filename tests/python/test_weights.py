"""Weights updated in place: outputs change, the old weights restore every bit, the prefix
cache is emptied, and every output names the weights that produced it."""
import numpy as np
import pytest

import vosti
from vosti import SamplingParams

NAME = "model.layers.3.mlp.down_proj.weight"
PARAMS = SamplingParams(n=2, temperature=1.0, seed=808, max_tokens=12, logits_digests=True)
# Longer than two KV blocks, so that a second run hits the prefix cache.
PROMPT = "In a hole in the ground there lived a hobbit. Not a nasty, dirty, wet hole, filled with the ends " \
         "of worms and an oozy smell, nor yet a dry, bare, sandy hole with nothing in it to sit down on"


def run(llm):
    out = llm.generate(PROMPT, PARAMS)[0]
    return out, [(c.token_ids, np.float32(c.token_logprobs).tobytes(), c.logits_digests) for c in out.outputs]


def test_update_changes_outputs_and_old_weights_restore_them(llm, tmp_path):
    before, bits = run(llm)
    assert before.weights_id == llm.weights_id and before.deployment_id == llm.deployment_id
    version = llm.weights_version
    original = llm.get_weights([NAME])
    assert original[NAME].dtype == np.float32 and original[NAME].shape == (576, 1536)

    changed = {NAME: original[NAME] * np.float32(1.25)}
    new_id = llm.update_weights(changed)
    assert new_id == llm.weights_id != before.weights_id
    assert llm.weights_version == version + 1
    after, after_bits = run(llm)
    assert after.weights_id == new_id and after.weights_version == version + 1
    assert after.deployment_id != before.deployment_id
    assert [b[2] for b in after_bits] != [b[2] for b in bits]  # the logits changed
    assert after.num_cached_tokens == 0  # the prefix cache was emptied with the weights
    assert np.array_equal(llm.get_weights([NAME])[NAME], changed[NAME])

    llm.update_weights(original)  # the old values as arrays
    again, again_bits = run(llm)
    assert again_bits == bits and again.weights_id == before.weights_id
    assert again.deployment_id == before.deployment_id

    # From disk: the changed tensor as a safetensors file, then a directory holding the original.
    vosti.save_safetensors(str(tmp_path / "changed.safetensors"), changed)
    llm.update_weights(tmp_path / "changed.safetensors")
    assert llm.weights_id == new_id and run(llm)[1] == after_bits
    d = tmp_path / "checkpoint"
    d.mkdir()
    vosti.save_safetensors(str(d / "model-00001-of-00001.safetensors"), original)
    llm.update_weights(str(d))
    assert run(llm)[1] == bits and llm.weights_id == before.weights_id


def test_whole_model_round_trip_and_prefix_cache(llm, model_path):
    first, bits = run(llm)
    second, _ = run(llm)
    assert second.num_cached_tokens > 0  # the prompt's full blocks were reused
    weights = llm.get_weights()
    assert set(weights) == set(llm.weight_names()) and len(weights) == 2 + 9 * llm.model_config["num_layers"]
    llm.update_weights((k, v.astype(np.float16).astype(np.float32)) for k, v in weights.items())
    rounded, rounded_bits = run(llm)
    assert rounded.weights_id != first.weights_id and rounded_bits != bits
    llm.update_weights(model_path)  # the model file itself
    assert run(llm)[1] == bits and llm.weights_id == first.weights_id


def test_float16_arrays_and_non_contiguous(llm):
    original = llm.get_weights([NAME])
    half = original[NAME].astype(np.float16)
    llm.update_weights({NAME: half})
    as_f32 = llm.weights_id
    llm.update_weights({NAME: np.asfortranarray(half.astype(np.float32))})
    assert llm.weights_id == as_f32  # f16 values widened exactly: the same weights
    llm.update_weights(original)


class DLPackOnly:
    """An array seen only through DLPack, as a PyTorch CPU tensor is."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, stream=None, **kwargs):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_arrays_through_dlpack(llm):
    original = llm.get_weights([NAME])
    wid = llm.weights_id
    changed = original[NAME] * np.float32(0.5)
    llm.update_weights([(NAME, DLPackOnly(changed))])
    assert llm.weights_id != wid
    assert np.array_equal(llm.get_weights([NAME])[NAME], changed)
    changed[:] = 0  # the engine holds its own copy
    assert not np.array_equal(llm.get_weights([NAME])[NAME], changed)
    llm.update_weights([(NAME, DLPackOnly(original[NAME]))])
    assert llm.weights_id == wid


def test_bad_updates_raise_and_keep_the_old_weights(llm):
    wid = llm.weights_id
    w = llm.get_weights([NAME])[NAME]
    with pytest.raises(ValueError, match="model.layers.99.mlp.down_proj.weight"):
        llm.update_weights({"model.layers.99.mlp.down_proj.weight": w})
    with pytest.raises(ValueError, match="shape"):
        llm.update_weights({NAME: w.T.copy()})
    with pytest.raises(ValueError, match="float32, float16 or bfloat16"):
        llm.update_weights({NAME: w.astype(np.float64)})
    with pytest.raises(FileNotFoundError):
        llm.update_weights("/nonexistent/checkpoint")
    with pytest.raises(TypeError):
        llm.update_weights(42)
    assert llm.weights_id == wid


def test_update_refused_while_a_stream_is_open(llm):
    stream = llm.stream("Hello", SamplingParams(max_tokens=50, ignore_eos=True))
    next(stream)
    with pytest.raises(RuntimeError, match="in flight"):
        llm.update_weights(llm.get_weights([NAME]))
    stream.close()
    llm.update_weights(llm.get_weights([NAME]))
