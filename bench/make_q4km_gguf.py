#!/usr/bin/env python3
"""Writes a random-weight GGUF with the exact shape of Llama-3.1-8B, quantised the way
llama.cpp's Q4_K_M is (per llama_tensor_get_type): token_embd Q4_K, output Q6_K, attn_q/k/
output and ffn_gate/up Q4_K, attn_v and ffn_down Q6_K in the "more bits" layers (the first
and last eighth and every third between) and Q4_K elsewhere; norms F32. About 4.9 GB.

Nothing is downloaded and nothing large is committed: the file goes where you say
(e.g. /tmp). The blocks are random bytes with small f16 scale fields, so activations stay
finite; the tokenizer is a byte-level vocabulary padded to 128,256 entries (enough for
llama.cpp and Vosti to load it; the text it makes is noise). Needs numpy and gguf (pip).

  python3 bench/make_q4km_gguf.py /tmp/llama-3.1-8b-shape.Q4_K_M.gguf [--layers N]
"""
import argparse
import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

HIDDEN, FFN, LAYERS, HEADS, KV_HEADS, VOCAB = 4096, 14336, 32, 32, 8, 128256
HEAD_DIM = HIDDEN // HEADS


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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path")
    ap.add_argument("--layers", type=int, default=LAYERS, help="fewer layers for a quick test (default 32)")
    ap.add_argument("--seed", type=int, default=8)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    n_layers = a.layers

    w = gguf.GGUFWriter(a.path, arch="llama")
    w.add_name("llama-3.1-8b-shape-random-q4_k_m")
    w.add_context_length(131072)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_block_count(n_layers)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(VOCAB)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_file_type(15)  # LLAMA_FTYPE_MOSTLY_Q4_K_M
    tokens = [bytes([i]).decode("latin-1") for i in range(256)]
    tokens += [f"<|reserved_{i}|>" for i in range(VOCAB - 256)]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list(tokens)
    w.add_token_types([1] * 256 + [3] * (VOCAB - 256))
    w.add_token_merges(["a b"])  # llama.cpp refuses a BPE vocabulary without merges
    w.add_bos_token_id(256)
    w.add_eos_token_id(257)

    plan = []  # (name, qtype, rows, cols); f32 vectors have qtype None
    plan.append(("token_embd.weight", Q.Q4_K, VOCAB, HIDDEN))
    plan.append(("output_norm.weight", None, HIDDEN, 1))
    plan.append(("output.weight", Q.Q6_K, VOCAB, HIDDEN))
    for i in range(n_layers):
        p = f"blk.{i}."
        big = more_bits(i, n_layers)
        plan += [
            (p + "attn_norm.weight", None, HIDDEN, 1),
            (p + "attn_q.weight", Q.Q4_K, HIDDEN, HIDDEN),
            (p + "attn_k.weight", Q.Q4_K, KV_HEADS * HEAD_DIM, HIDDEN),
            (p + "attn_v.weight", Q.Q6_K if big else Q.Q4_K, KV_HEADS * HEAD_DIM, HIDDEN),
            (p + "attn_output.weight", Q.Q4_K, HIDDEN, HIDDEN),
            (p + "ffn_norm.weight", None, HIDDEN, 1),
            (p + "ffn_gate.weight", Q.Q4_K, FFN, HIDDEN),
            (p + "ffn_up.weight", Q.Q4_K, FFN, HIDDEN),
            (p + "ffn_down.weight", Q.Q6_K if big else Q.Q4_K, HIDDEN, FFN),
        ]
    for name, qtype, rows, cols in plan:
        if qtype is None:
            w.add_tensor_info(name, (rows,), np.dtype(np.float32), rows * 4)
        else:
            block, size = gguf.GGML_QUANT_SIZES[qtype]
            w.add_tensor_info(name, (rows, cols // block * size), np.dtype(np.uint8), rows * cols // block * size,
                              raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    fout = w.fout[0]
    for name, qtype, rows, cols in plan:
        if qtype is None:
            w.write_tensor_data(np.ones(rows, dtype=np.float32))
            continue
        # Written in row chunks to keep memory low (write_tensor_data wants whole tensors):
        # the same padding before and after as write_tensor_data.
        ti = w.tensors[0].pop(name)
        w.write_padding(fout, fout.tell())
        row_bytes = cols // gguf.GGML_QUANT_SIZES[qtype][0] * gguf.GGML_QUANT_SIZES[qtype][1]
        step = max(1, (1 << 26) // row_bytes)
        for r0 in range(0, rows, step):
            random_blocks(rng, qtype, min(step, rows - r0), cols).tofile(fout)
        w.write_padding(fout, ti.nbytes)
    w.close()


if __name__ == "__main__":
    main()
