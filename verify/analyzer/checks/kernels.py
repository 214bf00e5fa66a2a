# One kernel entry's verdict (vosti-analyze's rows, mutants.py's kill table): the information flow
# of every compiled function the entry matches, under each of its launch plans (flow.py, with the
# sources the spec gives), and what its calls need: a declared pure callee is checked to only read
# memory; a dispatch through a constant table of micro-kernels is harmless if every candidate
# computes each element alike (microkernels.py); the calls a one-row matmul picks among by a
# batch-variant branch are compared by rowkernels.py (run in two processes beside the rest:
# start_row_comparison, apply_row_comparison).
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ..domains.labels import EMPTY
from ..frontend.artifacts import ArtifactCache, artifact_files
from ..frontend.cfg import normal_paths
from ..frontend.kir import Function
from ..frontend.ptx import reg_type
from ..spec import loader as specmod
from ..spec import sources as sourcesmod
from . import flow, microkernels, rowkernels

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


def verdict(res: KernelResult, axis: str) -> str:
    """The report's cell: ERROR, NOT PROVEN, proven, or proven (no input): the axis is no input."""
    if res.errors:
        return "ERROR"
    bad = [v for _, v in res.violations if axis in v.axes or (axis == "threads" and "schedule" in v.axes)]
    if bad or axis in res.extra_failures:
        return "NOT PROVEN"
    if axis in res.axes_seen or (axis == "threads" and "schedule" in res.axes_seen):
        return "proven"
    return "proven (no input)"


def fp_reg_predicate(func: Function):
    """register -> whether it holds a floating-point value."""
    if func.kind == "llvm":
        types = func.reg_types
        return lambda r: types.get(r, "") == "fp"
    cache: dict[str, bool] = {}

    def is_fp(r: str) -> bool:
        if r not in cache:
            cache[r] = reg_type(func, r) in _FLOAT_REG_TYPES
        return cache[r]
    return is_fp


def analyze_kernel(sp: specmod.Spec, ks: specmod.KernelSpec, build: str, cache: ArtifactCache,
                   claimed: set[tuple[str, str]], cpu_ks: list[int] | None = None) -> KernelResult:
    """The entry's verdict; claimed gets (file, function) of every function it matched."""
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
            calls = _flow_per_plan(res, sp, ks, func, os.path.basename(path))
            _check_calls(res, ks, func, calls, path, build, cache)
    if not res.functions:
        res.errors.append(f"no compiled function matches entry /{ks.entry}/ in {len(files)} artifact file(s)")
    if ks.dispatch and res.functions:
        resolve_dispatch(res, files[0], cpu_ks, ks.dispatch)
    return res


def _flow_per_plan(res: KernelResult, sp: specmod.Spec, ks: specmod.KernelSpec, func: Function,
                   fname: str) -> list[str]:
    """The flow analysis of func under each plan of the entry, into res; the calls it makes."""
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
        res.per_plan[(fname, func.name, plan.name if plan else "")] = list(out.violations)
        calls = out.calls
    return calls


def _check_calls(res: KernelResult, ks: specmod.KernelSpec, func: Function, calls: list[str], path: str,
                 build: str, cache: ArtifactCache) -> None:
    """Every call the flow analysis does not follow must be accounted for by the entry."""
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
        res.extra_failures.setdefault("calls", f"{func.name[:60]} calls {c[:80]}, which the analysis does not follow")


def check_pure(funcs: list[Function], callee: str, pure: str) -> str:
    """"" if callee's definition only reads memory: it stores only into its own stack objects and
    calls only intrinsics and other pure callees (on paths that return normally); else why not."""
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


def resolve_dispatch(res: KernelResult, path: str, ks: list[int], table: str) -> None:
    """An indirect call into a constant table of micro-kernels: harmless if every candidate computes
    every element of its block alike (dag.py). Clears the dispatch findings then, else says why."""
    names, problems = microkernels.compare(path, ks, table)
    if problems:
        res.extra_failures["dispatch"] = "; ".join(problems[:3])
        return
    res.violations = [(f, v) for f, v in res.violations if "dispatch" not in v.why]
    for key in res.per_plan:
        res.per_plan[key] = [v for v in res.per_plan[key] if "dispatch" not in v.why]
    big = [k for k in ks if k > microkernels.K_SMALL]
    res.notes.append(f"the {len(names)} micro-kernels of {os.path.basename(path)}'s dispatch table compute every "
                     f"element by the same operation DAG as dot_block<1,1> (symbolic execution of the IR, with and "
                     f"without bias, k = 1..{microkernels.K_SMALL} and {', '.join(map(str, big))})")


def cpu_k_values(shapes_path: str) -> list[int]:
    """The k of every CPU matmul of the families in shapes.toml (hidden, attention width,
    intermediate), and 1..K_SMALL."""
    import tomllib
    ks = set(range(1, microkernels.K_SMALL + 1))
    for fam in tomllib.load(open(shapes_path, "rb")).get("family", []):
        ks |= {fam["hidden"], fam["heads"] * fam["head_dim"], fam["intermediate"]}
    return sorted(ks)


def start_row_comparison(sp: specmod.Spec, build: str, ks: list[int], decoders: str):
    """The one-row matmul comparisons (rowkernels.py: the longest part of the CPU analysis), started
    in two processes so that they run beside the rest; None if no entry asks for them. decoders: the
    decoders' IR under build/llvm."""
    entries = [k for k in sp.kernels if k.compared_calls]
    if not entries:
        return None
    from concurrent.futures import ProcessPoolExecutor
    irs = [[f for pat in e.artifacts for f in artifact_files(build, pat)] for e in entries]
    quant = os.path.join(build, "llvm", decoders)
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
