#!/usr/bin/env python3
"""Planted bugs in the C++ cache and scheduler: the lockstep refinement test must catch each.

Copies the working tree to a scratch directory, builds tests/verify (verify_tests) once,
then for each mutant replaces exact snippets of src/cache or src/sched (each must occur
exactly once), rebuilds incrementally, runs the refinement test on a reduced number of
random sequences, and restores the file. The C++ check_invariants() calls are switched
off (VOSTI_REFINEMENT_MODEL_ONLY=1), so a mutant is KILLED only when the model catches it:
a model guard rejects a C++ transition, or the abstraction relation or the model
invariant breaks (or the C++ code aborts on one of its own VOSTI_CHECKs, which the
table would then show). Prints the kill table; exits 1 if a mutant survives.
Not part of CI (each mutant is a rebuild); run it after changing src/cache or src/sched:
  python3 verify/refinement/cpp_mutants.py [--seeds N]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# (name, file, [(old, new), ...], the bug). Each old snippet must occur exactly once.
MUTANTS = [
    ("hit-trusts-hash", "src/cache/block_pool.cc",
     [("const bool same = m.parent_key == parent_key && m.parent_serial == parent_serial &&\n"
       "                      std::equal(m.tokens.begin(), m.tokens.end(), block_tokens.begin(), block_tokens.end());",
       "const bool same = true;")],
     "prefix-cache hit without comparing tokens or parents (trusts the hash)"),
    ("key-without-parent", "src/cache/block_pool.cc",
     [("const bool same = m.parent_key == parent_key && m.parent_serial == parent_serial &&",
       "const bool same =")],
     "hit compares the block's own tokens but not its parent chain"),
    ("share-uncomputed-block", "src/cache/block_pool.cc",
     [("std::min(static_cast<size_t>(num_computed_tokens) / bs, table.blocks_.size());",
       "std::min(tokens.size() / bs, table.blocks_.size());")],
     "registers (shares) full blocks whose KV is not computed yet"),
    ("reuse-before-refcount-zero", "src/cache/block_pool.cc",
     [("if (--m.ref_count == 0) push_free_tail(*it);",
       "if (--m.ref_count <= 1 && !m.on_free_list) push_free_tail(*it);"),
      ("VOSTI_CHECK(meta(b).on_free_list && meta(b).ref_count == 0, \"allocating a block that is not free\");",
       "VOSTI_CHECK(meta(b).on_free_list, \"allocating a block that is not free\");")],
     "a block goes back on the free list while still referenced (and the allocation check is gone)"),
    ("evict-keeps-cache-entry", "src/cache/block_pool.cc",
     [("if (meta(b).serial != 0) evict(b);", "(void)0;")],
     "allocation reuses a cached block without dropping its cache entry"),
    ("preempt-keeps-computed", "src/sched/scheduler.cc",
     [("  victim.num_computed_tokens = 0;\n", "")],
     "preemption releases the blocks but keeps num_computed_tokens"),
    ("spec-accept-without-equality", "src/sched/scheduler.cc",
     [("if (r.unverified.front() == token) {", "if (true) {")],
     "speculative decoding: a draft position counted computed without comparing its token"),
    ("spec-cache-unverified-draft", "src/sched/scheduler.cc",
     [("r.num_computed_tokens += s.num_new_tokens - s.num_draft_tokens;  // drafts wait for append_token\n"
       "    settle_computed(r);",
       "r.num_computed_tokens += s.num_new_tokens - s.num_draft_tokens;\n"
       "    settle_computed(r);\n"
       "    std::vector<int32_t> seq = r.tokens;\n"
       "    seq.insert(seq.end(), s.token_ids.end() - s.num_draft_tokens, s.token_ids.end());\n"
       "    pool_.register_full_blocks(r.block_table, seq, r.num_computed_tokens + s.num_draft_tokens);")],
     "speculative decoding: blocks holding unverified draft tokens registered in the prefix cache"),
    ("spec-rollback-drops-computed-block", "src/sched/scheduler.cc",
     [("pool_.truncate(r.block_table, pool_.blocks_for(r.num_computed_tokens));",
       "pool_.truncate(r.block_table, r.num_computed_tokens / config_.pool.block_size);")],
     "speculative roll-back frees the block holding the last verified positions"),
    ("window-release-inside-window", "src/sched/scheduler.cc",
     [("      r.window_table, first_window_block(r.num_computed_tokens, config_.window.window, config_.pool.block_size));",
       "      r.window_table, std::min(r.window_table.num_blocks(), first_window_block(r.num_computed_tokens,\n"
       "                               config_.window.window, config_.pool.block_size) + 1));")],
     "window-local KV: the release frees the first window block a later query still reads"),
    ("window-hit-past-full-hit", "src/sched/scheduler.cc",
     [("      window_match.truncate(n);\n", "")],
     "window-local KV: the window table takes hit blocks past the full table's hit (positions not computed)"),
    ("window-hole-inside-window", "src/sched/scheduler.cc",
     [("        first_window_block(window_match.num_tokens, config_.window.window, config_.pool.block_size));",
       "        first_window_block(window_match.num_tokens, config_.window.window, config_.pool.block_size) + 1);")],
     "window-local KV: a prefix hit leaves a hole where the window still reads"),
    ("spec-window-release-unverified", "src/sched/scheduler.cc",
     [("    settle_computed(r);\n    r.unverified.assign(",
       "    settle_computed(r);\n"
       "    if (window_pool_)\n"
       "      window_pool_->release_leading(r.window_table, first_window_block(r.num_computed_tokens + s.num_draft_tokens,\n"
       "                                    config_.window.window, config_.pool.block_size));\n"
       "    r.unverified.assign(")],
     "speculation with window-local KV: window blocks released for draft positions before they are verified"),
    ("spec-window-rollback-skipped", "src/sched/scheduler.cc",
     [("  if (window_pool_) window_pool_->truncate(r.window_table, window_pool_->blocks_for(r.num_computed_tokens));\n",
       "")],
     "speculation with window-local KV: a rejected draft rolls back the full table only"),
]


def run(cmd, cwd, env=None, timeout=1800):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=200, help="random sequences per mutant")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="vosti-cpp-mutants-")
    try:
        files = run(["git", "ls-files", "-co", "--exclude-standard"], ROOT).stdout.split()
        for f in files:
            src = os.path.join(ROOT, f)
            if os.path.isfile(src):
                os.makedirs(os.path.dirname(os.path.join(work, f)), exist_ok=True)
                shutil.copy2(src, os.path.join(work, f))
        build = os.path.join(work, "build")
        r = run(["cmake", "-S", work, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                 "-DVOSTI_CUDA=OFF", "-DVOSTI_TESTS=ON"], work)
        if r.returncode != 0:
            print(r.stdout + r.stderr)
            return 1
        # The C++ check_invariants() calls are left out: the model alone must catch each bug.
        env = dict(os.environ, VOSTI_REFINEMENT_SEEDS=str(args.seeds), VOSTI_REFINEMENT_MODEL_ONLY="1")
        test = [os.path.join(build, "tests", "verify", "verify_tests"),
                "--gtest_filter=RefinementTest.*", "--gtest_brief=1"]
        if run(["ninja", "-C", build, "-j2", "verify_tests"], work).returncode != 0:
            print("baseline build failed")
            return 1
        base = run(test, work, env)
        if base.returncode != 0:
            print("baseline refinement test fails:\n" + base.stdout[-2000:])
            return 1
        print(f"  ok    baseline passes ({args.seeds} sequences)")
        survived = 0
        for name, path, edits, bug in MUTANTS:
            full = os.path.join(work, path)
            original = open(full).read()
            counts = [original.count(old) for old, _ in edits]
            if any(c != 1 for c in counts):
                print(f"  FAIL  mutant {name}: snippets found {counts} times in {path}")
                survived += 1
                continue
            mutated = original
            for old, new in edits:
                mutated = mutated.replace(old, new)
            open(full, "w").write(mutated)
            try:
                b = run(["ninja", "-C", build, "-j2", "verify_tests"], work)
                if b.returncode != 0:
                    print(f"  FAIL  mutant {name}: does not compile\n{b.stdout[-1500:]}")
                    survived += 1
                    continue
                t = run(test, work, env)
                out = t.stdout + t.stderr
                if t.returncode == 0:
                    print(f"  FAIL  mutant {name} SURVIVED ({bug})")
                    survived += 1
                else:
                    why = next((l.strip() for l in out.splitlines() if "Which is:" in l or "Check failed" in l
                                or "check failed" in l.lower()), "test failed (rc %d)" % t.returncode)
                    print(f"  ok    mutant {name} killed ({bug}): {why[:300]}")
            finally:
                open(full, "w").write(original)
        print(f"cpp mutants: {len(MUTANTS) - survived} killed, {survived} not")
        return 1 if survived else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
