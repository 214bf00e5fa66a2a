#!/usr/bin/env python3
"""The Python package's costs on the default model: LLM construction, a batch of generations
(engine time vs the time the call took, i.e. what the Python layer adds), scoring the same
tokens, and update_weights from arrays (one tensor, the whole model) and from a safetensors
file. Prints one line per measurement (wall seconds; process CPU seconds in parentheses).

    PYTHONPATH=build/python python3 bench/python_llm_bench.py [--model PATH] [--device cpu]
"""
import argparse
import os
import tempfile
import time

import numpy as np

import vosti
from vosti import LLM, SamplingParams


def timed(label, fn):
    w0, c0 = time.perf_counter(), time.process_time()
    result = fn()
    w, c = time.perf_counter() - w0, time.process_time() - c0
    print(f"{label:<48} {w:8.3f} s  ({c:.3f} s CPU)", flush=True)
    return result, w


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=32)
    args = ap.parse_args()

    llm, _ = timed("LLM() (load, digest, engine)", lambda: LLM(args.model, device=args.device, max_num_seqs=64))
    prompts = [f"Question {i}: what is {i} + {i}? Answer:" for i in range(args.prompts)]
    sp = SamplingParams(temperature=1.0, seed=1, max_tokens=args.max_tokens, ignore_eos=True)
    steps0 = llm.stats()["seconds_in_steps"]
    outs, wall = timed(f"generate {args.prompts} x {args.max_tokens} tokens", lambda: llm.generate(prompts, sp))
    engine = llm.stats()["seconds_in_steps"] - steps0
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    print(f"{'  engine step time / call time':<48} {engine:8.3f} / {wall:.3f} s  ({tokens / wall:.1f} tok/s)")
    pairs = [(o.prompt_token_ids, o.outputs[0].token_ids) for o in outs]
    scores, _ = timed(f"score the same {tokens} tokens", lambda: llm.score([p for p, _ in pairs],
                                                                         [c for _, c in pairs]))
    assert all(s.logprobs == o.outputs[0].token_logprobs for s, o in zip(scores, outs))

    name = "model.layers.0.mlp.down_proj.weight"
    one = llm.get_weights([name])
    timed("update_weights: one tensor from a NumPy array", lambda: llm.update_weights({name: one[name] * 1.01}))
    everything, _ = timed("get_weights() (all, f32)", llm.get_weights)
    timed("update_weights: every tensor from NumPy arrays", lambda: llm.update_weights(everything))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "w.safetensors")
        vosti.save_safetensors(path, one)
        timed("update_weights: one tensor from a safetensors file", lambda: llm.update_weights(path))
    mb = sum(a.nbytes for a in everything.values()) / 1e6
    print(f"(the model: {len(everything)} tensors, {mb:.0f} MB as f32; device {llm.runner_info['device']})")


if __name__ == "__main__":
    main()
