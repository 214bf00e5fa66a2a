#!/usr/bin/env python3
"""Planted bugs in the engine model: each must make the proof fail to check.

Each mutant replaces one exact snippet of EngineModel.v (it must occur exactly once)
and recompiles it with coqc in a scratch copy of its own (the mutants run in parallel, one
per core; the report keeps their order). A mutant is KILLED when coqc rejects a
proof (any error other than a syntax error); it SURVIVES if everything still checks.
Run by scripts/check-proof; prints one line per mutant and exits 1 if any survives or
cannot be applied.
  python3 verify/model/mutants.py
"""
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# (name, the C++ bug it models, old snippet, new snippet)
MUTANTS = [
    ("hit-trusts-hash",
     "prefix-cache hit without comparing tokens (trusts the hash)",
     "      cached_prefix s b = Some (firstn ((length (block_table r) + 1) * block_size) (tokens r)) ->\n"
     "      step s (mkState (upd (requests s) x (Some (set_table r (block_table r ++ [b])",
     "      cached_prefix s b <> None ->\n"
     "      step s (mkState (upd (requests s) x (Some (set_table r (block_table r ++ [b])"),
    ("key-without-parent",
     "prefix hash/comparison without its parent: only the block's own tokens are compared",
     "      cached_prefix s b = Some (firstn ((length (block_table r) + 1) * block_size) (tokens r)) ->\n"
     "      step s (mkState (upd (requests s) x (Some (set_table r (block_table r ++ [b])",
     "      (exists pre, cached_prefix s b = Some pre /\\\n"
     "         skipn (length pre - block_size) pre =\n"
     "         skipn (length (block_table r) * block_size)\n"
     "               (firstn ((length (block_table r) + 1) * block_size) (tokens r))) ->\n"
     "      step s (mkState (upd (requests s) x (Some (set_table r (block_table r ++ [b])"),
    ("hit-after-partial-block",
     "prefix hit appended after a partially computed block",
     "      num_computed r = length (block_table r) * block_size ->\n"
     "      (length (block_table r) + 1) * block_size <= length (tokens r) ->",
     "      num_computed r <= length (block_table r) * block_size ->\n"
     "      (length (block_table r) + 1) * block_size <= length (tokens r) ->"),
    ("share-partial-block",
     "registering (sharing) a partially filled block",
     "nth_error (block_table r) j = Some b ->\n      (j + 1) * block_size <= num_computed r ->",
     "nth_error (block_table r) j = Some b ->\n      j * block_size < num_computed r ->"),
    ("reuse-before-refcount-zero",
     "allocation reuses a block whose ref count has not reached zero",
     "finished r = false -> b < num_blocks -> ref_count s b = 0 ->\n      step s (mkState (upd (requests s) x (Some (set_table",
     "finished r = false -> b < num_blocks -> ref_count s b <= 1 ->\n      step s (mkState (upd (requests s) x (Some (set_table"),
    ("evict-keeps-cache-entry",
     "allocation reuses a cached free block without dropping its prefix-cache entry",
     "(num_computed r) false)))\n                      (request_ids s) (kv_mem s) (upd (ref_count s) b 1)\n"
     "                      (upd (cached_prefix s) b None) (key_map s))",
     "(num_computed r) false)))\n                      (request_ids s) (kv_mem s) (upd (ref_count s) b 1)\n"
     "                      (cached_prefix s) (key_map s))"),
    ("preempt-keeps-computed",
     "preemption releases the blocks but keeps num_computed_tokens",
     "step s (mkState (upd (requests s) x (Some (release_tables r fin)))",
     "step s (mkState (upd (requests s) x (Some (set_table (release_tables r fin) [] (num_computed r) fin)))"),
    ("logits-before-kv-write",
     "logits computed from the cache as it was before the step's KV writes",
     "step s (mkState (fun x => option_map (advance batch (write_rows batch 0 batch (kv_mem s)) x)",
     "step s (mkState (fun x => option_map (advance batch (kv_mem s) x)"),
    ("sampler-keyed-by-row",
     "sampler draw keyed by the batch row instead of the output position",
     "let t := sample lg (sampler r) (length (outputs r)) (tokens r) in",
     "let t := sample lg (sampler r) k (tokens r) in"),
    ("accept-without-equality",
     "speculative decoding: a draft token accepted without comparing it to the sampled token",
     "      | d0 :: d' => if Nat.eqb d0 t then verify batch m x (emit r t lg) d' else emit r t lg",
     "      | d0 :: d' => verify batch m x (emit r t lg) d'"),
    ("rejected-draft-counted-computed",
     "speculative decoding: the rows of rejected draft tokens counted as computed (no roll-back)",
     "      set_table r' (block_table r) (Nat.min nc (length (tokens r') - 1)) (finished r)",
     "      set_table r' (block_table r) nc (finished r)"),
    ("truncate-drops-computed-block",
     "roll-back truncates the table into the block of the last verified positions",
     "      num_computed r <= n * block_size ->\n      step s (mkState (upd (requests s) x (Some (set_table r (firstn n (block_table r))",
     "      num_computed r <= (n + 1) * block_size ->\n      step s (mkState (upd (requests s) x (Some (set_table r (firstn n (block_table r))"),
    ("truncate-frees-kept-blocks",
     "roll-back frees the kept blocks too (their ref count drops while the table holds them)",
     "                      (fun b => ref_count s b - occ (skipn n (block_table r)) b)",
     "                      (fun b => ref_count s b - occ (block_table r) b)"),
    ("window-truncate-frees-kept-blocks",
     "speculation with window-local KV: the window table's roll-back frees the kept window blocks too",
     "                      (fun b => ref_count s b - occ (skipn n (window_table r)) b)",
     "                      (fun b => ref_count s b - occ (window_table r) b)"),
    ("window-truncate-into-released",
     "speculation with window-local KV: the roll-back cuts the window table inside its released entries "
     "(their blocks, long freed, freed again)",
     "      window_released r <= n -> num_computed r <= n * block_size ->\n",
     "      num_computed r <= n * block_size ->\n"),
    ("contract-chunk-offset",
     "kernel contract broken: logits depend on the row's offset in its chunk "
     "(a KV tile boundary at the chunk start)",
     "  kernel_logits batch k m = logits_fn (r_tok row) (read_kv m (r_table row) (S (r_pos row)))\n",
     "  kernel_logits batch k m = logits_fn (r_tok row + cnt (r_req row) (firstn k batch))\n"
     "                              (read_kv m (r_table row) (S (r_pos row)))\n"),
    ("window-release-inside-window",
     "window-local KV: the release frees the first block a query at num_computed still reads",
     "      window_released r < first_window_block (num_computed r) ->\n      step s (mkState (upd (requests s) x (Some (set_window r (window_table r) (S (window_released r)))))",
     "      window_released r <= first_window_block (num_computed r) ->\n      step s (mkState (upd (requests s) x (Some (set_window r (window_table r) (S (window_released r)))))"),
    ("window-release-keeps-readable",
     "window-local KV: a released block's ref count drops but the table keeps reading it "
     "(an evicted window block still readable)",
     "      step s (mkState (upd (requests s) x (Some (set_window r (window_table r) (S (window_released r)))))\n"
     "                      (request_ids s) (kv_mem s) (upd (ref_count s) b (ref_count s b - 1))",
     "      step s (mkState (upd (requests s) x (Some (set_window r (window_table r) (window_released r))))\n"
     "                      (request_ids s) (kv_mem s) (upd (ref_count s) b (ref_count s b - 1))"),
    ("window-hole-inside-window",
     "window-local KV: a prefix hit leaves a hole at a window entry the next query reads",
     "      length (window_table r) < first_window_block (num_computed r) ->",
     "      length (window_table r) <= first_window_block (num_computed r) ->"),
    ("window-register-uncomputed",
     "window-local KV: a window block registered in the prefix cache before its KV is computed",
     "      requests s x = Some r -> window_released r <= j -> nth_error (window_table r) j = Some b ->\n"
     "      (j + 1) * block_size <= num_computed r ->",
     "      requests s x = Some r -> window_released r <= j -> nth_error (window_table r) j = Some b ->\n"
     "      j * block_size < num_computed r ->"),
    ("window-reads-before-window",
     "window hypothesis too weak: the window layers also read the position just before the window",
     "  (forall q, window_first (length w) <= q -> nth_error w q = nth_error w' q) ->",
     "  (forall q, window_first (length w) <= S q -> nth_error w q = nth_error w' q) ->"),
]


def coqc(workdir, name):
    return subprocess.run(["timeout", "300", "coqc", "-Q", ".", "Vosti", name],
                          cwd=workdir, capture_output=True, text=True)


def check(base, source, mutant):
    """Compiles one mutant in a scratch copy of `base` (ListFacts compiled); its report line and
    whether it failed."""
    name, bug, old, new = mutant
    if source.count(old) != 1:
        return f"  FAIL  mutant {name}: snippet found {source.count(old)} times (model changed?)", True
    work = tempfile.mkdtemp()
    try:
        for f in os.listdir(base):
            shutil.copy(os.path.join(base, f), work)
        with open(os.path.join(work, "EngineModel.v"), "w") as f:
            f.write(source.replace(old, new))
        r = coqc(work, "EngineModel.v")
    finally:
        shutil.rmtree(work)
    out = r.stdout + r.stderr
    if r.returncode != 0 and "Syntax error" not in out:
        where = next((l for l in out.splitlines() if l.startswith("File ")), "")
        return f"  ok    mutant {name} killed ({bug}); {where.strip()}", False
    if r.returncode != 0:
        return f"  FAIL  mutant {name}: syntax error, the mutant is malformed\n{out}", True
    return f"  FAIL  mutant {name} SURVIVED: the proof still checks with: {bug}", True


def main():
    source = open(os.path.join(HERE, "EngineModel.v")).read()
    base = tempfile.mkdtemp()
    bad = 0
    try:
        shutil.copy(os.path.join(HERE, "ListFacts.v"), base)
        if coqc(base, "ListFacts.v").returncode != 0:
            print("  FAIL  mutants: ListFacts.v does not compile")
            return 1
        # Each mutant compiles in its own copy, one per core; the report keeps the list's order.
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            for line, failed in pool.map(lambda m: check(base, source, m), MUTANTS):
                print(line, flush=True)
                bad += 1 if failed else 0
    finally:
        shutil.rmtree(base)
    print(f"mutants: {len(MUTANTS) - bad} killed, {bad} not")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
