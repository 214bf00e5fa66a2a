"""Vosti: deterministic LLM inference, in-process.

    from vosti import LLM, SamplingParams
    llm = LLM()                                  # the default model on the CPU
    out = llm.generate("The capital of France is", SamplingParams(temperature=0.8, seed=1, logprobs=2))
    lp = llm.score(out[0].prompt_token_ids, out[0].outputs[0].token_ids).logprobs
    assert lp == out[0].outputs[0].token_logprobs   # bit for bit

Under a fixed deployment (``LLM.deployment_id``), a request with the same prompt and seed gets
bitwise-identical logits at every output position, whatever else the engine runs. See
docs/PYTHON.md for the API reference and the differences from vLLM's API.
"""
from . import _core
from ._weights import save_safetensors
from .llm import LLM, DeploymentMismatch, Tokenizer, default_model_path
from .outputs import CompletionOutput, Logprob, RequestOutput, ScoreOutput
from .sampling_params import GuidedDecodingParams, SamplingParams, StructuredOutputsParams

__version__ = "0.1.0"


def built_with_cuda() -> bool:
    """Whether this build of the extension has the CUDA runner (device="cuda")."""
    return _core.built_with_cuda()


__all__ = ["LLM", "DeploymentMismatch", "SamplingParams", "StructuredOutputsParams", "GuidedDecodingParams", "RequestOutput", "CompletionOutput", "Logprob", "ScoreOutput", "Tokenizer",
           "built_with_cuda", "default_model_path", "save_safetensors", "__version__"]
