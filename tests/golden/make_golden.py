#!/usr/bin/env python3
"""Produces Vosti's golden logits with Hugging Face transformers + torch (CPU, f32).

Run once on a development machine (torch is large; CI never runs this):
    python3 -m venv /opt/golden && /opt/golden/bin/pip install torch transformers gguf safetensors
    /opt/golden/bin/python tests/golden/make_golden.py [--gguf PATH] [--only NAME]
(--only NAME remakes one tiny model and its data, leaving the others' files as they are.)

Writes, under tests/golden/:
  models/<name>/         small random-weight models (config.json + safetensors), one per family
  data/<name>.json       per prompt and position: reference logits (full rows for the small
                         models; for the real model the top-32 entries plus 512 fixed sampled ids)
The real model is the default SmolLM2-135M-Instruct Q4_1 GGUF (scripts/fetch-model), which
transformers dequantises to f32 through the gguf package: an implementation independent of Vosti.
"""
import argparse
import json
import os
import shutil
import subprocess

import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPTS_REAL = [
    [1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411, 407, 19712, 8182, 2],
    [1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198],
    [504, 2365, 6354, 16438, 27003, 690, 260, 23790, 2767, 30, 378, 3264, 314, 1046, 2427, 4112, 28, 284, 260],
]
NUM_SAMPLED = 512
TOP = 32


def tiny_models():
    """(name, config class, kwargs, storage dtype, max_shard_size, prompt lengths) of each random-weight
    model (appended in order: a model's index seeds its weights and prompts)."""
    common = dict(vocab_size=320, hidden_size=64, intermediate_size=160, num_hidden_layers=3,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                  rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2)
    return [
        ("llama-tiny", transformers.LlamaConfig,
         dict(common, rope_theta=10000.0, tie_word_embeddings=False), torch.float32, None, (7, 45, 70)),
        ("llama3-tiny-tied-sharded", transformers.LlamaConfig,
         dict(common, rope_theta=500000.0, tie_word_embeddings=True,
              rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                original_max_position_embeddings=64)),
         torch.float32, "60KB", (7, 45, 70)),
        ("qwen2-tiny-bf16", transformers.Qwen2Config,
         dict(common, rope_theta=1000000.0, tie_word_embeddings=True, num_key_value_heads=1),
         torch.bfloat16, None, (7, 45, 70)),
        ("qwen3-tiny", transformers.Qwen3Config,
         dict(common, rope_theta=1000000.0, tie_word_embeddings=False, head_dim=32), torch.float32, None, (7, 45, 70)),
        # Mistral's sliding window, 24 positions: prompts past it (one past two CPU tiles of 32 and
        # a GPU tile of 64 beyond its window).
        ("mistral-tiny-window", transformers.MistralConfig,
         dict(common, rope_theta=10000.0, tie_word_embeddings=False, sliding_window=24), torch.float32, None,
         (7, 45, 100)),
    ]


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=g))


def logits_of(model, ids):
    with torch.no_grad():
        out = model(torch.tensor([ids]), use_cache=False)
    return out.logits[0].float()


def make_tiny(seed=1234, only=None):
    for i, (name, cls, kwargs, dtype, shard, lengths) in enumerate(tiny_models()):
        if only is not None and name != only:
            continue
        config = cls(**kwargs)
        config._attn_implementation = "eager"
        model = transformers.AutoModelForCausalLM.from_config(config).float()
        randomize(model, seed + i)
        out_dir = os.path.join(HERE, "models", name)
        shutil.rmtree(out_dir, ignore_errors=True)
        save_kwargs = {"safe_serialization": True}
        if shard:
            save_kwargs["max_shard_size"] = shard
        model.to(dtype).save_pretrained(out_dir, **save_kwargs)
        for extra in ("generation_config.json",):
            p = os.path.join(out_dir, extra)
            if os.path.exists(p):
                os.remove(p)
        # Reference logits come from the SAVED files loaded in f32, as a user would load them
        # (converting the in-memory model would also round buffers such as rope's inv_freq).
        loaded = transformers.AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32,
                                                                   attn_implementation="eager")
        g = torch.Generator().manual_seed(seed + 100 + i)
        prompts = [torch.randint(0, config.vocab_size, (n,), generator=g).tolist() for n in lengths]
        records = []
        for ids in prompts:
            lg = logits_of(loaded, ids)
            records.append({"tokens": ids, "logits": lg.tolist()})
        write_json(name, {"model": f"models/{name}", "kind": "full", "prompts": records})
        print("wrote", name)


def make_real(gguf_path):
    d, f = os.path.split(gguf_path)
    model = transformers.AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32,
                                                              attn_implementation="eager")
    model.eval()
    g = torch.Generator().manual_seed(7)
    vocab = model.config.vocab_size
    sampled = sorted(torch.randperm(vocab, generator=g)[:NUM_SAMPLED].tolist())
    records = []
    for ids in PROMPTS_REAL:
        lg = logits_of(model, ids)
        positions = []
        for p in range(len(ids)):
            row = lg[p]
            top = torch.topk(row, TOP)
            positions.append({
                "argmax": int(top.indices[0]),
                "margin": float(top.values[0] - top.values[1]),
                "top_ids": top.indices.tolist(),
                "top_values": top.values.tolist(),
                "sampled_values": row[sampled].tolist(),
            })
        records.append({"tokens": ids, "positions": positions})
    write_json("smollm2-135m-instruct-q4_1", {
        "model": "default", "kind": "sampled", "sampled_ids": sampled, "prompts": records,
        "transformers": transformers.__version__, "torch": torch.__version__})
    print("wrote real model golden")


def write_json(name, obj):
    os.makedirs(os.path.join(HERE, "data"), exist_ok=True)
    with open(os.path.join(HERE, "data", name + ".json"), "w") as fh:
        json.dump(obj, fh, separators=(",", ":"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", default=None, help="the default model GGUF (default: scripts/fetch-model)")
    ap.add_argument("--only", default=None, help="remake this tiny model only (and not the real model's data)")
    args = ap.parse_args()
    torch.manual_seed(0)
    make_tiny(only=args.only)
    if args.only:
        return
    gguf = args.gguf or subprocess.check_output([os.path.join(HERE, "..", "..", "scripts", "fetch-model")]).decode().strip()
    make_real(gguf)


if __name__ == "__main__":
    main()
