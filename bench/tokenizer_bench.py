#!/usr/bin/env python3
"""Tokenizer throughput: Vosti (C++) against HF `tokenizers` (Rust) on the same corpus, in one run.

    /opt/golden/bin/python bench/tokenizer_bench.py [--binary build/bench/tokenizer_bench] [--model GGUF] [--mb 16]

The corpus is a deterministic mix of the tokenizer test corpus (English prose, code with
tabs and space runs, numbers, CJK, Arabic, emoji/ZWJ, combining marks, special-token
text), cut into documents of 1-8 KB. Both sides use SmolLM2's tokenizer (HF: loaded from
the GGUF by transformers with the model's own pre-tokenizer, as in
tests/tokenizer/make_fixtures.py) and encode without special tokens. Reported: MB/s
single-threaded (HF: Tokenizer.encode per document) and with all cores (HF:
encode_batch, Rayon; Vosti: one thread per core over the documents), and whether the
ids of the whole corpus are identical (FNV-1a-64 of all ids).
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_fixture_module():
    spec = importlib.util.spec_from_file_location("make_fixtures", os.path.join(ROOT, "tests/tokenizer/make_fixtures.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build_corpus(target_bytes):
    with open(os.path.join(ROOT, "tests/tokenizer/data/corpus.json"), encoding="utf-8") as f:
        entries = [e["text"] for e in json.load(f)["entries"] if "text" in e and e["text"]]
    mask = (1 << 64) - 1
    state = 12345
    docs, total = [], 0
    while total < target_bytes:
        state = (state * 6364136223846793005 + 1442695040888963407) & mask
        want = 1024 + (state >> 40) % 7168
        parts, size = [], 0
        while size < want:
            state = (state * 6364136223846793005 + 1442695040888963407) & mask
            piece = entries[(state >> 33) % len(entries)] + [" ", "\n", "\n\n", "  "][(state >> 20) & 3]
            parts.append(piece)
            size += len(piece.encode("utf-8"))
        doc = "".join(parts)
        docs.append(doc)
        total += len(doc.encode("utf-8"))
    return docs, total


def fnv1a64(h, ids):
    for i in ids:
        for b in int(i & 0xFFFFFFFF).to_bytes(4, "little"):
            h ^= b
            h = (h * 0x100000001B3) & ((1 << 64) - 1)
    return h


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/bench/tokenizer_bench"))
    ap.add_argument("--model", default=os.environ.get("VOSTI_DEFAULT_MODEL",
                                                      os.path.expanduser("~/.cache/vosti/models/SmolLM2-135M-Instruct.Q4_1.gguf")))
    ap.add_argument("--mb", type=float, default=16.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    docs, total = build_corpus(int(args.mb * 1e6))
    mb = total / 1e6
    tok, _ = load_fixture_module().load_smollm2(args.model)

    best_single, h, n_ids = 1e30, 0, 0
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        encs = [tok.encode(d, add_special_tokens=False).ids for d in docs]
        best_single = min(best_single, time.perf_counter() - t0)
    h = 0xCBF29CE484222325
    for ids in encs:
        h = fnv1a64(h, ids)
        n_ids += len(ids)
    best_batch = 1e30
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        tok.encode_batch(docs, add_special_tokens=False)
        best_batch = min(best_batch, time.perf_counter() - t0)

    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
        path = f.name
    try:
        out = subprocess.run([args.binary, args.model, path, str(os.cpu_count()), str(args.repeats)],
                             check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(path)
    v = json.loads(out)
    same = v["fnv64"] == "%016x" % h and v["ids"] == n_ids
    print(f"corpus: {len(docs)} documents, {mb:.1f} MB, {n_ids} ids (SmolLM2 tokenizer), cores: {os.cpu_count()}")
    print(f"{'':28s}{'1 thread':>12s}{'all cores':>12s}")
    print(f"{'HF tokenizers (Rust)':28s}{mb / best_single:>9.2f} MB/s{mb / best_batch:>9.2f} MB/s")
    print(f"{'Vosti':28s}{v['single_mb_s']:>9.2f} MB/s{v['multi_mb_s']:>9.2f} MB/s")
    print(f"ids identical: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
