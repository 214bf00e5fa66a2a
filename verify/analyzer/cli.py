# vosti-analyze: proves, for every shipped kernel, that each output element's floating-point
# computation does not depend on the batch (docs/VERIFICATION.md, "The kernel analyzer").
#   verify/analyzer/vosti-analyze [--build build] [--spec kernels.toml] [--json FILE] [--only NAME]
# Reads the PTX nvcc kept for the shipped build (build/ptx/), LLVM IR of the CPU kernels (clang,
# build/llvm/), the GEMM launch plans (build/verify/analyzer/vosti_gemm_plans); prints the table
# kernel x variation axis -> proven / not proven (why) and what it treats as opaque; exits 1 if a
# shipped kernel is not proven, 2 on a usage or artifact error.
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field

from .checks import flow
from .domains.labels import EMPTY
from .frontend.kir import Function
from .frontend.ptx import parse_ptx, reg_type
from .spec import loader as specmod
from .spec import sources as sourcesmod

_FLOAT_REG_TYPES = {"f16", "f16x2", "bf16", "bf16x2", "f32", "f64"}
TABLE_AXES = ("rows", "row", "chunk", "pages", "plan", "threads", "padding")


@dataclass
class KernelResult:
    spec: specmod.KernelSpec
    functions: list[str] = field(default_factory=list)
    violations: list[tuple[str, flow.Violation]] = field(default_factory=list)
    axes_seen: frozenset[str] = EMPTY
    fp_instructions: int = 0
    errors: list[str] = field(default_factory=list)
    extra_failures: dict[str, str] = field(default_factory=dict)  # axis -> why (plan checks ...)
    notes: list[str] = field(default_factory=list)
    # (artifact file, function, plan name or "") -> the violations found there (empty: proven)
    per_plan: dict[tuple[str, str, str], list[flow.Violation]] = field(default_factory=dict)

    def proven(self) -> bool:
        return not self.violations and not self.errors and not self.extra_failures and bool(self.functions)


def fp_reg_predicate(func: Function):
    if func.kind == "llvm":
        types = func.reg_types
        return lambda r: types.get(r, "") == "fp"
    cache: dict[str, bool] = {}

    def is_fp(r: str) -> bool:
        if r not in cache:
            cache[r] = reg_type(func, r) in _FLOAT_REG_TYPES
        return cache[r]
    return is_fp


CPU_SOURCES = ("src/kernels/cpu/matmul_avx2.cc", "src/kernels/cpu/matmul_rows_avx512.cc",
               "src/kernels/cpu/attention_avx2.cc", "src/kernels/cpu/cpu_backend.cc",
               "src/core/quant_blocks.cc", "src/core/dtype.cc")  # the weight decoders the kernels call (pure_calls)


def source_options(repo: str, srcf: str) -> list[str]:
    """The per-file COMPILE_OPTIONS src/CMakeLists.txt gives srcf (the AVX-512 build of the one-row
    matmul: -mavx512f ...), so that its IR is compiled as the build compiles it."""
    try:
        text = open(os.path.join(repo, "src", "CMakeLists.txt"), encoding="utf-8").read()
    except OSError:
        return []
    rel = srcf.removeprefix("src/")
    m = re.search(r"set_source_files_properties\(\S*" + re.escape(rel) +
                  r"\s+PROPERTIES\s+COMPILE_OPTIONS\s+\"([^\"]*)\"", text)
    return m.group(1).split(";") if m else []


def _up_to_date(out: str, source: str) -> bool:
    """Whether out is newer than source and every file clang's depfile (out.d) lists for it."""
    if not os.path.exists(out) or not os.path.exists(out + ".d"):
        return False
    deps = open(out + ".d", encoding="utf-8", errors="replace").read().replace("\\\n", " ").split(":", 1)[-1].split()
    newest = max([os.path.getmtime(source)] + [os.path.getmtime(d) if os.path.exists(d) else float("inf")
                                               for d in deps])
    return os.path.getmtime(out) >= newest


def emit_llvm(build: str, repo: str) -> list[str]:
    """LLVM IR of the CPU kernels with the build's flags (clang: the IR is not a by-product of the
    g++ build); rewritten only when the source or a header it includes is newer. Errors: a message
    per failure."""
    import shutil
    import subprocess
    clang = shutil.which("clang++-14") or shutil.which("clang++")
    if not clang:
        return ["clang++ not found (scripts/setup --test installs clang)"]
    out_dir = os.path.join(build, "llvm")
    os.makedirs(out_dir, exist_ok=True)
    errors = []
    for srcf in CPU_SOURCES:
        full = os.path.join(repo, srcf)
        out = os.path.join(out_dir, os.path.basename(srcf).replace(".cc", ".ll"))
        if _up_to_date(out, full):
            continue
        cmd = [clang, "-O3", "-DNDEBUG", "-march=x86-64-v3", *source_options(repo, srcf), "-ffp-contract=off",
               "-std=c++20", f"-I{repo}/src", f"-I{repo}", "-MD", "-MF", out + ".d", "-S", "-emit-llvm", "-o", out,
               full]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            errors.append(f"clang failed on {srcf}: {r.stderr[:400]}")
    return errors


def artifact_files(build: str, pattern: str) -> list[str]:
    kind, _, glob_pat = pattern.partition(":")
    root = os.path.join(build, "ptx" if kind == "ptx" else "llvm")
    return sorted(glob.glob(os.path.join(root, glob_pat)))


class ArtifactCache:
    def __init__(self) -> None:
        self.funcs: dict[str, list[Function]] = {}

    def functions(self, path: str) -> list[Function]:
        if path not in self.funcs:
            if path.endswith(".ptx"):
                self.funcs[path] = parse_ptx(path)[0]
            else:
                from .frontend.llvm import parse_llvm
                self.funcs[path] = parse_llvm(path)
        return self.funcs[path]


def analyze_kernel(sp: specmod.Spec, ks: specmod.KernelSpec, build: str, cache: ArtifactCache,
                   claimed: set[tuple[str, str]], cpu_ks: list[int] | None = None) -> KernelResult:
    res = KernelResult(ks)
    files = []
    for pat in ks.artifacts:
        files += artifact_files(build, pat)
    if not files:
        res.errors.append(f"no artifact matches {ks.artifacts} under {build} (build with -DVOSTI_TESTS=ON; "
                          "CUDA artifacts need nvcc)")
        return res
    rx = re.compile(ks.entry)
    for path in files:
        for func in cache.functions(path):
            if not rx.search(func.name):
                continue
            claimed.add((path, func.name))
            res.functions.append(f"{os.path.basename(path)}:{func.name}")
            calls: list[str] = []
            for plan in ks.plans or [None]:
                try:
                    src = sourcesmod.sources_for(sp, ks, func.params, func.kind, plan)
                    if func.kind == "ptx":
                        sourcesmod.check_param_types(sp, ks, func)
                except ValueError as e:
                    res.errors.append(str(e))
                    break
                out = flow.analyze(func, src, fp_reg_predicate(func), None)
                res.fp_instructions += out.fp_instructions
                res.axes_seen = res.axes_seen | out.axes_seen
                where = f"{func.name} [plan: {plan.name}]" if plan else func.name
                for v in out.violations:
                    res.violations.append((where, v))
                res.per_plan[(os.path.basename(path), func.name, plan.name if plan else "")] = list(out.violations)
                calls = out.calls
            for c in calls:
                if c.startswith("llvm.") or c.startswith("vprintf") or re.search(ks.allowed_calls or "^$", c):
                    continue
                if ks.dispatch and c.startswith("indirect:"):
                    continue  # resolve_dispatch()
                if ks.compared_calls and re.search(ks.compared_calls, c):
                    continue  # apply_row_comparison()
                if ks.indirect_calls and c.startswith("indirect:"):
                    continue  # declared in the spec, printed among the assumptions
                if ks.pure_calls and re.search(ks.pure_calls, c):
                    why = check_pure([g for f in artifact_files(build, "llvm:*.ll") for g in cache.functions(f)]
                                     if path.endswith(".ll") else cache.functions(path), c, ks.pure_calls)
                    if why:
                        res.extra_failures.setdefault("calls", why)
                    continue
                res.extra_failures.setdefault(
                    "calls", f"{func.name[:60]} calls {c[:80]}, which the analysis does not follow")
    if not res.functions:
        res.errors.append(f"no compiled function matches entry /{ks.entry}/ in {len(files)} artifact file(s)")
    if ks.dispatch and res.functions:
        resolve_dispatch(res, files[0], cpu_ks)
    return res


def start_row_comparison(sp: specmod.Spec, build: str, ks: list[int]):
    """The one-row matmul comparisons (rowkernels.py: the longest part of the CPU analysis), started
    in a second process so that they run beside the rest; None if no entry asks for them."""
    entries = [k for k in sp.kernels if k.compared_calls]
    if not entries:
        return None
    from concurrent.futures import ProcessPoolExecutor
    from .checks import rowkernels
    irs = [[f for pat in e.artifacts for f in artifact_files(build, pat)] for e in entries]
    quant = os.path.join(build, "llvm", "quant_blocks.ll")
    if not all(irs) or not os.path.exists(quant):
        return None
    # The first entry's IR is the reference build (with the tiled path); the others are other
    # builds of the one-row path, entered through their dispatch function.
    others = tuple((ir[0], e.entry) for ir, e in zip(irs[1:], entries[1:]))
    # Two processes taking one codec at a time, the longest first: with the analysis in this one,
    # the 2-core CI machine's cores are busy until this one ends, then both on the comparison.
    pool = ProcessPoolExecutor(max_workers=2)
    futures = [pool.submit(rowkernels.compare, irs[0][0], quant, ks, entries[0].pure_calls, others, codec)
               for codec in rowkernels.codecs_by_cost(irs[0][0])]
    pool.shutdown(wait=False)
    return futures


def apply_row_comparison(results: list[KernelResult], future) -> tuple[list[str], list[str]] | None:
    """Clears or confirms the findings of the entries with compared_calls: the column groups'
    comparison decides their threads axis. Returns (what was compared, the one-row against tiled
    differences) for the plan row, None if not run."""
    if future is None:
        for res in results:
            if res.spec.compared_calls and res.functions:
                res.extra_failures["threads"] = "the calls it picks among were not compared (rowkernels.py: no IR)"
        return None
    from .checks import rowkernels
    try:
        done, paths, groups = [], [], {}
        for out in [f.result() for f in future]:
            done += out["done"]
            paths += out["paths"]
            for f, g in out["groups"].items():
                groups.setdefault(os.path.basename(f), []).extend(g)
    except Exception as e:  # the comparison is then not proven; say why
        done, paths, groups = [], [f"not compared ({type(e).__name__}: {e})"], {}
    for res in results:
        if not res.spec.compared_calls or not res.functions:
            continue
        mine = groups.get(res.functions[0].split(":")[0], ["not compared"])
        if mine:
            res.extra_failures["threads"] = "; ".join(mine[:3])
        else:
            res.notes.append(f"the columns of a group of four (dot_row<Codec, 4>, prefetching or not) and a lone "
                             f"column (dot_row<Codec, 1>) get the same operation DAG, and row_columns gives each "
                             f"column of a thread's range that DAG on {len(rowkernels.WINDOWS)} column ranges "
                             f"(symbolic execution of the IR, weight decoders included; each codec at every k above "
                             f"that is a whole number of its blocks: {', '.join(done)})")
    return done, paths


def cpu_k_values(shapes_path: str) -> list[int]:
    """The k of every CPU matmul of the families in shapes.toml (hidden, attention width,
    intermediate), and 1..K_SMALL."""
    import tomllib
    from .checks import microkernels
    ks = set(range(1, microkernels.K_SMALL + 1))
    for fam in tomllib.load(open(shapes_path, "rb")).get("family", []):
        ks |= {fam["hidden"], fam["heads"] * fam["head_dim"], fam["intermediate"]}
    return sorted(ks)


def resolve_dispatch(res: KernelResult, path: str, ks: list[int]) -> None:
    """An indirect call into a constant table of micro-kernels: harmless if every candidate computes
    every element of its block alike (dag.py). Clears the dispatch findings then, else says why."""
    from .checks import microkernels
    names, problems = microkernels.compare(path, ks)
    if problems:
        res.extra_failures["dispatch"] = "; ".join(problems[:3])
        return
    res.violations = [(f, v) for f, v in res.violations if "dispatch" not in v.why]
    for key in res.per_plan:
        res.per_plan[key] = [v for v in res.per_plan[key] if "dispatch" not in v.why]
    big = [k for k in ks if k > microkernels.K_SMALL]
    res.notes.append(f"the {len(names)} micro-kernels of {ks_name(path)}'s dispatch table compute every element by "
                     f"the same operation DAG as dot_block<1,1> (symbolic execution of the IR, with and without "
                     f"bias, k = 1..{microkernels.K_SMALL} and {', '.join(map(str, big))})")


def ks_name(path: str) -> str:
    return os.path.basename(path)


def check_pure(funcs: list[Function], callee: str, pure: str) -> str:
    """"" if callee's definition only reads memory: it stores only into its own stack objects and
    calls only intrinsics and other pure callees (on paths that return normally); else why not."""
    from .frontend.cfg import normal_paths
    f = next((g for g in funcs if g.name == callee), None)
    if f is None:
        return f"{callee[:60]} is declared pure but its definition is not in the artifact"
    labels, _ = normal_paths(f)
    allocas = {i.dsts[0] for b in f.blocks for i in b.insts if i.op == "alloca" and i.dsts}
    for b in f.blocks:
        if b.label not in labels:
            continue
        for i in b.insts:
            if i.kind in ("store", "atomic", "copy") and not set(i.addr) <= allocas:
                return f"{callee[:60]} (declared pure) writes memory: line {i.line}"
            if i.kind == "call" and not (i.callee.startswith("llvm.") or re.search(pure, i.callee)):
                return f"{callee[:60]} (declared pure) calls {i.callee[:60]}"
    return ""


def verdict(res: KernelResult, axis: str) -> str:
    if res.errors:
        return "ERROR"
    bad = [v for _, v in res.violations if axis in v.axes or (axis == "threads" and "schedule" in v.axes)]
    if bad or axis in res.extra_failures:
        return "NOT PROVEN"
    if axis in res.axes_seen or (axis == "threads" and "schedule" in res.axes_seen):
        return "proven"
    return "proven (no input)"


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


def main(argv: list[str]) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(prog="vosti-analyze", description=__doc__)
    ap.add_argument("--build", default=os.path.join(here, "..", "..", "build"))
    ap.add_argument("--spec", default=specmod.DEFAULT_SPEC)
    ap.add_argument("--only", default="", help="regex on kernel names")
    ap.add_argument("--shapes", default=specmod.DEFAULT_SHAPES, help="the deployment's GEMM shapes and GPUs")
    ap.add_argument("--json", default="")
    ap.add_argument("--no-llvm", action="store_true", help="do not (re)emit the CPU kernels' LLVM IR")
    ap.add_argument("--known-gaps", default="", help="TOML of rows known not proven: they do not fail the run "
                    "(a listed row that is proven does)")
    args = ap.parse_args(argv)
    t0 = time.time()
    try:
        sp = specmod.load_spec(args.spec)
    except (OSError, ValueError) as e:
        print(f"vosti-analyze: {args.spec}: {e}", file=sys.stderr)
        return 2
    if not args.no_llvm:
        for e in emit_llvm(args.build, os.path.join(here, "..", "..")):
            print(f"vosti-analyze: {e}", file=sys.stderr)
            return 2
    cache = ArtifactCache()
    claimed: set[tuple[str, str]] = set()
    results = []
    rows_future = None
    if any(k.compared_calls for k in sp.kernels if not args.only or re.search(args.only, k.name)) or \
            (args.only and re.search(args.only, "cpu matmul: one-row and tiled paths")):
        rows_future = start_row_comparison(sp, args.build, cpu_k_values(args.shapes))
    have_cuda = bool(glob.glob(os.path.join(args.build, "ptx", "vosti_kernels_cuda", "*.ptx")))
    skipped = []
    for ks in sp.kernels:
        if args.only and not re.search(args.only, ks.name):
            continue
        if not have_cuda and all(a.startswith("ptx:") for a in ks.artifacts):
            skipped.append(ks.name)
            continue
        results.append(analyze_kernel(sp, ks, args.build, cache, claimed, cpu_k_values(args.shapes)))
    opaque = sorted({r.spec.opaque for r in results if r.spec.opaque} |
                    {f"{r.spec.name}: indirect calls to {r.spec.indirect_calls}" for r in results if r.spec.indirect_calls})
    # Every compiled kernel in the analysed artifacts must have an entry.
    if not args.only:
        for d in ("vosti_kernels_cuda", "vosti_gemm_sm90_tma"):
            for path in glob.glob(os.path.join(args.build, "ptx", d, "*.ptx")):
                cache.functions(path)
        for path, funcs in cache.funcs.items():
            for f in funcs:
                if (path, f.name) not in claimed and f.kind == "ptx":
                    print(f"vosti-analyze: {os.path.basename(path)}: kernel {f.name} has no spec entry "
                          f"(add one to {os.path.basename(args.spec)})", file=sys.stderr)
                    return 2
    plan_rows = []
    if not args.only or re.search(args.only, "gemm plans"):
        from .checks import plans, signature
        tma_paths = sorted(glob.glob(os.path.join(args.build, "ptx", "vosti_gemm_sm90_tma", "*.ptx")))
        sigs = signature.tile_signatures(tma_paths, cache)
        if have_cuda:
            plan_rows = plans.check_plans(args.build, results, args.shapes, sigs)
        plan_rows += plans.check_attention_plans(args.build)
    row_outcome = apply_row_comparison(results, rows_future)
    if not args.only or re.search(args.only, "gemm plans") or \
            re.search(args.only, "cpu matmul: one-row and tiled paths"):
        from .checks import plans
        plan_rows += plans.cpu_matmul_paths(row_outcome)
    print_report(results, opaque, time.time() - t0, plan_rows=plan_rows)
    if skipped:
        print(f"\nNot analysed here: this build has no CUDA (no PTX under {args.build}/ptx): "
              f"{len(skipped)} CUDA entries and the GEMM plans. Build with nvcc to analyse them.")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([{"kernel": r.spec.name, "proven": r.proven(),
                        "axes": {a: verdict(r, a) for a in TABLE_AXES},
                        "violations": [{"function": f, "line": v.line, "text": v.text, "axes": sorted(v.axes),
                                        "why": v.why} for f, v in r.violations],
                        "errors": r.errors} for r in results], fh, indent=1)
    bad = [r.spec.name for r in results if r.spec.shipped and not r.proven()] + \
        [p.name for p in plan_rows if not p.proven]
    if args.known_gaps:
        return known_gaps_status(args.known_gaps, bad, [r.spec.name for r in results] + [p.name for p in plan_rows])
    return 1 if bad else 0


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
