"""Between the user's arguments and the engine: prompts -> token ids, SamplingParams -> the
engine's RequestSpecs (one per sequence), engine results -> RequestOutput / ScoreOutput."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _core
from .outputs import CompletionOutput, Logprob, RequestOutput, ScoreOutput
from .sampling_params import SamplingParams


@dataclass
class Prompt:
    text: Optional[str]
    token_ids: List[int]


def _is_token_list(x: Any) -> bool:
    return isinstance(x, (list, tuple)) and len(x) > 0 and all(
        isinstance(t, int) and not isinstance(t, bool) for t in x)


def _as_list(x: Any) -> Any:
    return x.tolist() if hasattr(x, "tolist") and not isinstance(x, (str, bytes)) else x


def normalize_prompts(prompts: Any, prompt_token_ids: Any, encode: Callable[[str], List[int]]) -> List[Prompt]:
    """str | list[str] | list[int] | list[list[int]] | {"prompt" | "prompt_token_ids"} (or a list
    of those) -> prompts in order. Text is encoded as the server's completions endpoint does
    (with the tokenizer's special tokens, e.g. BOS)."""
    if prompts is None and prompt_token_ids is None:
        raise ValueError("give prompts (text, token-id lists, or {'prompt_token_ids': [...]} dicts)")
    if prompts is None:
        prompts = _as_list(prompt_token_ids)
        if _is_token_list(prompts):
            prompts = [prompts]
        prompts = [{"prompt_token_ids": _as_list(p)} for p in prompts]
    prompts = _as_list(prompts)
    if isinstance(prompts, (str, dict)) or _is_token_list(prompts):
        prompts = [prompts]
    if not isinstance(prompts, (list, tuple)) or not prompts:
        raise ValueError("prompts must be a non-empty str, list of str, token-id list or list of them")
    out = []
    for i, p in enumerate(prompts):
        p = _as_list(p)
        if isinstance(p, str):
            out.append(Prompt(p, encode(p)))
        elif isinstance(p, dict):
            if "prompt_token_ids" in p:
                ids = _as_list(p["prompt_token_ids"])
                if not _is_token_list(ids):
                    raise ValueError(f"prompt {i}: prompt_token_ids must be a non-empty list of ints")
                out.append(Prompt(p.get("prompt"), list(ids)))
            elif isinstance(p.get("prompt"), str):
                out.append(Prompt(p["prompt"], encode(p["prompt"])))
            else:
                raise ValueError(f"prompt {i}: a dict prompt needs 'prompt' (str) or 'prompt_token_ids'")
        elif _is_token_list(p):
            out.append(Prompt(None, list(p)))
        else:
            raise ValueError(f"prompt {i}: expected a str, a non-empty list of token ids or a dict, got {p!r:.80}")
    return out


def normalize_params(params: Any, count: int) -> List[SamplingParams]:
    if params is None:
        return [SamplingParams()] * count
    if isinstance(params, SamplingParams):
        return [params] * count
    if isinstance(params, (list, tuple)):
        if len(params) != count:
            raise ValueError(f"{len(params)} SamplingParams for {count} prompts: give one, or one per prompt")
        for p in params:
            if not isinstance(p, SamplingParams):
                raise TypeError(f"sampling_params must be SamplingParams, got {type(p).__name__}")
        return list(params)
    raise TypeError(f"sampling_params must be SamplingParams or a list of them, got {type(params).__name__}")


def make_spec(ids: List[int], sp: SamplingParams, seed: Optional[int], max_model_len: int,
              priority: int = 0) -> Any:
    """The engine's RequestSpec of one sequence."""
    spec = _core.RequestSpec()
    spec.prompt = ids
    s = _core.EngineSamplingParams()
    s.temperature = float(sp.temperature)
    s.top_k = int(sp.top_k)
    s.top_p = float(sp.top_p)
    s.min_p = float(sp.min_p)
    s.repetition_penalty = float(sp.repetition_penalty)
    s.presence_penalty = float(sp.presence_penalty)
    s.frequency_penalty = float(sp.frequency_penalty)
    s.logit_bias = [(int(k), float(v)) for k, v in (sp.logit_bias or {}).items()]
    s.seed = seed
    s.num_top_logprobs = max(sp.logprobs or 0, sp.prompt_logprobs or 0)
    spec.sampling = s
    spec.max_tokens = sp.max_tokens if sp.max_tokens is not None else max(max_model_len - len(ids), 0)
    spec.stop_token_ids = [int(t) for t in (sp.stop_token_ids or [])]
    spec.stop = list(sp.stop or [])
    spec.ignore_eos = bool(sp.ignore_eos)
    spec.include_stop_str_in_output = bool(sp.include_stop_str_in_output)
    spec.priority = int(priority)
    spec.prompt_logprobs = sp.prompt_logprobs is not None
    spec.logits_digests = bool(sp.logits_digests)
    spec.routed_experts = bool(sp.return_routed_experts)
    spec.sampling_masks = bool(sp.return_sampling_mask)
    if sp.structured_outputs is not None:
        spec.set_structured(*sp.structured_outputs._core_args())
    return spec


def routed_array(routed: Tuple[List[int], int, int]) -> Any:
    """The engine's (ids, layers, top_k) as an int32 array [positions, layers, top_k]."""
    import numpy as np
    ids, layers, top_k = routed
    if layers * top_k == 0:
        return np.zeros((0, layers, top_k), dtype=np.int32)
    return np.asarray(ids, dtype=np.int32).reshape(-1, layers, top_k)


class OutputBuilder:
    """Engine results -> vLLM-shaped outputs; decodes each token's text once."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self._pieces: Dict[int, str] = {}

    def piece(self, token: int) -> str:
        text = self._pieces.get(token)
        if text is None:
            text = self._pieces[token] = self._engine.token_text(token)
        return text

    def position(self, chosen: int, chosen_lp: float, top: Sequence[Tuple[int, float]], n: int) -> Dict[int, Logprob]:
        """vLLM's dict for one position: the chosen token, then the n best (rank = place in them)."""
        entry: Dict[int, Logprob] = {}
        ranks = {t: r + 1 for r, (t, _) in enumerate(top[:n])}
        entry[chosen] = Logprob(chosen_lp, ranks.get(chosen), self.piece(chosen))
        for t, lp in top[:n]:
            if t not in entry:
                entry[t] = Logprob(lp, ranks[t], self.piece(t))
        return entry

    def sample_logprobs(self, r: Any, n: Optional[int]) -> Optional[List[Dict[int, Logprob]]]:
        if n is None:
            return None
        return [self.position(t, lp, top, n) for t, lp, top in zip(r.token_ids, r.logprobs, r.top_logprobs)]

    def prompt_logprobs(self, ids: List[int], r: Any, n: Optional[int]) -> Optional[list]:
        if n is None:
            return None
        lps, tops = r.prompt_logprobs, r.prompt_top_logprobs
        return [None] + [self.position(ids[i], lps[i], tops[i], n) for i in range(1, len(ids))]

    def stop_reason(self, r: Any, sp: SamplingParams) -> Any:
        if r.finish_reason != "stop" or not r.token_ids:
            return None
        if r.token_ids[-1] in (sp.stop_token_ids or []):
            return r.token_ids[-1]
        if sp.stop:
            full = self._engine.decode(list(r.token_ids), True)
            for s in sp.stop:
                if r.text.endswith(s) if sp.include_stop_str_in_output else full[len(r.text):].startswith(s):
                    return s
        return None

    def completion(self, index: int, r: Any, sp: SamplingParams) -> CompletionOutput:
        if r.finish_reason == "error":
            raise RuntimeError(r.error)
        lps = list(r.logprobs)
        return CompletionOutput(
            index=index, text=r.text, token_ids=list(r.token_ids),
            cumulative_logprob=float(sum(lps)) if sp.logprobs is not None else None,
            logprobs=self.sample_logprobs(r, sp.logprobs), finish_reason=r.finish_reason,
            stop_reason=self.stop_reason(r, sp), seed=r.seed, token_logprobs=lps,
            logits_digests=list(r.logits_digests) if sp.logits_digests else None,
            routed_experts=routed_array(r.routed_experts) if sp.return_routed_experts else None,
            sampling_masks=list(r.sampling_masks) if sp.return_sampling_mask else None)

    def request(self, prompt: Prompt, sp: SamplingParams, results: List[Any], weights: tuple) -> RequestOutput:
        first = results[0]
        return RequestOutput(
            request_id=str(first.id), prompt=prompt.text, prompt_token_ids=list(prompt.token_ids),
            prompt_logprobs=self.prompt_logprobs(prompt.token_ids, first, sp.prompt_logprobs),
            outputs=[self.completion(j, r, sp) for j, r in enumerate(results)],
            finished=all(r.finished for r in results), num_cached_tokens=first.num_cached_prompt_tokens,
            weights_version=weights[0], weights_id=weights[1], deployment_id=weights[2])

    def score(self, prompt_ids: List[int], completion_ids: List[int], r: Any, n: Optional[int],
              weights: tuple) -> ScoreOutput:
        if r.finish_reason == "error":
            raise RuntimeError(r.error)
        start = len(prompt_ids)
        lps = list(r.prompt_logprobs)[start:]
        tops = list(r.prompt_top_logprobs)[start:]
        top = None if n is None else [self.position(t, lp, tp, n) for t, lp, tp in zip(completion_ids, lps, tops)]
        return ScoreOutput(prompt_token_ids=list(prompt_ids), token_ids=list(completion_ids), logprobs=lps,
                           top_logprobs=top, weights_version=weights[0], weights_id=weights[1],
                           deployment_id=weights[2])
