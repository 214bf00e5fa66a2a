#!/usr/bin/env python3
"""A tiny RL-style loop on Vosti's Python API (runs on the default model, CPU, in seconds).

Each step does what an on-policy trainer (GRPO, PPO) asks of its inference engine:
  1. rollouts: a group of sampled completions per prompt, each with its own seed;
  2. scoring: the logprobs of the sampled tokens recomputed by LLM.score (what a trainer uses
     as the "old" policy's logprobs), checked equal bit for bit to the ones the sampler reported;
  3. a toy policy update (group-normalised rewards scale a random direction on one tensor),
     pushed into the running engine: from in-memory arrays on even steps, from a safetensors
     file on odd steps. Every output names the weights that produced it.
At the end the original weights are put back and step 0's rollouts replay bit for bit.

    PYTHONPATH=build/python python3 examples/rl_loop.py [--steps 3] [--group 4] [--model PATH]
"""
import argparse
import os
import sys
import tempfile

import numpy as np

import vosti
from vosti import LLM, SamplingParams

PROMPTS = ["Name a colour.", "What is 2 + 3?", "Say hello in French."]
TENSOR = "model.norm.weight"  # the final RMSNorm's scale: small, and every logit depends on it


def reward(text: str) -> float:
    """A toy reward: short answers that contain a digit or a capital letter."""
    return float(any(c.isdigit() or c.isupper() for c in text)) - 0.02 * len(text)


def rollout(llm: LLM, prompts, step: int, group: int, max_tokens: int):
    params = SamplingParams(n=group, temperature=1.0, top_p=0.95, max_tokens=max_tokens, seed=1000 * step,
                            logits_digests=True)
    return llm.generate([{"prompt_token_ids": p} for p in prompts], params)


def check_scores(llm: LLM, outputs) -> int:
    """LLM.score on every sampled completion equals the sampler's logprobs, bit for bit."""
    sampled = [(o, c) for o in outputs for c in o.outputs if c.token_ids]
    scores = llm.score([o.prompt_token_ids for o, _ in sampled], [c.token_ids for _, c in sampled])
    for s, (o, c) in zip(scores, sampled):
        a = np.asarray(s.logprobs, dtype=np.float32)
        b = np.asarray(c.token_logprobs, dtype=np.float32)
        if a.tobytes() != b.tobytes():
            raise AssertionError(f"score differs from the sampler's logprobs (seed {c.seed}): {a} vs {b}")
        if s.weights_id != o.weights_id:
            raise AssertionError("scored under other weights than sampled")
    return len(sampled)


def policy_step(llm: LLM, outputs, step: int, lr: float):
    """Group-normalised rewards (GRPO's advantages) scale a seeded random direction on TENSOR."""
    advantages = []
    for o in outputs:
        r = np.array([reward(c.text) for c in o.outputs])
        advantages.append((r - r.mean()) / (r.std() + 1e-6))
    w = llm.get_weights([TENSOR])[TENSOR]
    direction = np.random.default_rng(step).standard_normal(w.shape).astype(np.float32)
    scale = np.float32(lr * float(np.mean(np.abs(np.concatenate(advantages)))) + lr)
    return {TENSOR: (w * (np.float32(1) + scale * direction)).astype(np.float32)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a GGUF file or HF directory (default: the default model)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=12)
    ap.add_argument("--lr", type=float, default=0.05)
    args = ap.parse_args(argv)

    llm = LLM(args.model, device=args.device, max_num_seqs=64)
    tok = llm.get_tokenizer()
    prompts = [tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True) for p in PROMPTS]
    original = llm.get_weights([TENSOR])
    first = None
    with tempfile.TemporaryDirectory() as tmp:
        for step in range(args.steps):
            outputs = rollout(llm, prompts, step, args.group, args.max_tokens)
            first = first or outputs
            n = check_scores(llm, outputs)
            mean_reward = np.mean([reward(c.text) for o in outputs for c in o.outputs])
            print(f"step {step}: weights v{outputs[0].weights_version} {outputs[0].weights_id[:12]}  "
                  f"{n} completions scored bit-exact  mean reward {mean_reward:+.3f}")
            update = policy_step(llm, outputs, step, args.lr)
            if step % 2 == 0:
                llm.update_weights(update)  # in-memory arrays (NumPy here; torch tensors via DLPack)
            else:
                path = os.path.join(tmp, f"step{step}.safetensors")
                vosti.save_safetensors(path, update)
                llm.update_weights(path)  # from disk
    llm.update_weights(original)
    replay = rollout(llm, prompts, 0, args.group, args.max_tokens)
    for a, b in zip(first, replay):
        if a.weights_id != b.weights_id:
            raise AssertionError("the original weights did not restore the original weights_id")
        for x, y in zip(a.outputs, b.outputs):
            if (x.token_ids, x.token_logprobs, x.logits_digests) != (y.token_ids, y.token_logprobs, y.logits_digests):
                raise AssertionError(f"step 0's rollout did not replay bit for bit (seed {x.seed})")
    print(f"restored the original weights ({replay[0].weights_id[:12]}): step 0's rollouts replayed bit for bit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
