#!/usr/bin/env python3
"""Writes a random-weight GGUF with the exact shape of a real model, quantised the way
llama.cpp's Q4_K_M is (per llama_tensor_get_type). Two shapes:

  llama-3.1-8b (default, about 4.9 GB): token_embd Q4_K, output Q6_K, attn_q/k/output and
    ffn_gate/up Q4_K, attn_v and ffn_down Q6_K in the "more bits" layers (the first and last
    eighth and every third between) and Q4_K elsewhere; norms F32.
  qwen3-30b-a3b (about 18.6 GB): Qwen3-30B-A3B's config.json (48 layers, hidden 2048, 32 query
    and 4 KV heads of 128, QK-norm, 128 experts top-8 with norm_topk_prob, expert FFN 768, vocab
    151,936 untied, rope theta 1e6, rms eps 1e-6) under llama.cpp's qwen3moe names: the router
    ffn_gate_inp F32 (never quantised), the experts stacked as ffn_gate_exps / ffn_up_exps Q4_K
    and ffn_down_exps Q6_K in the "more bits" layers (its layer read from the tensor's name) and
    Q4_K elsewhere, attn_v likewise, attn_q/k/output Q4_K (the Q8_0 / Q5_K bumps are for
    8-expert models only), token_embd Q4_K, output Q6_K, norms (attn_q_norm, attn_k_norm) F32.

Nothing is downloaded and nothing large is committed: the file goes where you say
(e.g. /tmp). The blocks are random bytes with small f16 scale fields, so activations stay
finite; the router is Gaussian (std 0.02); the tokenizer is a byte-level vocabulary padded with
reserved tokens to the model's size (enough for llama.cpp and Vosti to load it; the text it
makes is noise). --layers N writes fewer layers: that is not the model's shape. Needs numpy and
gguf (pip).

  python3 bench/make_q4km_gguf.py /tmp/llama-3.1-8b-shape.Q4_K_M.gguf [--layers N]
  python3 bench/make_q4km_gguf.py /tmp/qwen3-30b-a3b-shape.Q4_K_M.gguf --shape qwen3-30b-a3b
"""
import argparse
import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

SHAPES = {
    "llama-3.1-8b": dict(arch="llama", hidden=4096, ffn=14336, layers=32, heads=32, kv_heads=8, head_dim=128,
                         vocab=128256, theta=500000.0, eps=1e-5, context=131072, experts=0, tokenizer_pre="llama-bpe",
                         bos=256, eos=257),
    # Qwen/Qwen3-30B-A3B config.json; feed_forward_length is its intermediate_size (no dense layer uses it).
    "qwen3-30b-a3b": dict(arch="qwen3moe", hidden=2048, ffn=6144, layers=48, heads=32, kv_heads=4, head_dim=128,
                          vocab=151936, theta=1000000.0, eps=1e-6, context=40960, experts=128, top_k=8,
                          expert_ffn=768, tokenizer_pre="qwen2", bos=151643, eos=151645),
}
F32_ONES, F32_RANDOM = "ones", "random"  # plan entries that are not quantised


def more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def random_blocks(rng, qtype, rows, cols):
    """[rows, row_bytes] random blocks of qtype with sane f16 scales."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n_blocks = rows * cols // block
    b = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)

    def put(off, mag, signed):
        v = mag * (0.5 + rng.random(n_blocks, dtype=np.float32))
        if signed:
            v *= rng.choice(np.array([-1.0, 1.0], dtype=np.float32), size=n_blocks)
        b[:, off:off + 2] = v.astype(np.float16).view(np.uint8).reshape(n_blocks, 2)

    if qtype == Q.Q4_K:
        put(0, 1e-4, False)
        put(2, 5e-4, False)
    elif qtype == Q.Q6_K:
        put(208, 1e-5, True)
    return b.reshape(rows, -1)


def write_metadata(w, m, n_layers, shape_name):
    w.add_name(f"{shape_name}-shape-random-q4_k_m")
    w.add_context_length(m["context"])
    w.add_embedding_length(m["hidden"])
    w.add_feed_forward_length(m["ffn"])
    w.add_block_count(n_layers)
    w.add_head_count(m["heads"])
    w.add_head_count_kv(m["kv_heads"])
    w.add_rope_freq_base(m["theta"])
    w.add_layer_norm_rms_eps(m["eps"])
    w.add_vocab_size(m["vocab"])
    if m["experts"]:
        w.add_key_length(m["head_dim"])
        w.add_value_length(m["head_dim"])
        w.add_expert_count(m["experts"])
        w.add_expert_used_count(m["top_k"])
        w.add_expert_feed_forward_length(m["expert_ffn"])
    else:
        w.add_rope_dimension_count(m["head_dim"])
    w.add_file_type(15)  # LLAMA_FTYPE_MOSTLY_Q4_K_M
    vocab = m["vocab"]
    tokens = [bytes([i]).decode("latin-1") for i in range(256)]
    tokens += [f"<|reserved_{i}|>" for i in range(vocab - 256)]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(m["tokenizer_pre"])
    w.add_token_list(tokens)
    w.add_token_types([1] * 256 + [3] * (vocab - 256))
    w.add_token_merges(["a b"])  # llama.cpp refuses a BPE vocabulary without merges
    w.add_bos_token_id(m["bos"])
    w.add_eos_token_id(m["eos"])


def tensor_plan(m, n_layers):
    """[(name, qtype, shape)]: shape is (rows,) for F32 vectors, else (..., rows, cols) as PyTorch
    orders it (experts first); qtype a GGML type or F32_ONES / F32_RANDOM."""
    h, hd, vocab = m["hidden"], m["head_dim"], m["vocab"]
    q_dim, kv_dim = m["heads"] * hd, m["kv_heads"] * hd
    plan = [("token_embd.weight", Q.Q4_K, (vocab, h)),
            ("output_norm.weight", F32_ONES, (h,)),
            ("output.weight", Q.Q6_K, (vocab, h))]
    for i in range(n_layers):
        p = f"blk.{i}."
        big = Q.Q6_K if more_bits(i, n_layers) else Q.Q4_K
        plan += [(p + "attn_norm.weight", F32_ONES, (h,)),
                 (p + "attn_q.weight", Q.Q4_K, (q_dim, h)),
                 (p + "attn_k.weight", Q.Q4_K, (kv_dim, h)),
                 (p + "attn_v.weight", big, (kv_dim, h)),
                 (p + "attn_output.weight", Q.Q4_K, (h, q_dim)),
                 (p + "ffn_norm.weight", F32_ONES, (h,))]
        if m["experts"]:
            e, f = m["experts"], m["expert_ffn"]
            plan += [(p + "attn_q_norm.weight", F32_ONES, (hd,)),
                     (p + "attn_k_norm.weight", F32_ONES, (hd,)),
                     (p + "ffn_gate_inp.weight", F32_RANDOM, (e, h)),
                     (p + "ffn_gate_exps.weight", Q.Q4_K, (e, f, h)),
                     (p + "ffn_up_exps.weight", Q.Q4_K, (e, f, h)),
                     (p + "ffn_down_exps.weight", big, (e, h, f))]
        else:
            plan += [(p + "ffn_gate.weight", Q.Q4_K, (m["ffn"], h)),
                     (p + "ffn_up.weight", Q.Q4_K, (m["ffn"], h)),
                     (p + "ffn_down.weight", big, (h, m["ffn"]))]
    return plan


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="llama-3.1-8b")
    ap.add_argument("--layers", type=int, default=0, help="fewer layers for a quick test (default: the model's)")
    ap.add_argument("--seed", type=int, default=8)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    m = SHAPES[a.shape]
    n_layers = a.layers or m["layers"]

    w = gguf.GGUFWriter(a.path, arch=m["arch"])
    write_metadata(w, m, n_layers, a.shape)
    plan = tensor_plan(m, n_layers)
    for name, qtype, shape in plan:
        if qtype in (F32_ONES, F32_RANDOM):
            w.add_tensor_info(name, shape, np.dtype(np.float32), int(np.prod(shape)) * 4)
        else:
            block, size = gguf.GGML_QUANT_SIZES[qtype]
            byte_shape = (*shape[:-1], shape[-1] // block * size)
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), int(np.prod(byte_shape)), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    fout = w.fout[0]
    for name, qtype, shape in plan:
        if qtype == F32_ONES:
            w.write_tensor_data(np.ones(shape, dtype=np.float32))
            continue
        if qtype == F32_RANDOM:
            w.write_tensor_data((0.02 * rng.standard_normal(shape)).astype(np.float32))
            continue
        # Written in row chunks to keep memory low (write_tensor_data wants whole tensors):
        # the same padding before and after as write_tensor_data.
        ti = w.tensors[0].pop(name)
        w.write_padding(fout, fout.tell())
        rows, cols = int(np.prod(shape[:-1])), shape[-1]
        row_bytes = cols // gguf.GGML_QUANT_SIZES[qtype][0] * gguf.GGML_QUANT_SIZES[qtype][1]
        step = max(1, (1 << 26) // row_bytes)
        for r0 in range(0, rows, step):
            random_blocks(rng, qtype, min(step, rows - r0), cols).tofile(fout)
        w.write_padding(fout, ti.nbytes)
    w.close()


if __name__ == "__main__":
    main()
