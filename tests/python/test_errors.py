"""Bad arguments raise Python exceptions carrying the engine's message; Ctrl-C during a batch
aborts it and leaves the engine usable."""
import os
import signal
import threading

import pytest

import vosti
from vosti import SamplingParams


def test_bad_sampling_values_carry_the_engine_message(llm):
    with pytest.raises(ValueError, match="top_p"):
        llm.generate("Hi", SamplingParams(top_p=1.5))
    with pytest.raises(ValueError, match="temperature"):
        llm.generate("Hi", SamplingParams(temperature=-1))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        llm.generate([1, 2, 10**6])
    with pytest.raises(ValueError, match="maximum context length"):
        llm.generate([1] * (llm.max_model_len + 1))
    with pytest.raises(ValueError, match="request 1"):  # the second of two; neither runs
        llm.generate(["Hi", "Ho"], [SamplingParams(), SamplingParams(logprobs=50)])
    assert llm.stats()["num_running"] == 0 and llm.stats()["num_waiting"] == 0


def test_bad_python_arguments(llm, model_path, device):
    with pytest.raises(ValueError):
        SamplingParams(n=0)
    with pytest.raises(NotImplementedError):
        SamplingParams(best_of=3)
    with pytest.raises(ValueError, match="2 SamplingParams for 3 prompts"):
        llm.generate(["a", "b", "c"], [SamplingParams(), SamplingParams()])
    with pytest.raises(ValueError):
        llm.generate([])
    with pytest.raises(ValueError, match="score"):
        llm.score([1, 2], [])
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_num_sequences'"):
        vosti.LLM(model_path, max_num_sequences=4)
    with pytest.raises(FileNotFoundError, match="no-such-model.gguf"):
        vosti.LLM("/tmp/no-such-model.gguf")
    if device == "cpu" and not os.path.exists("/dev/nvidia0"):
        with pytest.raises(RuntimeError, match="no CUDA runner|no CUDA device"):
            vosti.LLM(model_path, device="cuda")


def test_ctrl_c_during_a_batch_leaves_the_engine_usable(llm):
    small = SamplingParams(temperature=0.7, seed=3, max_tokens=8, logits_digests=True)
    expected = llm.generate("Ctrl-C test", small)[0].outputs[0]
    long = SamplingParams(temperature=1.0, max_tokens=400, ignore_eos=True)
    started = threading.Event()

    def interrupt():
        started.wait()
        # Once the engine has produced tokens, as a user's Ctrl-C would arrive.
        while llm.stats()["num_generated_tokens"] < generated_before + 16:
            threading.Event().wait(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    generated_before = llm.stats()["num_generated_tokens"]
    t = threading.Thread(target=interrupt)
    t.start()
    started.set()
    with pytest.raises(KeyboardInterrupt):
        llm.generate(["Count slowly:"] * 6, long)
    t.join()
    stats = llm.stats()
    assert stats["num_running"] == 0 and stats["num_waiting"] == 0 and stats["num_blocks_used"] == 0
    got = llm.generate("Ctrl-C test", small)[0].outputs[0]
    assert (got.token_ids, got.token_logprobs, got.logits_digests) == \
           (expected.token_ids, expected.token_logprobs, expected.logits_digests)
