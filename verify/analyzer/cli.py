# vosti-analyze: proves, for every shipped kernel, that each output element's floating-point
# computation does not depend on the batch (docs/VERIFICATION.md, "The kernel analyzer"; README.md).
#   verify/analyzer/vosti-analyze [--build build] [--spec kernels.toml] [--json FILE] [--only NAME]
# Reads the PTX nvcc kept for the shipped build (build/ptx/), LLVM IR of the CPU kernels (clang,
# build/llvm/), the GEMM launch plans (build/verify/analyzer/vosti_gemm_plans); prints the table
# kernel x variation axis -> proven / not proven (why) and what it treats as opaque; exits 1 if a
# shipped kernel is not proven, 2 on a usage or artifact error. Where to find what it reads:
# spec/artifacts.toml.
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
import time

from .checks.kernels import (TABLE_AXES, KernelResult, analyze_kernel, apply_row_comparison, cpu_k_values,
                             start_row_comparison, verdict)
from .frontend.artifacts import ArtifactCache, emit_llvm
from .spec import loader as specmod

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, "..", "..")


def main(argv: list[str]) -> int:
    args = _arguments(argv)
    t0 = time.time()
    try:
        sp = specmod.load_spec(args.spec)
        art = specmod.load_artifacts(args.artifacts)
    except (OSError, ValueError, KeyError) as e:
        print(f"vosti-analyze: {args.spec}: {e}", file=sys.stderr)
        return 2
    if not args.no_llvm:
        for e in emit_llvm(args.build, REPO, art.llvm_sources, art.cmake):
            print(f"vosti-analyze: {e}", file=sys.stderr)
            return 2
    cache = ArtifactCache()
    rows_future = None
    if any(k.compared_calls for k in sp.kernels if not args.only or re.search(args.only, k.name)) or \
            (args.only and re.search(args.only, "cpu matmul: one-row and tiled paths")):
        rows_future = start_row_comparison(sp, args.build, cpu_k_values(args.shapes), art.decoders)
    have_cuda = bool(glob.glob(os.path.join(args.build, "ptx", art.cuda, "*.ptx")))
    results, skipped, claimed = _analyze(sp, args, cache, have_cuda)
    opaque = sorted({r.spec.opaque for r in results if r.spec.opaque} |
                    {f"{r.spec.name}: indirect calls to {r.spec.indirect_calls}" for r in results if r.spec.indirect_calls})
    if not args.only and not _complete(args, art, cache, claimed):
        return 2
    plan_rows = _plan_rows(args, art, results, cache, have_cuda, rows_future)
    print_report(results, opaque, time.time() - t0, plan_rows=plan_rows)
    if skipped:
        print(f"\nNot analysed here: this build has no CUDA (no PTX under {args.build}/ptx): "
              f"{len(skipped)} CUDA entries and the GEMM plans. Build with nvcc to analyse them.")
    if args.json:
        _write_json(args.json, results)
    bad = [r.spec.name for r in results if r.spec.shipped and not r.proven()] + \
        [p.name for p in plan_rows if not p.proven]
    if args.known_gaps:
        return known_gaps_status(args.known_gaps, bad, [r.spec.name for r in results] + [p.name for p in plan_rows])
    return 1 if bad else 0


def _arguments(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="vosti-analyze")
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--spec", default=specmod.DEFAULT_SPEC)
    ap.add_argument("--only", default="", help="regex on kernel names")
    ap.add_argument("--shapes", default=specmod.DEFAULT_SHAPES, help="the deployment's GEMM shapes and GPUs")
    ap.add_argument("--artifacts", default=specmod.DEFAULT_ARTIFACTS, help="where the sources and artifacts are")
    ap.add_argument("--json", default="")
    ap.add_argument("--no-llvm", action="store_true", help="do not (re)emit the CPU kernels' LLVM IR")
    ap.add_argument("--known-gaps", default="", help="TOML of rows known not proven: they do not fail the run "
                    "(a listed row that is proven does)")
    return ap.parse_args(argv)


def _analyze(sp: specmod.Spec, args, cache: ArtifactCache, have_cuda: bool):
    """(results, entries skipped for want of CUDA, (file, function) of every function an entry matched)."""
    claimed: set[tuple[str, str]] = set()
    results, skipped = [], []
    for ks in sp.kernels:
        if args.only and not re.search(args.only, ks.name):
            continue
        if not have_cuda and all(a.startswith("ptx:") for a in ks.artifacts):
            skipped.append(ks.name)
            continue
        results.append(analyze_kernel(sp, ks, args.build, cache, claimed, cpu_k_values(args.shapes)))
    return results, skipped, claimed


def _complete(args, art: specmod.Artifacts, cache: ArtifactCache, claimed: set) -> bool:
    """Every compiled kernel in the analysed artifacts must have an entry (else says which)."""
    for d in art.complete:
        for path in glob.glob(os.path.join(args.build, "ptx", d, "*.ptx")):
            cache.functions(path)
    for path, funcs in cache.funcs.items():
        for f in funcs:
            if (path, f.name) not in claimed and f.kind == "ptx":
                print(f"vosti-analyze: {os.path.basename(path)}: kernel {f.name} has no spec entry "
                      f"(add one to {os.path.basename(args.spec)})", file=sys.stderr)
                return False
    return True


def _plan_rows(args, art: specmod.Artifacts, results: list[KernelResult], cache: ArtifactCache, have_cuda: bool,
               rows_future) -> list:
    """The rows of the plan checks: GEMM plans per GPU, the attention plans and split paths, the CPU
    matmul's one-row and tiled paths."""
    from .checks import plans, signature
    plan_rows = []
    if not args.only or re.search(args.only, "gemm plans"):
        tma_paths = sorted(glob.glob(os.path.join(args.build, "ptx", art.cutlass, "*.ptx")))
        sigs = signature.tile_signatures(tma_paths, cache)
        if have_cuda:
            plan_rows = plans.check_plans(args.build, results, args.shapes, art, args.spec, sigs)
        plan_rows += plans.check_attention_plans(args.build, art, args.spec)
    row_outcome = apply_row_comparison(results, rows_future)
    if not args.only or re.search(args.only, "gemm plans") or \
            re.search(args.only, "cpu matmul: one-row and tiled paths"):
        plan_rows += plans.cpu_matmul_paths(row_outcome)
    return plan_rows


def _write_json(path: str, results: list[KernelResult]) -> None:
    with open(path, "w") as fh:
        json.dump([{"kernel": r.spec.name, "proven": r.proven(),
                    "axes": {a: verdict(r, a) for a in TABLE_AXES},
                    "violations": [{"function": f, "line": v.line, "text": v.text, "axes": sorted(v.axes),
                                    "why": v.why} for f, v in r.violations],
                    "errors": r.errors} for r in results], fh, indent=1)


def print_report(results: list[KernelResult], opaque: list[str], elapsed: float, out=sys.stdout,
                 plan_rows=()) -> None:
    w = 50
    print("vosti-analyze: per output element, the floating-point computation across the variation axes", file=out)
    print(f"{'kernel':<{w}} " + " ".join(f"{a:<9}" for a in TABLE_AXES), file=out)
    short = {"proven": "proven", "proven (no input)": "-", "NOT PROVEN": "NOT", "ERROR": "ERROR"}
    for r in results:
        cells = [short[verdict(r, a)] for a in TABLE_AXES]
        print(f"{r.spec.name[:w]:<{w}} " + " ".join(f"{c:<9}" for c in cells), file=out)
    for p in plan_rows:
        cells = [("proven" if p.proven else "NOT") if a in ("plan", "rows", "padding") else "-" for a in TABLE_AXES]
        print(f"{p.name[:w]:<{w}} " + " ".join(f"{c:<9}" for c in cells), file=out)
    print("  proven: the axis reaches the kernel only through addresses, masks of whole elements and bounds of",
          file=out)
    print("  loops that carry no floating-point state; '-': the axis is not an input of the kernel.", file=out)
    for r in results:
        for n in r.notes:
            print(f"  note ({r.spec.name}): {n}", file=out)
    failures = [r for r in results if not r.proven()]
    for r in failures:
        print(f"\nNOT PROVEN: {r.spec.name} ({'shipped' if r.spec.shipped else 'not shipped'})", file=out)
        for e in r.errors:
            print(f"  error: {e}", file=out)
        for axis, why in r.extra_failures.items():
            print(f"  [{axis}] {why}", file=out)
        seen = set()
        for fname, v in r.violations:
            key = (v.text, v.why)
            if key in seen:
                continue
            seen.add(key)
            if len(seen) > 8:
                print("  ...", file=out)
                break
            print(f"  [{','.join(sorted(v.axes))}] {v.why}\n      line {v.line}: {v.text[:140]}\n      in {fname[:110]}",
                  file=out)
    for p in plan_rows:
        print(f"\n{'NOT PROVEN' if not p.proven else 'PROVEN'}: {p.name} (every plan the rule selects for m = 1.."
              f"max_m, every shape of shapes.toml)", file=out)
        for line in p.summary:
            print(f"  {line}", file=out)
        for why in p.reasons[:12]:
            print(f"  - {why}", file=out)
        if len(p.reasons) > 12:
            print(f"  ... {len(p.reasons) - 12} more", file=out)
    if opaque:
        print("\nTreated as opaque or assumed (not analysed):", file=out)
        for o in opaque:
            print(f"  - {o}", file=out)
    n_funcs = sum(len(r.functions) for r in results)
    print(f"\nanalyzed {n_funcs} compiled functions of {len(results)} kernels in {elapsed:.1f} s", file=out)


def known_gaps_status(path: str, bad: list[str], analysed: list[str]) -> int:
    """0 if the rows not proven are exactly the listed known gaps among those analysed here; else
    1, naming the new failures and the listed rows that are now proven (remove them)."""
    import tomllib
    gaps = {g["row"]: g["why"] for g in tomllib.load(open(path, "rb")).get("gap", [])}
    new = [b for b in bad if b not in gaps]
    fixed = [g for g in gaps if g in analysed and g not in bad]
    print(f"\nKnown gaps ({os.path.basename(path)}): {len([b for b in bad if b in gaps])} rows not proven, as listed.")
    for b in new:
        print(f"  NEW: {b} is not proven (fix it, or list it with the reason)")
    for g in fixed:
        print(f"  FIXED: {g} is proven now: remove it from {os.path.basename(path)}")
    return 1 if new or fixed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
