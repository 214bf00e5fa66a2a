"""SamplingParams: how one request turns logits into tokens, in vLLM's names.

The engine validates the values (temperature >= 0, top_p in (0, 1], ...) when a request is
submitted and raises ValueError with its message; here only what the engine never sees is
checked (n, best_of, types).
"""
from __future__ import annotations

import json as _json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

_UINT64 = 1 << 64


@dataclass
class StructuredOutputsParams:
    """What the output must match (vLLM's ``StructuredOutputsParams``): exactly one of

    Args:
        json: a JSON schema (a dict, or its JSON text); the output is compact JSON valid under it.
        regex: a regular expression the whole output matches.
        choice: a list of strings; the output is one of them.
        grammar: an EBNF grammar (xgrammar's GBNF dialect, the root rule ``root``).
        json_object: True: any JSON object.

    The engine compiles it once per distinct value and masks every sampled row to the tokens it
    allows after the committed outputs (docs/SPEC.md section 9): a constrained request is as
    reproducible as any other. A bad schema, regex or grammar raises ValueError at submission.
    """

    json: Optional[Union[str, Dict[str, Any]]] = None
    regex: Optional[str] = None
    choice: Optional[List[str]] = None
    grammar: Optional[str] = None
    json_object: Optional[bool] = None

    def __post_init__(self) -> None:
        given = [k for k in ("json", "regex", "choice", "grammar") if getattr(self, k) is not None]
        if self.json_object:
            given.append("json_object")
        if len(given) != 1:
            raise ValueError("StructuredOutputsParams needs exactly one of json, regex, choice, grammar, "
                             f"json_object; got {given or 'none'}")
        if self.choice is not None and (not isinstance(self.choice, (list, tuple)) or
                                        not all(isinstance(c, str) for c in self.choice)):
            raise ValueError(f"choice must be a list of strings, got {self.choice!r}")

    def _core_args(self) -> tuple:
        """(kind, text, choices) for RequestSpec.set_structured."""
        if self.json is not None:
            text = self.json if isinstance(self.json, str) else _json.dumps(self.json)
            return ("json", text, [])
        if self.regex is not None:
            return ("regex", self.regex, [])
        if self.choice is not None:
            return ("choice", "", list(self.choice))
        if self.grammar is not None:
            return ("grammar", self.grammar, [])
        return ("json_object", "", [])


GuidedDecodingParams = StructuredOutputsParams  # vLLM's older name


@dataclass
class SamplingParams:
    """Sampling parameters of one request (vLLM's ``SamplingParams``, the fields Vosti serves).

    Args:
        n: sequences per prompt. Sequence ``i`` of a prompt uses seed ``seed + i``.
        best_of: must be None or equal to ``n`` (no beam search).
        presence_penalty, frequency_penalty: OpenAI's, over the output tokens, in [-2, 2].
        repetition_penalty: HF/vLLM's, over prompt and output tokens, > 0.
        temperature: 0 is greedy (lowest token id wins ties).
        top_p, top_k, min_p: nucleus, top-k (0 or -1: off) and min-p filtering.
        seed: the sampler's seed; None draws a fresh one (reported in the output, so the
            run can be replayed).
        stop: stop strings (not included in the output unless include_stop_str_in_output).
        stop_token_ids: token ids that stop generation besides the model's EOS ids.
        ignore_eos: keep generating past EOS.
        max_tokens: output tokens at most (None: up to the context length).
        min_tokens: must be 0 (not supported).
        logprobs: how many top logprobs to return per output position (0: only the chosen
            token's; None: none). At most 20.
        prompt_logprobs: the same for the prompt tokens.
        skip_special_tokens: must be True (the text never holds special tokens).
        include_stop_str_in_output: keep the stop string in the text.
        logit_bias: token id -> bias added to its logit before sampling, in [-100, 100].
        logits_digests: (Vosti) return the XXH3-128 digest of every output position's logits.
        return_routed_experts: (vLLM's name; mixture-of-experts models) return the experts every
            computed position chose in every MoE layer, ``CompletionOutput.routed_experts``. Such
            a request skips the prefix cache.
        return_sampling_mask: (Vosti) return, per output position, the support the token was drawn
            from: ``CompletionOutput.sampling_masks``, None where no filter dropped a token (and for
            greedy requests), else the ids top-k, top-p and min-p kept, ascending. Trainers
            renormalise importance ratios over it.
        structured_outputs: a StructuredOutputsParams the output must match (CPU device);
            ``guided_decoding`` (vLLM's older name) is the same.
    """

    n: int = 1
    best_of: Optional[int] = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: Optional[int] = None
    stop: Optional[Union[str, List[str]]] = None
    stop_token_ids: Optional[List[int]] = None
    ignore_eos: bool = False
    max_tokens: Optional[int] = 16
    min_tokens: int = 0
    logprobs: Optional[int] = None
    prompt_logprobs: Optional[int] = None
    detokenize: bool = True
    skip_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    logit_bias: Optional[Dict[int, float]] = None
    logits_digests: bool = False
    return_routed_experts: bool = False
    return_sampling_mask: bool = False
    structured_outputs: Optional[StructuredOutputsParams] = None
    guided_decoding: Optional[StructuredOutputsParams] = None  # vLLM's older name for structured_outputs

    def __post_init__(self) -> None:
        if self.guided_decoding is not None:
            if self.structured_outputs is not None:
                raise ValueError("give structured_outputs or guided_decoding, not both")
            self.structured_outputs, self.guided_decoding = self.guided_decoding, None
        if self.structured_outputs is not None and not isinstance(self.structured_outputs, StructuredOutputsParams):
            raise TypeError("structured_outputs must be a StructuredOutputsParams, got "
                            f"{type(self.structured_outputs).__name__}")
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"n must be an integer >= 1, got {self.n!r}")
        if self.best_of is not None and self.best_of != self.n:
            raise NotImplementedError("best_of different from n is not supported (no beam search in Vosti)")
        if self.min_tokens != 0:
            raise NotImplementedError("min_tokens is not supported by Vosti; use ignore_eos with max_tokens")
        if not self.skip_special_tokens:
            raise NotImplementedError("skip_special_tokens=False is not supported; decode token_ids with the tokenizer")
        if not self.detokenize:
            raise NotImplementedError("detokenize=False is not supported (the text is always produced)")
        if self.seed is not None:
            if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < _UINT64:
                raise ValueError(f"seed must be an integer in [0, 2**64), got {self.seed!r}")
        if self.top_k == -1:
            self.top_k = 0  # vLLM's "off"
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        for name in ("logprobs", "prompt_logprobs"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ValueError(f"{name} must be None or an integer >= 0, got {v!r}")
        if self.max_tokens is not None and (isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int)):
            raise ValueError(f"max_tokens must be an integer, got {self.max_tokens!r}")
