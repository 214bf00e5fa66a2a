"""vosti.LLM: the offline API in vLLM's shape over Vosti's deterministic engine.

Every method that runs the model releases the GIL while the engine works; requests submitted
by several threads at once share the engine's continuous batching. Ctrl-C during a call aborts
that call's requests and raises KeyboardInterrupt; the LLM stays usable.
"""
from __future__ import annotations

import json
import os
import random
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from . import _core
from ._requests import OutputBuilder, Prompt, make_spec, normalize_params, normalize_prompts
from ._weights import is_path, named_arrays
from .outputs import RequestOutput, ScoreOutput
from .sampling_params import SamplingParams

# LLM(...) engine options (vLLM's names; Vosti's own, the EngineConfig field names, pass too) -> the
# EngineConfig field each sets. The vosti CLI's engine options (tools/engine_options.cc, printed by
# `vosti engine-options`) are the reference: tests/python/test_engine_options.py fails when a CLI
# option has no keyword here, when a keyword sets a field the CLI has no option for, or when the
# defaults differ.
_ENGINE_OPTIONS = {
    "max_num_seqs": "max_num_seqs",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "max_model_len": "max_model_len",
    "block_size": "block_size",
    "enable_prefix_caching": "enable_prefix_caching",
    "window_local_kv": "window_local_kv",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "kv_cache_dtype": "kv_cache_dtype",
    "num_gpu_blocks_override": "num_blocks",
    "num_blocks": "num_blocks",
    "kv_cache_bytes": "kv_cache_bytes",
    "num_threads": "num_threads",
    "structured_output_threads": "structured_output_threads",
    "structured_output_pool_threshold": "structured_output_pool_threshold",
    "backend": "backend",
    "attention_split": "attention_split",
    "check_invariants": "check_invariants",
    "speculative_config": "speculative_config",
    "logprobs_mode": "logprobs_mode",
}
# Options that set a bool field to the negation of their value.
_NEGATED_OPTIONS = {"enforce_eager": "cuda_graphs"}
# vLLM options accepted only at the value Vosti implements.
_FIXED_OPTIONS = {"tensor_parallel_size": 1, "pipeline_parallel_size": 1, "dtype": "auto", "quantization": None,
                  "trust_remote_code": None, "disable_log_stats": None, "tokenizer_mode": "auto"}


class DeploymentMismatch(RuntimeError):
    """A request pinned to a deployment (``deployment_id=``) that is not the one served."""


def default_model_path() -> str:
    """$VOSTI_DEFAULT_MODEL, else the default model scripts/fetch-model caches (as the vosti CLI)."""
    path = os.environ.get("VOSTI_DEFAULT_MODEL")
    if path:
        return path
    cache = os.environ.get("VOSTI_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "vosti")
    return os.path.join(cache, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


def _engine_config(device: str, options: Dict[str, Any]) -> Any:
    config = _core.EngineConfig()
    config.device = device
    for key, value in options.items():
        if key == "speculative_config" and not isinstance(value, str):
            # vLLM's dict ({"method": "ngram", "num_speculative_tokens": 4, ...}); None: off. The
            # engine parses the JSON and names whatever is wrong in it.
            value = "" if value is None else json.dumps(value)
        if key in _NEGATED_OPTIONS:
            setattr(config, _NEGATED_OPTIONS[key], not value)
        elif key in _ENGINE_OPTIONS:
            setattr(config, _ENGINE_OPTIONS[key], value)
        elif key in _FIXED_OPTIONS:
            fixed = _FIXED_OPTIONS[key]
            if fixed is not None and value != fixed:
                raise NotImplementedError(f"{key}={value!r} is not supported by Vosti (only {fixed!r})")
        else:
            known = sorted(list(_ENGINE_OPTIONS) + list(_NEGATED_OPTIONS) + list(_FIXED_OPTIONS) + ["seed"])
            raise TypeError(f"LLM() got an unexpected keyword argument '{key}' (engine options: {', '.join(known)})")
    return config


class Tokenizer:
    """The model's tokenizer (LLM.get_tokenizer()): encode, decode, apply_chat_template."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine

    @property
    def eos_token_id(self) -> Optional[int]:
        return self._engine.eos_token_id

    @property
    def bos_token_id(self) -> Optional[int]:
        return self._engine.bos_token_id

    @property
    def chat_template(self) -> Optional[str]:
        return self._engine.chat_template

    def encode(self, text: str, add_special_tokens: bool = True) -> List[int]:
        return self._engine.encode(text, add_special_tokens)

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return self._engine.decode(list(token_ids), skip_special_tokens)

    def apply_chat_template(self, conversation: List[dict], tokenize: bool = True, add_generation_prompt: bool = False,
                            chat_template: Optional[str] = None, **kwargs: Any) -> Union[str, List[int]]:
        """transformers' apply_chat_template over the model's own template."""
        text = self._engine.render_chat(json.dumps(_chat_messages(conversation)), add_generation_prompt, chat_template,
                                        json.dumps(kwargs))
        return self.encode(text, add_special_tokens=False) if tokenize else text


def _chat_messages(conversation: Any) -> List[dict]:
    """OpenAI-style messages with text-part contents joined, as the server reads them."""
    if not isinstance(conversation, (list, tuple)) or not conversation:
        raise ValueError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts")
    out = []
    for i, m in enumerate(conversation):
        if not isinstance(m, dict) or "role" not in m:
            raise ValueError(f"message {i} must be a dict with a 'role'")
        m = dict(m)
        content = m.get("content")
        if content is None:
            m["content"] = ""
        elif isinstance(content, list):
            parts = []
            for part in content:
                if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                    raise ValueError(f"message {i}: content parts must be {{'type': 'text', 'text': str}}")
                parts.append(part["text"])
            m["content"] = "".join(parts)
        if m.get("tool_calls"):
            # OpenAI sends a call's arguments as JSON text; transformers' templates take a dict (vLLM's reading).
            calls = []
            for call in m["tool_calls"]:
                call = dict(call)
                fn = dict(call.get("function") or {})
                if isinstance(fn.get("arguments"), str):
                    try:
                        fn["arguments"] = json.loads(fn["arguments"])
                    except ValueError as e:
                        raise ValueError(f"message {i}: tool call arguments are not JSON: {e}") from None
                call["function"] = fn
                calls.append(call)
            m["tool_calls"] = calls
        out.append(m)
    return out


class LLM:
    """An engine on one device with its model and tokenizer, for offline inference.

    Args:
        model: a GGUF file or a Hugging Face directory (config.json, safetensors, tokenizer);
            None: the default model (SmolLM2-135M-Instruct, as ``scripts/fetch-model`` caches it).
        device: "cpu" (f32 host kernels) or "cuda" (bf16 weights on the GPU; a build with CUDA).
        skip_tokenizer_init: load no tokenizer (token ids in and out only; for models without one).
        seed: requests without a seed draw their seeds from a generator seeded with this, so a
            script replays; None: fresh seeds (every output reports the one it used).
        **engine_options: max_num_seqs, max_num_batched_tokens, max_model_len, block_size,
            enable_prefix_caching, gpu_memory_utilization, kv_cache_dtype, enforce_eager,
            num_gpu_blocks_override, logprobs_mode ("raw_logprobs", "raw_logits",
            "processed_logprobs", "processed_logits": what logprobs report, vLLM's), and Vosti's
            num_threads, structured_output_threads, structured_output_pool_threshold (grammars a step
            must hold to advance them on those threads; default 16), backend ("cpu" | "ref"), kv_cache_bytes,
            num_blocks, attention_split, check_invariants, window_local_kv, speculative_config
            (vLLM's dict, e.g. {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}:
            lossless speculative decoding, the same tokens and logprobs as without it) (the vosti
            CLI's engine options, `vosti engine-options`). Unknown options raise TypeError.
    """

    def __init__(self, model: Optional[str] = None, *, device: str = "cpu", tokenizer: Optional[str] = None,
                 skip_tokenizer_init: bool = False, seed: Optional[int] = None, **engine_options: Any) -> None:
        path = os.fspath(model) if model is not None else default_model_path()
        if tokenizer is not None and os.fspath(tokenizer) != path:
            raise NotImplementedError("a tokenizer other than the model's own is not supported")
        self._engine = _core.Engine.create(path, _engine_config(device, engine_options), not skip_tokenizer_init)
        self._out = OutputBuilder(self._engine)
        self._seeds = random.Random(seed) if seed is not None else None
        self._tokenizer = Tokenizer(self._engine)

    # --- properties -----------------------------------------------------------------------
    @property
    def model(self) -> str:
        return self._engine.model_path

    @property
    def device(self) -> str:
        return self._engine.config.device

    @property
    def max_model_len(self) -> int:
        return self._engine.config.max_model_len

    @property
    def weights_id(self) -> str:
        """XXH3-128 (32 hex digits) of the weights now served (their values as f32)."""
        return self._engine.weights[1]

    @property
    def weights_version(self) -> int:
        """0 for the weights loaded at construction, +1 per update_weights()."""
        return self._engine.weights[0]

    @property
    def deployment_id(self) -> str:
        """The identity of this deployment: weights, device, numeric policy, block size, context."""
        return self._engine.weights[2]

    @property
    def deployment(self) -> Dict[str, Any]:
        """What deployment_id is made of, as `vosti serve`'s GET /deployment names it."""
        weights = self._engine.weights
        info = self._engine.runner_info
        return {"deployment_id": weights[2], "weights_id": weights[1], "weights_version": weights[0],
                "model": self._engine.model_path, "weights_dtype": "f32" if self.device == "cpu" else "bf16",
                "kv_cache_dtype": info["kv_cache_dtype"], "kernel_plan": self._engine.kernel_plan,
                "device": info["device"], "vosti_version": _core.__version__}

    @property
    def runner_info(self) -> Dict[str, Any]:
        """The device, KV dtype, blocks and bytes held (kv_cache_bytes, weight_bytes: 0 once released by sleep)."""
        return self._engine.runner_info

    # --- sleep and wake (vLLM's LLM.sleep / wake_up) ----------------------------------------

    def sleep(self, level: int = 1) -> None:
        """Frees memory between requests: level 1 the KV cache (and batch buffers, CUDA graphs),
        level 2 the weights as well. The prefix cache goes with the KV. generate() and the rest
        raise RuntimeError until wake_up(). Raises RuntimeError while requests are in flight or when
        already asleep, ValueError for another level."""
        if level not in (1, 2):
            raise ValueError(f"sleep level must be 1 (free the KV cache) or 2 (also the weights), got {level!r}")
        self._engine.sleep(level)

    def wake_up(self, tags: Optional[Sequence[str]] = None) -> None:
        """Restores what sleep() freed (level 2: the weights from the model, with any updates): every
        output after it equals, bit for bit, the output before the sleep. ``tags`` (vLLM's
        "weights", "kv_cache") are accepted; both always come back together. A no-op when awake."""
        for t in tags or ():
            if t not in ("weights", "kv_cache"):
                raise ValueError(f"unknown wake_up tag {t!r} (weights, kv_cache)")
        self._engine.wake_up()

    @property
    def is_sleeping(self) -> bool:
        return self._engine.sleep_level != 0

    @property
    def model_config(self) -> Dict[str, Any]:
        return self._engine.model_config

    def stats(self) -> Dict[str, Any]:
        """The engine's counters (steps, tokens, prefix-cache hits, blocks in use)."""
        return self._engine.stats

    def get_tokenizer(self) -> Tokenizer:
        return self._tokenizer

    # --- generation -----------------------------------------------------------------------
    def _seed(self, sp: SamplingParams, index: int) -> Optional[int]:
        if sp.seed is not None:
            return (sp.seed + index) % (1 << 64)
        return self._seeds.getrandbits(64) if self._seeds is not None else None

    def _pinned(self, batch: Any, deployment_id: Optional[str]) -> Any:
        """The batch, unless it was admitted under another deployment than ``deployment_id``: then
        it is cancelled and DeploymentMismatch names both ids (the server's 409)."""
        if deployment_id is not None and batch.weights[2] != deployment_id:
            self._engine.cancel(batch)
            raise DeploymentMismatch(
                f"the request pins deployment {deployment_id}, but this LLM now serves deployment "
                f"{batch.weights[2]} (weights {batch.weights[1]}, version {batch.weights[0]}); re-read "
                "LLM.deployment_id and re-pin")
        return batch

    def _submit(self, prompts: List[Prompt], params: List[SamplingParams], stream: bool, priority: Any,
                deployment_id: Optional[str] = None) -> Any:
        priorities = priority if isinstance(priority, (list, tuple)) else [priority or 0] * len(prompts)
        if len(priorities) != len(prompts):
            raise ValueError(f"{len(priorities)} priorities for {len(prompts)} prompts")
        specs = []
        for p, sp, prio in zip(prompts, params, priorities):
            for j in range(sp.n):
                specs.append(make_spec(p.token_ids, sp, self._seed(sp, j), self.max_model_len, prio))
        return self._pinned(self._engine.submit(specs, stream), deployment_id)

    def _wait(self, batch: Any) -> None:
        """Waits for the batch; on any exception (a KeyboardInterrupt raised between bytecodes
        rather than inside the wait, say) its requests are aborted before it propagates."""
        try:
            self._engine.wait(batch)
        except BaseException:
            self._engine.cancel(batch)
            raise

    def _collect(self, prompts: List[Prompt], params: List[SamplingParams], batch: Any) -> List[RequestOutput]:
        self._wait(batch)
        results = batch.results()
        outputs, k = [], 0
        for p, sp in zip(prompts, params):
            outputs.append(self._out.request(p, sp, results[k:k + sp.n], batch.weights))
            k += sp.n
        return outputs

    def generate(self, prompts: Any = None, sampling_params: Union[SamplingParams, Sequence[SamplingParams], None] = None,
                 use_tqdm: bool = True, *, prompt_token_ids: Any = None, priority: Any = None,
                 deployment_id: Optional[str] = None) -> List[RequestOutput]:
        """Generates for every prompt, all in one batch; outputs in the prompts' order.

        prompts: a str, a list of str, a token-id list, a list of token-id lists, or vLLM's
        ``{"prompt": str}`` / ``{"prompt_token_ids": [...]}`` dicts (or a list of them).
        sampling_params: one SamplingParams for all prompts, or one per prompt.
        deployment_id: when given, the batch must run on that deployment (``LLM.deployment_id``),
        else DeploymentMismatch names both ids and nothing runs.
        Raises ValueError with the engine's message for an invalid request (none of the batch
        runs then), KeyboardInterrupt on Ctrl-C (the batch is aborted, the LLM stays usable).
        """
        ps = normalize_prompts(prompts, prompt_token_ids, self._tokenizer.encode)
        params = normalize_params(sampling_params, len(ps))
        return self._collect(ps, params, self._submit(ps, params, False, priority, deployment_id))

    def chat(self, messages: Any, sampling_params: Union[SamplingParams, Sequence[SamplingParams], None] = None,
             use_tqdm: bool = True, *, chat_template: Optional[str] = None, add_generation_prompt: bool = True,
             continue_final_message: bool = False, chat_template_kwargs: Optional[Dict[str, Any]] = None,
             tools: Optional[List[Dict[str, Any]]] = None, priority: Any = None,
             deployment_id: Optional[str] = None) -> List[RequestOutput]:
        """Generates a reply to one conversation (a list of messages) or to each of a list of
        them, through the model's chat template (or ``chat_template``), tokenized as the server's
        /v1/chat/completions does. ``chat_template_kwargs`` become template variables (e.g.
        ``{"enable_thinking": False}``). ``tools`` (OpenAI function tools) become the template's
        ``tools`` variable, as vLLM's LLM.chat passes them; tool results (``role: "tool"``) and
        assistant ``tool_calls`` go through the template too. A template without a tools section
        (SmolLM2, Gemma) gets the server's fallback: the tools and hermes' ``<tool_call>`` format
        in the system turn, calls and results written as text (the same C++ function renders
        both, so the prompt is the server's). The output is not parsed into calls (as in vLLM);
        force a call with ``SamplingParams(structured_outputs=...)``."""
        if continue_final_message:
            raise NotImplementedError("continue_final_message is not supported")
        conversations = messages if messages and isinstance(messages[0], (list, tuple)) else [messages]
        prompts = []
        for conv in conversations:
            kwargs = dict(chat_template_kwargs or {})
            if tools is not None:
                if not isinstance(tools, (list, tuple)) or not all(isinstance(t, dict) for t in tools):
                    raise ValueError("tools must be a list of {'type': 'function', 'function': {...}} dicts")
                kwargs["tools"] = list(tools)
            text = self._engine.render_chat(json.dumps(_chat_messages(conv)), add_generation_prompt, chat_template,
                                            json.dumps(kwargs), tool_fallback=True)
            prompts.append(Prompt(text, self._tokenizer.encode(text, add_special_tokens=False)))
        params = normalize_params(sampling_params, len(prompts))
        return self._collect(prompts, params, self._submit(prompts, params, False, priority, deployment_id))

    def stream(self, prompts: Any, sampling_params: Union[SamplingParams, Sequence[SamplingParams], None] = None, *,
               delta: bool = False, priority: Any = None, deployment_id: Optional[str] = None
               ) -> Iterator[RequestOutput]:
        """Submits the prompts now and returns an iterator of RequestOutput updates, one per
        sequence and step that produced something, as they come. Each update holds the one
        sequence it is about (``outputs[0]``, whose ``index`` says which of the prompt's n);
        cumulative (all tokens so far), or only the new ones with ``delta=True`` (vLLM's
        RequestOutputKind.DELTA). Closing (or dropping) the iterator early aborts what is left."""
        ps = normalize_prompts(prompts, None, self._tokenizer.encode)
        params = normalize_params(sampling_params, len(ps))
        batch = self._submit(ps, params, True, priority, deployment_id)
        return _Stream(self, ps, params, batch, delta)

    def _stream_output(self, prompt: Prompt, sp: SamplingParams, choice: int, d: Any, acc: "_Accumulated",
                       delta: bool, finished: bool, request_id: int, weights: tuple) -> RequestOutput:
        acc.add(d)
        comp = self._out.completion(choice, d if delta else acc, sp)
        comp.stop_reason = self._out.stop_reason(acc, sp)
        if sp.logprobs is not None:
            comp.cumulative_logprob = float(sum(acc.logprobs))
        prompt_logprobs = None
        if sp.prompt_logprobs is not None and acc.prompt_logprobs and (not delta or d.prompt_logprobs):
            prompt_logprobs = self._out.prompt_logprobs(prompt.token_ids, acc, sp.prompt_logprobs)
        return RequestOutput(
            request_id=str(request_id), prompt=prompt.text, prompt_token_ids=list(prompt.token_ids),
            prompt_logprobs=prompt_logprobs, outputs=[comp], finished=finished,
            num_cached_tokens=acc.num_cached_prompt_tokens, weights_version=weights[0], weights_id=weights[1],
            deployment_id=weights[2])

    # --- scoring --------------------------------------------------------------------------
    def score(self, prompt_ids: Any, completion_ids: Any, *, logprobs: Optional[int] = None,
              deployment_id: Optional[str] = None) -> Union[ScoreOutput, List[ScoreOutput]]:
        """The raw logprobs of ``completion_ids`` after ``prompt_ids`` (one pair, or lists of
        pairs: then a list of outputs). They equal, bit for bit, the ``token_logprobs``
        generation reported for the same tokens after the same prompt (prefill vs decode is
        one of the variations the engine's determinism covers). ``logprobs``: also the top-n."""
        single = _is_ids(prompt_ids)
        pairs = [(prompt_ids, completion_ids)] if single else list(zip(prompt_ids, completion_ids))
        if not single and (not isinstance(prompt_ids, (list, tuple)) or len(prompt_ids) != len(completion_ids)):
            raise ValueError("score: give one prompt and one completion (token-id lists), or two lists of equal length")
        specs = []
        for k, (p, c) in enumerate(pairs):
            p, c = list(_ids(p, "prompt", k)), list(_ids(c, "completion", k))
            sp = SamplingParams(max_tokens=0, prompt_logprobs=logprobs or 0)
            specs.append(make_spec(p + c, sp, 0, self.max_model_len))
        batch = self._pinned(self._engine.submit(specs, False), deployment_id)
        self._wait(batch)
        results = batch.results()
        outs = [self._out.score(list(p), list(c), r, logprobs, batch.weights) for (p, c), r in zip(pairs, results)]
        return outs[0] if single else outs

    # --- weights --------------------------------------------------------------------------
    def update_weights(self, weights: Any) -> str:
        """Replaces the weights in place, between requests, without restarting.

        weights: a safetensors file or a directory of them (mapped, no copy; config.json not
        needed), a model file Vosti reads (a GGUF), a mapping ``name -> array``, or an iterable
        of ``(name, array)`` pairs (vLLM's ``load_weights`` form). Names are Hugging Face's
        (``model.layers.0.mlp.up_proj.weight``); arrays are float32, float16 or bfloat16 NumPy
        arrays or PyTorch tensors (read through DLPack; the engine copies the values, so the
        caller may keep changing its tensors). Tensors not named keep their values; a tied
        ``lm_head.weight`` and rotary buffers are skipped.

        The prefix cache is emptied; weights_id, weights_version and deployment_id change, and
        every later output carries them. Returns the new weights_id. Raises RuntimeError while
        requests are in flight, ValueError for a name or shape the model does not have (the old
        weights keep serving after any error).
        """
        if is_path(weights):
            self._engine.update_weights_from_path(os.fsdecode(os.fspath(weights)))
        else:
            self._engine.update_weights_from_arrays(named_arrays(weights))
        return self.weights_id

    def get_weights(self, names: Optional[Sequence[str]] = None) -> Dict[str, Any]:
        """The weights now served as float32 NumPy arrays under Hugging Face names (all, or
        ``names``), in Hugging Face's layout: what update_weights takes back."""
        return dict(self._engine.get_weights(list(names) if names is not None else None))

    def weight_names(self) -> List[str]:
        """Every weight's Hugging Face name, in a fixed order."""
        return self._engine.tensor_names()


class _Stream:
    """LLM.stream's iterator: takes the batch's events in order; aborts what is left when closed,
    dropped or interrupted."""

    def __init__(self, llm: LLM, prompts: List[Prompt], params: List[SamplingParams], batch: Any, delta: bool) -> None:
        self._llm, self._prompts, self._params, self._batch, self._delta = llm, prompts, params, batch, delta
        self._owner = []  # sequence index -> (prompt index, choice)
        self._first = []  # prompt index -> its first sequence's engine id (the request_id)
        ids = batch.ids
        for i, sp in enumerate(params):
            self._first.append(ids[len(self._owner)])
            self._owner.extend((i, j) for j in range(sp.n))
        self._done = [0] * len(prompts)
        self._acc: Dict[int, _Accumulated] = {}
        self._open = True

    def __iter__(self) -> "_Stream":
        return self

    def __next__(self) -> RequestOutput:
        if not self._open:
            raise StopIteration
        try:
            event = self._llm._engine.next_event(self._batch)
        except BaseException:
            self.close()
            raise
        if event is None:
            self._open = False
            raise StopIteration
        seq, d = event
        i, j = self._owner[seq]
        self._done[i] += 1 if d.finished else 0
        acc = self._acc.setdefault(seq, _Accumulated())
        return self._llm._stream_output(self._prompts[i], self._params[i], j, d, acc, self._delta,
                                        self._done[i] == self._params[i].n, self._first[i], self._batch.weights)

    def close(self) -> None:
        """Aborts the requests not finished yet (their outputs are dropped)."""
        if self._open:
            self._open = False
            self._llm._engine.cancel(self._batch)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


class _Accumulated:
    """One streamed sequence's outputs so far (the cumulative view a stream update shows)."""

    def __init__(self) -> None:
        self.id = 0
        self.seed = 0
        self.token_ids: List[int] = []
        self.logprobs: List[float] = []
        self.top_logprobs: List[list] = []
        self.logits_digests: List[str] = []
        self.sampling_masks: List[Optional[List[int]]] = []
        self.prompt_logprobs: List[float] = []
        self.prompt_top_logprobs: List[list] = []
        self.text = ""
        self.finished = False
        self.finish_reason = None
        self.error = ""
        self.num_cached_prompt_tokens = 0
        self.routed_experts: tuple = ([], 1, 1)  # the finished delta's (ids, layers, top_k)

    def add(self, d: Any) -> None:
        self.id, self.seed = d.id, d.seed
        self.token_ids += d.token_ids
        self.logprobs += d.logprobs
        self.top_logprobs += d.top_logprobs
        self.logits_digests += d.logits_digests
        self.sampling_masks += d.sampling_masks
        if d.prompt_logprobs:
            self.prompt_logprobs, self.prompt_top_logprobs = d.prompt_logprobs, d.prompt_top_logprobs
        self.text += d.text
        self.finished, self.finish_reason, self.error = d.finished, d.finish_reason, d.error
        self.num_cached_prompt_tokens = d.num_cached_prompt_tokens
        if d.finished:
            self.routed_experts = d.routed_experts


def _is_ids(x: Any) -> bool:
    x = x.tolist() if hasattr(x, "tolist") else x
    return isinstance(x, (list, tuple)) and (len(x) == 0 or isinstance(x[0], int))


def _ids(x: Any, what: str, k: int) -> List[int]:
    x = x.tolist() if hasattr(x, "tolist") else x
    if not isinstance(x, (list, tuple)) or not x or not all(isinstance(t, int) and not isinstance(t, bool) for t in x):
        raise ValueError(f"score: {what} {k} must be a non-empty list of token ids")
    return list(x)
