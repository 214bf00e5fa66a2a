"""What generate(), chat(), stream() and score() return, in vLLM's shapes plus Vosti's
determinism fields (seed, logits digests, which weights produced the output)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union


@dataclass
class Logprob:
    """One token's log-probability under the raw logits (before penalties and temperature).

    rank is the token's 1-based place among the top logprobs returned (ties by lowest id), or
    None for a chosen token outside them.
    """

    logprob: float
    rank: Optional[int] = None
    decoded_token: Optional[str] = None


SampleLogprobs = List[Dict[int, Logprob]]
PromptLogprobs = List[Optional[Dict[int, Logprob]]]


@dataclass
class CompletionOutput:
    """One generated sequence of a request (vLLM's ``CompletionOutput``).

    Vosti's additions: ``seed`` (the sampler's seed: replaying it gives the same bits),
    ``token_logprobs`` (the chosen tokens' logprobs, always; equal bit for bit to what
    ``LLM.score`` returns for the same tokens) and ``logits_digests`` (one 32-hex-digit XXH3-128
    digest of the f32 logits row per output position, when asked). ``routed_experts`` (vLLM's
    name; asked by ``SamplingParams.return_routed_experts`` on a mixture-of-experts model): an
    int32 NumPy array [positions, MoE layers, top_k] of the experts each computed position (the
    prompt's, then the outputs' but the last) chose in each MoE layer, ascending per entry.
    ``sampling_masks`` (asked by ``SamplingParams.return_sampling_mask``): per output position,
    None (every token could be drawn) or the token ids the filters kept, ascending.
    """

    index: int
    text: str
    token_ids: List[int]
    cumulative_logprob: Optional[float]
    logprobs: Optional[SampleLogprobs]
    finish_reason: Optional[str] = None
    stop_reason: Union[int, str, None] = None
    seed: int = 0
    token_logprobs: List[float] = field(default_factory=list)
    logits_digests: Optional[List[str]] = None
    routed_experts: Optional[Any] = None
    sampling_masks: Optional[List[Optional[List[int]]]] = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    """The output of one prompt (vLLM's ``RequestOutput``): its ``n`` sequences in ``outputs``.

    Vosti's additions name the weights that produced it: ``weights_id`` (XXH3-128 of the weights'
    values), ``weights_version`` (0 for the weights loaded first, +1 per ``update_weights``) and
    ``deployment_id`` (the weights with the device, numeric policy, block size and context
    length: two outputs with the same deployment_id, prompt and seed have the same bits).
    """

    request_id: str
    prompt: Optional[str]
    prompt_token_ids: List[int]
    prompt_logprobs: Optional[PromptLogprobs]
    outputs: List[CompletionOutput]
    finished: bool
    num_cached_tokens: int = 0
    weights_id: str = ""
    weights_version: int = 0
    deployment_id: str = ""


@dataclass
class ScoreOutput:
    """``LLM.score``'s result: the logprobs of given completion tokens after a prompt.

    ``logprobs[i]`` is the raw logprob of ``token_ids[i]``: the same float, bit for bit, that
    generation reports for that token after the same prefix (``CompletionOutput.token_logprobs``).
    """

    prompt_token_ids: List[int]
    token_ids: List[int]
    logprobs: List[float]
    top_logprobs: Optional[SampleLogprobs] = None
    weights_id: str = ""
    weights_version: int = 0
    deployment_id: str = ""
