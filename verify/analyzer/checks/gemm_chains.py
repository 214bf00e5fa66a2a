# The chain comparison of the mma.sync GEMM's launch plans (sm_80), for plans.py: runs the PTX of
# gemm_bf16_kernel<BM, WM, WN, STAGES> (ptx_exec.py: symbolic execution, a grid of CTAs one after
# another) under every plan (BM, num_groups) the rule selects for a deployment class (num_segments S,
# k-blocks per segment kbs), on a reduced problem, and requires that every element of y that a plan
# stores gets the contract's DAG (gemm_schedule.h):
#   y[r][c] = round_out(S_{S-1} + bias[c]),  S_0 = P_0,  S_s = S_{s-1} + P_s,
#   P_s = the chain of mma.sync m16n8k16 steps over segment s's k columns, 16 at a time in
#         increasing k, from a +0.0 accumulator,
# so that all plans store the same DAG in every element. Reduced problems (and why they cover the
# deployment's k): see reduced_problems().
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ..domains.ptx_dag import MMA_OP, Dag, ExecError, Node, half, value_of_bytes
from ..frontend.ptx import PtxModule
from ..spec import loader as specmod
from ..symbolic.ptx_exec import Cta, run_cta
from ..symbolic.ptx_memory import GlobalMemory, param_bytes
from ..symbolic.ptx_ops import compile_program
from ..symbolic.ptx_program import Program

# gemm_bf16_kernel<BM, WM, WN, STAGES>'s mangled name (the groups: the template arguments).
ENTRY = r"gemm_bf16_kernelILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)EEEv"
BLOCK_N = 128  # kGemmBlockN
BLOCK_K = 64  # kGemmBlockK


@dataclass(frozen=True)
class Instantiation:
    """gemm_bf16_kernel<BM, WM, WN, STAGES> as TileConfig sizes it."""

    bm: int
    wm: int
    wn: int
    stages: int

    @property
    def threads(self) -> int:
        return self.wm * self.wn * 32

    @property
    def smem_bytes(self) -> int:
        return self.stages * (self.bm + BLOCK_N) * BLOCK_K * 2


@dataclass(frozen=True)
class Problem:
    """One run: y[m, n] = x[m, k] w[n, k]^T (+ bias), k = segments * kbs * BLOCK_K, on `groups`
    CTAs per tile (a split launch when groups > 1)."""

    m: int
    n: int
    segments: int
    kbs: int
    groups: int
    bias: bool
    out_f32: bool

    @property
    def k(self) -> int:
        return self.segments * self.kbs * BLOCK_K


@dataclass(frozen=True)
class Source:
    """Where the kernel's PTX is, and the regex naming its entries (groups: BM, WM, WN, STAGES)."""

    ptx: str
    entry: str = ENTRY


def instantiations(source: Source) -> dict[int, tuple[Instantiation, Program]]:
    """BM -> the instantiation and its compiled program. Errors: ExecError (an instruction not
    modelled, two entries with one BM), OSError (no PTX)."""
    module = PtxModule(source.ptx)
    out = {}
    for entry in module.entries:
        m = re.search(source.entry, entry.name)
        if m:
            func = module.function(entry.name)
            inst = Instantiation(*(int(g) for g in m.groups()))
            if func.ntid and func.ntid[0] != inst.threads:
                raise ExecError(f"{func.name}: .maxntid {func.ntid[0]}, TileConfig {inst.threads} threads")
            if inst.bm in out:
                raise ExecError(f"two entries with BM = {inst.bm} match /{source.entry}/")
            out[inst.bm] = (inst, compile_program(func, module))
    return out


def gemm_params_layout(spec_path: str) -> dict[str, tuple[int, int]]:
    """GemmParams field -> (offset, bytes), from kernels.toml (the layout the flow analysis checks)."""
    sp = specmod.load_spec(spec_path)
    return {f.name: (off, 8 if f.type == "ptr" else 4) for off, f in sp.struct_offsets["GemmParams"]}


@dataclass
class PlanRun:
    """What one plan stored: (row, col) -> node, and what it did not store."""

    y: dict[tuple[int, int], Node]
    missing: list[tuple[int, int]]


class Inputs:
    """The leaves of one run: x [m, k] and w [n, k] bf16, bias [n] f32 (each element its own leaf,
    made here once; the Dag's table does not hold them, nothing else makes leaves)."""

    def __init__(self, pb: Problem) -> None:
        self.x = [[Node(("leaf", "x", r, c), 2) for c in range(pb.k)] for r in range(pb.m)]
        self.w = [[Node(("leaf", "w", r, c), 2) for c in range(pb.k)] for r in range(pb.n)]
        self.bias = [Node(("leaf", "bias", 0, c), 4) for c in range(pb.n)]

    @staticmethod
    def memory(rows: list[list[Node]]) -> list:
        """The byte entries of a row-major tensor."""
        return [(leaf, i) for row in rows for leaf in row for i in range(leaf.width)]


def run_plan(inst: Instantiation, prog: Program, pb: Problem, dag: Dag, inputs: Inputs, layout: dict,
             reverse_groups: bool = False) -> PlanRun:
    """Runs the grid of one plan on the symbolic inputs, CTAs one after another, the k-groups of every
    tile in increasing order (decreasing with reverse_groups), the tile counters concrete.
    Errors: ExecError."""
    m, n, k = pb.m, pb.n, pb.k
    gm = GlobalMemory()
    x = gm.add("x", m * k * 2, writable=False, data=Inputs.memory(inputs.x))
    w = gm.add("w", n * k * 2, writable=False, data=Inputs.memory(inputs.w))
    bias = gm.add("bias", n * 4, writable=False, data=Inputs.memory([inputs.bias])) if pb.bias else None
    out_bytes = 4 if pb.out_f32 else 2
    y = gm.add("y", m * n * out_bytes)
    tiles = (-(-m // inst.bm), -(-n // BLOCK_N))
    split = pb.groups > 1
    partials = gm.add("partials", pb.segments * m * n * 4) if split else None
    counters = gm.add("counters", tiles[0] * tiles[1] * 4, zero=True) if split else None
    fields = {"x": x.base, "w": w.base, "bias": bias.base if bias else 0, "y": y.base,
              "partials": partials.base if partials else 0, "counters": counters.base if counters else 0,
              "m": m, "n": n, "k": k, "num_k_blocks": pb.segments * pb.kbs, "num_segments": pb.segments,
              "num_groups": pb.groups, "out_f32": int(pb.out_f32), "split": int(split)}
    if set(fields) != set(layout):
        raise ExecError(f"GemmParams fields {sorted(layout)} in kernels.toml, the runner sets {sorted(fields)}")
    size = max(off + b for off, b in layout.values())
    params = param_bytes((size + 7) // 8 * 8, {layout[f][0]: (v, layout[f][1]) for f, v in fields.items()})
    grid = (tiles[0], tiles[1], pb.groups)
    zs = range(pb.groups - 1, -1, -1) if reverse_groups else range(pb.groups)
    for z in zs:
        for cy in range(grid[1]):
            for cx in range(grid[0]):
                cta = Cta(prog, inst.threads, (cx, cy, z), grid, params, gm, dag, inst.smem_bytes)
                run_cta(cta)
    if counters and any(counters.data):
        raise ExecError("the tile counters are not back to zero after the launch")
    out: dict[tuple[int, int], Node] = {}
    missing = []
    for r in range(m):
        for c in range(n):
            off = (r * n + c) * out_bytes
            e = y.data[off:off + out_bytes]
            if None in e:
                missing.append((r, c))
                continue
            try:
                out[(r, c)] = value_of_bytes(e, "f32", dag) if pb.out_f32 else half(e[0], e[1], dag)
            except TypeError:
                raise ExecError(f"y[{r}][{c}] holds bytes of different values") from None
    return PlanRun(out, missing)


class Contract:
    """The contract's DAG of each element, in the run's Dag and on its inputs' leaves."""

    def __init__(self, dag: Dag, pb: Problem, inputs: Inputs) -> None:
        self.dag, self.pb, self.inputs = dag, pb, inputs
        self.zero = dag.const(0, 4)
        self.steps = pb.kbs * BLOCK_K // 16  # k16 steps a segment
        self._vecs: dict[tuple[str, int], list[Node]] = {}

    def vecs(self, tensor: str, r: int) -> list[Node]:
        """Row r of x (or w) as the k16 operand of every step, k increasing."""
        got = self._vecs.get((tensor, r))
        if got is None:
            row = (self.inputs.x if tensor == "x" else self.inputs.w)[r]
            got = self._vecs[(tensor, r)] = [self.dag.vec(tuple(row[16 * q:16 * q + 16]))
                                             for q in range(len(row) // 16)]
        return got

    def segment(self, r: int, c: int, s: int) -> Node:
        """P_s of element (r, c): its k16 steps over segment s in increasing k, from +0.0."""
        xv, wv = self.vecs("x", r), self.vecs("w", c)
        acc = self.zero
        for q in range(s * self.steps, (s + 1) * self.steps):
            acc = self.dag.mma(acc, xv[q], wv[q])
        return acc

    def element(self, r: int, c: int) -> Node:
        """round_out(((P_0 + P_1) + ... + P_{S-1}) + bias[c])."""
        total = self.segment(r, c, 0)
        for s in range(1, self.pb.segments):
            total = self.dag.f32_op("add", total, self.segment(r, c, s))
        if self.pb.bias:
            total = self.dag.f32_op("add", total, self.inputs.bias[c])
        return total if self.pb.out_f32 else self.dag.bf16_round(total)

    def holds(self, node: Node, r: int, c: int) -> bool:
        """Whether node is element(r, c), by walking it (the same test as node is element(r, c),
        without building the contract's nodes)."""
        n = node
        if not self.pb.out_f32:
            if n.key[0] != "cvt.rn.bf16.f32":
                return False
            n = n.key[1]
        if self.pb.bias:
            if n.key[0] != "add.f32" or n.key[2] is not self.inputs.bias[c]:
                return False
            n = n.key[1]
        xv, wv = self.vecs("x", r), self.vecs("w", c)
        for s in range(self.pb.segments - 1, -1, -1):
            if s:
                if n.key[0] != "add.f32":
                    return False
                p, n = n.key[2], n.key[1]
            else:
                p = n
            for q in range((s + 1) * self.steps - 1, s * self.steps - 1, -1):
                k = p.key
                if k[0] != MMA_OP or k[2] is not xv[q] or k[3] is not wv[q]:
                    return False
                p = k[1]
            if p is not self.zero:
                return False
        return True


# ---------------------------------------------------------------------------------------------
# Describing a difference


def describe(n, depth: int = 0) -> str:
    """A short form of a DAG: chains of mma steps as their k ranges, sums and roundings spelled out."""
    if not isinstance(n, Node):
        return repr(n)
    op = n.key[0]
    if op == "leaf":
        return f"{n.key[1]}[{n.key[2]}][{n.key[3]}]" if n.key[1] != "bias" else f"bias[{n.key[3]}]"
    if op == "const":
        return "+0.0" if n.key[2] == 0 else f"const {n.key[2]:#x}"
    if op == "vec":
        items = n.key[1:]
        if all(isinstance(i, Node) and i.key[0] == "leaf" for i in items):
            t, r = items[0].key[1], items[0].key[2]
            cols = [i.key[3] for i in items]
            if all(i.key[1] == t and i.key[2] == r for i in items) and cols == list(range(cols[0], cols[0] + 16)):
                return f"{t}[{r}][{cols[0]}:{cols[0] + 16}]"
        if all(isinstance(i, Node) and i.key[0] == "const" and i.key[2] == 0 for i in items):
            return "zeros"
        return "(" + ", ".join(describe(i, depth + 1) for i in items[:4]) + ", ...)"
    if op == MMA_OP:
        steps = []
        while isinstance(n, Node) and n.key[0] == MMA_OP:
            steps.append((describe(n.key[2]), describe(n.key[3])))
            n = n.key[1]
        steps.reverse()
        ks = [a.rsplit("[", 1)[-1].rstrip("]") for a, _ in steps]
        return (f"chain({steps[0][0].rsplit('[', 1)[0]} x {steps[0][1].rsplit('[', 1)[0]}, k16 steps at "
                f"{_ranges(ks)}, from {describe(n)})")
    if op in ("add.f32", "sub.f32", "mul.f32"):
        sym = {"add.f32": "+", "sub.f32": "-", "mul.f32": "*"}[op]
        return f"({describe(n.key[1], depth + 1)} {sym} {describe(n.key[2], depth + 1)})"
    if op == "cvt.rn.bf16.f32":
        return f"bf16({describe(n.key[1], depth + 1)})"
    return f"{op}(...)"


def _ranges(ks: list[str]) -> str:
    """k16 step columns "0:16", "16:32" ... as runs: "k 0..64" where consecutive."""
    try:
        starts = [int(k.split(":")[0]) for k in ks]
    except ValueError:
        return ", ".join(ks[:6]) + (" ..." if len(ks) > 6 else "")
    runs, first, last = [], starts[0], starts[0]
    for s in starts[1:]:
        if s == last + 16:
            last = s
            continue
        runs.append((first, last))
        first = last = s
    runs.append((first, last))
    return ", ".join(f"k {a}..{b + 16}" for a, b in runs)


def first_difference(a: Node, b: Node) -> tuple[Node, Node]:
    """Where a and b part, leftmost first: the first differing operand of equal operations, down to
    a pair whose operations differ, or two chains of mma steps, leaves or constants."""
    while a is not b:
        if not (isinstance(a, Node) and isinstance(b, Node)) or a.key[0] != b.key[0] or \
                len(a.key) != len(b.key) or a.key[0] in (MMA_OP, "leaf", "const", "vec"):
            return a, b
        i = next(i for i in range(1, len(a.key)) if a.key[i] is not b.key[i] and a.key[i] != b.key[i])
        a, b = a.key[i], b.key[i]
    return a, b


# ---------------------------------------------------------------------------------------------
# The runs


@dataclass(frozen=True)
class Run:
    """One plan on one reduced problem; `part` says which part of the coverage it is."""

    part: str  # "deployment" | "pipeline" | "exact" | "tiles" (see reduced_problems)
    bm: int
    problem: Problem
    reverse_groups: bool = False

    def plan_name(self) -> str:
        g = self.problem.groups
        return f"(BM {self.bm}, {g} k-group{'s' if g > 1 else ''})"

    def name(self) -> str:
        pb = self.problem
        epi = f"{'bias, ' if pb.bias else ''}{'f32' if pb.out_f32 else 'bf16'} out"
        rev = ", k-groups last to first" if self.reverse_groups else ""
        return (f"{self.plan_name()} on m={pb.m}, n={pb.n}, S={pb.segments} x {pb.kbs} k-blocks ({epi}{rev})")


EPILOGUES = ((True, True), (False, False), (True, False), (False, True))  # (bias, f32 out)
PIPELINE_SEGMENT_SPLITS = ((2, 1), (4, 2))  # (S, groups): two segments in one CTA; two in each of two CTAs


def reduced_problems(classes: dict[tuple[int, int], set[tuple[int, int]]], stages: int) -> list[Run]:
    """The runs covering classes ((S, kbs) -> selected plans (BM, groups)):
    deployment: every selected plan with its class's S and groups (so its segment grouping, partial
      planes and sum order exactly), one k-block a segment, one partial tile (m = BM - 3, n = 120);
    pipeline: every selected instantiation with kbs = 2 .. STAGES + 1 k-blocks a segment (every
      phase of a segment start in the STAGES-slot ring, segments shorter and longer than the copies
      in flight), two segments in one CTA and, where the instantiation runs split, two segments in
      each of two CTAs; one partial tile;
    exact: every class as deployed: each plan selected for it on S segments of kbs k-blocks with its
      k-groups, m = BM - 3, n = 8 (the whole k-loop runs; the first 8 columns are stored and compared);
    tiles: every selected (BM, one k-group or split) on 2 x 2 tiles (m = 2 BM - 3, n = 248: full and
      partial in both directions), one k-block a segment; the split ones also with the k-groups run
      last to first (another CTA is the tile's last).
    The epilogue variants (bias or not, f32 or bf16 out) rotate per (BM, split) so that each meets all four."""
    runs: list[Run] = []
    plans = {p for ps in classes.values() for p in ps}
    for s in sorted({s for s, _ in classes}):
        for bm, g in sorted({p for (s2, _), ps in classes.items() if s2 == s for p in ps}):
            runs.append(Run("deployment", bm, Problem(bm - 3, 120, s, 1, g, False, False)))
    for bm in sorted({b for b, _ in plans}):
        splits = [(s, g) for s, g in PIPELINE_SEGMENT_SPLITS if g == 1 or any(b == bm and g2 > 1 for b, g2 in plans)]
        for kbs in range(2, stages + 2):  # kbs = 1: the deployment runs
            for s, g in splits:
                runs.append(Run("pipeline", bm, Problem(bm - 3, 120, s, kbs, g, False, False)))
    for (s, kbs), ps in sorted(classes.items()):
        for bm, g in sorted(ps):
            runs.append(Run("exact", bm, Problem(bm - 3, 8, s, kbs, g, False, False)))
    for bm, split in sorted({(b, g > 1) for b, g in plans}):
        s, g = (2, 2) if split else (1, 1)
        runs.append(Run("tiles", bm, Problem(2 * bm - 3, 248, s, 1, g, False, False)))
        if split:
            runs.append(Run("tiles", bm, Problem(2 * bm - 3, 248, s, 1, g, False, False), True))
    counts: dict[tuple[int, bool], int] = {}
    out = []
    for r in runs:
        key = (r.bm, r.problem.groups > 1)
        bias, f32 = EPILOGUES[counts.get(key, 0) % len(EPILOGUES)]
        counts[key] = counts.get(key, 0) + 1
        pb = r.problem
        out.append(Run(r.part, r.bm, Problem(pb.m, pb.n, pb.segments, pb.kbs, pb.groups, bias, f32),
                       r.reverse_groups))
    return out


@dataclass
class RunOutcome:
    run: Run
    compared: int = 0  # elements stored and compared
    difference: str = ""  # the first element whose DAG is not the contract's, described
    element: tuple[int, int] | None = None  # that element
    error: str = ""  # the executor refused (ExecError)
    seconds: float = 0.0


_PROGRAMS: dict[Source, tuple] = {}  # -> (instantiations, GemmParams layout), per process


def run_one(source: Source, spec_path: str, run: Run) -> RunOutcome:
    """Executes one run and compares every stored element with the contract's DAG."""
    import gc
    import time
    t0 = time.time()
    out = RunOutcome(run)
    enabled = gc.isenabled()
    gc.disable()  # millions of acyclic nodes: the cycle collector's passes over them cost more than the run
    try:
        if source not in _PROGRAMS:
            _PROGRAMS[source] = (instantiations(source), gemm_params_layout(spec_path))
        progs, layout = _PROGRAMS[source]
        if run.bm not in progs:
            out.error = f"no gemm_bf16_kernel<{run.bm}, ...> in {source.ptx}"
            return out
        inst, prog = progs[run.bm]
        dag = Dag()
        inputs = Inputs(run.problem)
        got = run_plan(inst, prog, run.problem, dag, inputs, layout, run.reverse_groups)
        contract = Contract(dag, run.problem, inputs)
        if got.missing:
            out.element = got.missing[0]
            out.difference = f"y[{got.missing[0][0]}][{got.missing[0][1]}] not stored ({len(got.missing)} elements)"
        for (r, c), node in got.y.items():
            if not contract.holds(node, r, c):
                want = contract.element(r, c)
                a, b = first_difference(node, want)
                out.element = (r, c)
                out.difference = (f"y[{r}][{c}] has {describe(a)[:200]} where the contract has {describe(b)[:200]} "
                                  f"(the element: {describe(node)[:240]})")
                break
            out.compared += 1
    except ExecError as e:
        out.error = str(e)
    except Exception as e:  # an executor fault: the run is not proven, and says why
        out.error = f"{type(e).__name__}: {e}"
    finally:
        if enabled:
            gc.enable()
        out.seconds = time.time() - t0
    return out


@dataclass
class ChainVerdict:
    """What the comparison ran (summary lines) and every reason it is not proven ([] = proven)."""

    summary: list[str]
    reasons: list[str]


def _cost(run: Run) -> int:
    pb = run.problem
    return -(-pb.m // run.bm) * -(-pb.n // BLOCK_N) * run.bm * pb.segments * pb.kbs


def stages_of(source: Source) -> int:
    """STAGES of the instantiations (one value for all). Errors: OSError, ValueError."""
    text = open(source.ptx, encoding="utf-8", errors="replace").read()
    found = {int(m.group(4)) for m in re.finditer(source.entry, text)}
    if len(found) != 1:
        raise ValueError(f"{source.ptx}: STAGES {sorted(found)} in the entries /{source.entry}/, one value expected")
    return found.pop()


def compare(source: Source, spec_path: str, classes: dict[tuple[int, int], set[tuple[int, int]]],
            workers: int = 2) -> ChainVerdict:
    """Runs reduced_problems(classes) (in `workers` processes, the costliest first) and gathers the
    verdict: every stored element of every run must be the contract's DAG."""
    import time
    from concurrent.futures import ProcessPoolExecutor
    t0 = time.time()
    try:
        stages = stages_of(source)
    except (OSError, ValueError) as e:
        return ChainVerdict([], [f"mma.sync chain comparison not run: {e}"])
    runs = sorted(reduced_problems(classes, stages), key=_cost, reverse=True)
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            outcomes = list(pool.map(run_one, [source] * len(runs), [spec_path] * len(runs), runs))
    else:
        outcomes = [run_one(source, spec_path, r) for r in runs]
    reasons = []
    outcomes.sort(key=lambda o: (("deployment", "tiles", "exact", "pipeline").index(o.run.part), _cost(o.run)))
    passed = [o.run for o in outcomes if not o.error and not o.difference]
    for o in outcomes:
        if o.error:
            reasons.append(f"mma.sync chains: {o.run.name()}: not executed: {o.error[:300]}")
        elif o.difference:
            r, c = o.element or (0, 0)
            other = next((p.plan_name() for p in passed if p.part == o.run.part and
                          (p.problem.segments, p.problem.kbs) == (o.run.problem.segments, o.run.problem.kbs) and
                          r < p.problem.m and c < p.problem.n), "")
            pair = f" (plan {other} stores the contract's DAG there)" if other else ""
            reasons.append(f"mma.sync chains: {o.run.name()} stores a DAG other than the contract's{pair}: "
                           f"{o.difference}")
    epilogues: dict[tuple[int, bool], set] = {}
    for r in runs:
        epilogues.setdefault((r.bm, r.problem.groups > 1), set()).add((r.problem.bias, r.problem.out_f32))
    for (bm, split), seen in sorted(epilogues.items()):
        if len(seen) < len(EPILOGUES):
            reasons.append(f"mma.sync chains: (BM {bm}, {'split' if split else 'one k-group'}) ran only "
                           f"{len(seen)} of the {len(EPILOGUES)} epilogues (bias or not, f32 or bf16 out)")
    return ChainVerdict(_summary(source, classes, outcomes, stages, time.time() - t0), reasons)


def _summary(source: Source, classes: dict, outcomes: list[RunOutcome], stages: int, wall: float) -> list[str]:
    """What was compared, in the report's words."""
    segs = sorted({s for s, _ in classes})
    plans = sorted({p for ps in classes.values() for p in ps})
    busy = sum(o.seconds for o in outcomes)
    return [
        f"mma.sync chain comparison (gemm_chains.py: symbolic execution of {os.path.basename(source.ptx)}): "
        f"{len(outcomes)} runs, {sum(o.compared for o in outcomes)} stored elements compared with the contract's "
        f"DAG (S segments of kbs k-blocks, each a chain of m16n8k16 steps in increasing k from +0.0, "
        f"P_0 + P_1 + ... left to right, + bias, the rounding); {busy:.1f} s of runs, {wall:.1f} s wall",
        f"  plans (BM, k-groups) {', '.join(f'({b}, {g})' for b, g in plans)}: each on every class it is selected "
        f"for, as deployed ({', '.join(f'{s} x {kbs}' for s, kbs in sorted(classes))} k-blocks); each with its "
        f"classes' S ({', '.join(map(str, segs))}) and k-groups on a partial tile of 120 columns at 1 k-block a "
        f"segment; each instantiation at kbs = 2..{stages + 1} (STAGES = {stages}) with two segments in a CTA (and "
        f"in each of two); 2 x 2 tiles (full and partial); bias or not, f32 or bf16 out"]
