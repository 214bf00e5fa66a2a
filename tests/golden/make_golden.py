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
        # Gemma 3: head_dim 32 > hidden / heads = 16, query_pre_attn_scalar 24 != head_dim, layers
        # sliding / full / sliding (pattern 2) with a 24-position window (prompts past it), the local
        # rotary base 10,000 unscaled and the global 1e6 with linear scaling x4; tied embeddings.
        ("gemma3-tiny", transformers.Gemma3TextConfig,
         dict(common, intermediate_size=128, head_dim=32, rms_norm_eps=1e-6, bos_token_id=2, eos_token_id=1,
              pad_token_id=0, tie_word_embeddings=True, query_pre_attn_scalar=24, sliding_window=24,
              sliding_window_pattern=2,
              rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                               "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1000000.0}}),
         torch.float32, None, (7, 45, 100)),
        # The language model of a Gemma3ForConditionalGeneration checkpoint (config nested in
        # text_config, tensors under language_model.model.), bf16, final logit soft-capping 30,
        # explicit layer_types (global last), window 16, one kv head.
        ("gemma3-tiny-mm-bf16-softcap", transformers.Gemma3TextConfig,
         dict(common, intermediate_size=128, num_key_value_heads=1, head_dim=16, rms_norm_eps=1e-6, bos_token_id=2,
              eos_token_id=[1, 106], pad_token_id=0, tie_word_embeddings=True, query_pre_attn_scalar=16,
              sliding_window=16, final_logit_softcapping=30.0,
              layer_types=["sliding_attention", "sliding_attention", "full_attention"]),
         torch.bfloat16, None, (7, 45, 70)),
        # Qwen3-MoE as Qwen3-30B-A3B is built: every layer sparse, 8 experts, top-2, renormalised
        # top-k probabilities, expert FFN 48 (!= the dense 160); sharded. Also written as a GGUF.
        ("qwen3-moe-tiny", transformers.Qwen3MoeConfig,
         dict(common, rope_theta=1000000.0, tie_word_embeddings=False, head_dim=32, num_experts=8,
              num_experts_per_tok=2, norm_topk_prob=True, moe_intermediate_size=48, decoder_sparse_step=1,
              mlp_only_layers=[]),
         torch.float32, "60KB", (7, 45, 70)),
        # Qwen3-MoE's other options: a dense layer (mlp_only_layers), top-3 of 6 probabilities not
        # renormalised, bf16.
        ("qwen3-moe-tiny-dense1-bf16", transformers.Qwen3MoeConfig,
         dict(common, rope_theta=1000000.0, tie_word_embeddings=True, head_dim=16, num_experts=6,
              num_experts_per_tok=3, norm_topk_prob=False, moe_intermediate_size=32, decoder_sparse_step=1,
              mlp_only_layers=[1]),
         torch.bfloat16, None, (7, 45, 70)),
        # Mixtral: 4 experts of FFN 96, top-2 (softmax over the top-2), no sliding window (null).
        ("mixtral-tiny", transformers.MixtralConfig,
         dict(common, intermediate_size=96, rope_theta=1000000.0, tie_word_embeddings=False, num_local_experts=4,
              num_experts_per_tok=2, sliding_window=None),
         torch.float32, None, (7, 45, 70)),
    ]


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    # Gemma's norms multiply by (1 + w): w around 0 gives multipliers around 1, as elsewhere.
    norm_center = 0.0 if model.config.model_type.startswith("gemma") else 1.0
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(norm_center + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=g))


def logits_of(model, ids):
    with torch.no_grad():
        out = model(torch.tensor([ids]), use_cache=False)
    return out.logits[0].float()


def routed_experts_of(model, ids):
    """transformers' router choices: per position, per MoE layer, the top-k expert ids (ascending) of
    softmax(router logits), as its routers pick them."""
    k = model.config.num_experts_per_tok
    with torch.no_grad():
        out = model(torch.tensor([ids]), use_cache=False, output_router_logits=True)
    per_layer = [torch.topk(torch.softmax(r.float(), dim=-1), k, dim=-1).indices.sort(dim=-1).values
                 for r in out.router_logits]  # [layers] x [T, k]
    return [[layer[p].tolist() for layer in per_layer] for p in range(len(ids))]


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
        if name == "gemma3-tiny":
            write_gemma3_gguf(loaded, os.path.join(HERE, "models", "gemma3-tiny.gguf"))
        if name == "qwen3-moe-tiny":
            write_qwen3moe_gguf(loaded, os.path.join(HERE, "models", "qwen3-moe-tiny.gguf"))
        if name == "mixtral-tiny":
            write_mixtral_gguf(loaded, os.path.join(HERE, "models", "mixtral-tiny.gguf"))
        if "-mm-" in name:
            nest_as_conditional_generation(out_dir)
        g = torch.Generator().manual_seed(seed + 100 + i)
        prompts = [torch.randint(0, config.vocab_size, (n,), generator=g).tolist() for n in lengths]
        records = []
        for ids in prompts:
            lg = logits_of(loaded, ids)
            record = {"tokens": ids, "logits": lg.tolist()}
            if getattr(config, "num_experts_per_tok", None):
                record["routed_experts"] = routed_experts_of(loaded, ids)
            records.append(record)
        write_json(name, {"model": f"models/{name}", "kind": "full", "prompts": records})
        print("wrote", name)


def nest_as_conditional_generation(out_dir):
    """Rewrites a saved Gemma3ForCausalLM as the language model of a Gemma3ForConditionalGeneration
    checkpoint as the Hub stores them: config.json {"model_type": "gemma3", "text_config": {...}},
    tensors under language_model.model. (the vision tower is left out: Vosti reads the text model)."""
    from safetensors.torch import load_file, save_file
    with open(os.path.join(out_dir, "config.json")) as f:
        text = json.load(f)
    outer = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
             "eos_token_id": text.pop("eos_token_id"), "text_config": text}
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(outer, f, indent=2)
    path = os.path.join(out_dir, "model.safetensors")
    tensors = load_file(path)
    renamed = {("language_model." + k if k.startswith("model.") else k): v for k, v in tensors.items()}
    save_file(renamed, path, metadata={"format": "pt"})


def write_gguf_norm(writer, name, t):
    """A norm weight as llama.cpp's convert_hf_to_gguf.py stores Gemma's: 1 + w, in f32."""
    writer.add_tensor(name, (t.detach().float() + 1.0).numpy())


def write_gemma3_gguf(model, path):
    """The tiny Gemma 3 as llama.cpp's converter writes a gemma3 GGUF (f32 tensors, norms stored
    as 1 + w, q/k rows unpermuted, no output.weight when tied). Keys llama.cpp itself derives for
    the real models (a period-6 window pattern, local rotary base 10,000, the attention scale from
    the layer count) are written explicitly, as the newer gguf keys allow: the tiny model has
    pattern 2 and query_pre_attn_scalar 24."""
    import gguf
    c = model.config
    w = gguf.GGUFWriter(path, "gemma3")
    w.add_name("gemma3-tiny")
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_key_length(c.head_dim)
    w.add_value_length(c.head_dim)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    rp = c.rope_parameters
    w.add_rope_freq_base(rp["full_attention"]["rope_theta"])
    w.add_rope_freq_base_swa(rp["sliding_attention"]["rope_theta"])
    if rp["full_attention"].get("rope_type") == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(rp["full_attention"]["factor"])
    w.add_sliding_window(c.sliding_window)
    w.add_sliding_window_pattern([t == "sliding_attention" for t in c.layer_types])
    w.add_attention_scale(c.query_pre_attn_scalar ** -0.5)
    w.add_vocab_size(c.vocab_size)
    sd = model.state_dict()
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"].float().numpy())
    names = {"input_layernorm": "attn_norm", "post_attention_layernorm": "post_attention_norm",
             "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
             "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
             "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    for i in range(c.num_hidden_layers):
        for hf, gg in names.items():
            t = sd[f"model.layers.{i}.{hf}.weight"]
            if "norm" in hf:
                write_gguf_norm(w, f"blk.{i}.{gg}.weight", t)
            else:
                w.add_tensor(f"blk.{i}.{gg}.weight", t.float().numpy())
    write_gguf_norm(w, "output_norm.weight", sd["model.norm.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_qwen3moe_gguf(model, path):
    """The tiny Qwen3-MoE as llama.cpp's converter writes a qwen3moe GGUF: f32 tensors, q/k not
    permuted (NeoX rotary), the experts stacked into ffn_{gate,up,down}_exps [n_expert, rows, cols]
    (PyTorch order; ggml's ne reversed), the router as ffn_gate_inp, expert_count /
    expert_used_count / expert_feed_forward_length in the metadata (llama.cpp renormalises the
    top-k weights of qwen3moe: norm_topk_prob true)."""
    import gguf
    c = model.config
    w = gguf.GGUFWriter(path, "qwen3moe")
    w.add_name("qwen3-moe-tiny")
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_key_length(c.head_dim)
    w.add_value_length(c.head_dim)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_rope_freq_base(c.rope_parameters["rope_theta"])
    w.add_expert_count(c.num_experts)
    w.add_expert_used_count(c.num_experts_per_tok)
    w.add_expert_feed_forward_length(c.moe_intermediate_size)
    w.add_vocab_size(c.vocab_size)
    sd = model.state_dict()
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"].float().numpy())
    names = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
             "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
             "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate": "ffn_gate_inp"}
    for i in range(c.num_hidden_layers):
        for hf, gg in names.items():
            key = f"model.layers.{i}.{hf}.weight"
            if key not in sd:  # transformers 5 names the router's parameter mlp.gate.weight too
                raise KeyError(key)
            w.add_tensor(f"blk.{i}.{gg}.weight", sd[key].float().numpy())
        # transformers 5 holds the experts fused: gate_up_proj [E, 2I, H] (gate rows first), down_proj [E, H, I].
        gate_up = sd[f"model.layers.{i}.mlp.experts.gate_up_proj"].float()
        inter = c.moe_intermediate_size
        w.add_tensor(f"blk.{i}.ffn_gate_exps.weight", gate_up[:, :inter, :].contiguous().numpy())
        w.add_tensor(f"blk.{i}.ffn_up_exps.weight", gate_up[:, inter:, :].contiguous().numpy())
        w.add_tensor(f"blk.{i}.ffn_down_exps.weight",
                     sd[f"model.layers.{i}.mlp.experts.down_proj"].float().contiguous().numpy())
    w.add_tensor("output_norm.weight", sd["model.norm.weight"].float().numpy())
    w.add_tensor("output.weight", sd["lm_head.weight"].float().numpy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def llama_permute(t, n_head):
    """llama.cpp's convert_hf_to_gguf.py LlamaModel.permute: q/k rows of each head interleaved for
    its GPT-J-style rotary."""
    return t.reshape(n_head, 2, t.shape[0] // n_head // 2, *t.shape[1:]).swapaxes(1, 2).reshape(t.shape)


def write_mixtral_gguf(model, path):
    """The tiny Mixtral as llama.cpp's converter writes it: architecture "llama" with
    llama.expert_count / expert_used_count, q and k rows permuted (LlamaModel.permute), the experts'
    w1 / w3 / w2 stacked into ffn_gate_exps / ffn_up_exps / ffn_down_exps, the router ffn_gate_inp."""
    import gguf
    c = model.config
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("mixtral-tiny")
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_rope_dimension_count(c.hidden_size // c.num_attention_heads)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_rope_freq_base(c.rope_parameters["rope_theta"])
    w.add_expert_count(c.num_local_experts)
    w.add_expert_used_count(c.num_experts_per_tok)
    w.add_vocab_size(c.vocab_size)
    sd = model.state_dict()
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"].float().numpy())
    for i in range(c.num_hidden_layers):
        p = f"model.layers.{i}."
        w.add_tensor(f"blk.{i}.attn_norm.weight", sd[p + "input_layernorm.weight"].float().numpy())
        w.add_tensor(f"blk.{i}.attn_q.weight",
                     llama_permute(sd[p + "self_attn.q_proj.weight"].float(), c.num_attention_heads).numpy())
        w.add_tensor(f"blk.{i}.attn_k.weight",
                     llama_permute(sd[p + "self_attn.k_proj.weight"].float(), c.num_key_value_heads).numpy())
        w.add_tensor(f"blk.{i}.attn_v.weight", sd[p + "self_attn.v_proj.weight"].float().numpy())
        w.add_tensor(f"blk.{i}.attn_output.weight", sd[p + "self_attn.o_proj.weight"].float().numpy())
        w.add_tensor(f"blk.{i}.ffn_norm.weight", sd[p + "post_attention_layernorm.weight"].float().numpy())
        w.add_tensor(f"blk.{i}.ffn_gate_inp.weight", sd[p + "mlp.gate.weight"].float().numpy())
        gate_up = sd[p + "mlp.experts.gate_up_proj"].float()
        inter = c.intermediate_size
        w.add_tensor(f"blk.{i}.ffn_gate_exps.weight", gate_up[:, :inter, :].contiguous().numpy())
        w.add_tensor(f"blk.{i}.ffn_up_exps.weight", gate_up[:, inter:, :].contiguous().numpy())
        w.add_tensor(f"blk.{i}.ffn_down_exps.weight", sd[p + "mlp.experts.down_proj"].float().contiguous().numpy())
    w.add_tensor("output_norm.weight", sd["model.norm.weight"].float().numpy())
    w.add_tensor("output.weight", sd["lm_head.weight"].float().numpy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


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
