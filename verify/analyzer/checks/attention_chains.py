# The split-path comparison of the tensor-core attention, for plans.py: runs the PTX of its kernels
# (src/kernels/cuda/attention/*.cu, compute_80; the wgmma kernel's from compute_90a) (ptx_exec.py: symbolic execution, CTA by CTA) along
# each path a query row's KV splits may take, on the same symbolic inputs, and requires that every
# output value gets the same DAG on every path:
#   folded:    attention_mma_kernel<hd, OutT, kFold = true, 1> folds the row's splits in one CTA;
#   decode:    attention_decode_kernel<hd, OutT>, one CTA item per split (partial >= 0), then
#              attention_merge_kernel<OutT> folds the saved states in split order;
#   streaming: attention_mma_kernel<hd, OutT, kFold = false, 1>, the one-split form with partial >= 0
#              (launch_per_split's choice where the decode kernel does not fit), then the merge kernel;
#   folded2:   attention_mma_kernel<hd, OutT, true, 2>, 128-row CTAs (two m16 blocks a warp);
#   wgmma:     attention_wgmma_kernel<hd, OutT, true> from the sm_90a PTX (128-row CTAs, its chains on
#              wgmma: each k16 step the node of mma.sync's step on the same operands);
#   decode_fold: attention_decode_kernel given the whole row (partial -1), folding its splits itself
#              (the planner's choice where a step's decode rows fill its CTAs: decode_fold_ctas).
# Floating-point values are nodes of one hash-consed Dag, so equal DAGs are the same node: an output
# value is compared by identity. What makes two paths' DAGs equal where their operations differ only
# in an order that cannot change a bit is normalised in the Dag (domains/ptx_dag.py), each an assumption
# printed with the verdict (ASSUMPTIONS). The cases (and why they cover the deployment): see cases().
from __future__ import annotations

import glob
import os
import re
import struct
from dataclasses import dataclass, field

from ..domains.ptx_dag import Dag, ExecError, Node, half, value_of_bytes
from ..frontend.ptx import PtxModule
from ..spec import loader as specmod
from ..symbolic.ptx_exec import Cta, run_cta
from ..symbolic.ptx_memory import Buffer, GlobalMemory, param_bytes
from ..symbolic.ptx_ops import compile_program
from ..symbolic.ptx_program import Program

_OUT = {"f": "f", "bf16": "13__nv_bfloat16"}
ENTRIES = {  # path -> the entry regex, formatted with hd and the output type's mangled name
    "folded": r"attention_mma_kernelILi{hd}E{out}Lb1ELi1EEEv",
    "folded2": r"attention_mma_kernelILi{hd}E{out}Lb1ELi2EEEv",
    "streaming": r"attention_mma_kernelILi{hd}E{out}Lb0ELi1EEEv",
    "decode": r"attention_decode_kernelILi{hd}E{out}EEv",
    "decode_fold": r"attention_decode_kernelILi{hd}E{out}EEv",
    "wgmma": r"attention_wgmma_kernelILi{hd}E{out}Lb1EEEv",  # from the sm_90a PTX (compute_90a)
    "merge": r"attention_merge_kernelI{out}EEv",
}
THREADS = 128  # kThreads, kMergeThreads (the wgmma kernel: 256)
SMEM = 232 * 1024  # dynamic shared memory given to a CTA: more than any instantiation's kBytes (kSmem)
TILE = 64  # kAttnKvTile

ASSUMPTIONS = [
    "max.f32 (fmaxf) is the maximum of a set (any order and grouping of the same operands, NaN operands "
    "ignored); the sign of a zero maximum M is left open by it, and every use of M (ex2 of (M' - M) c, of "
    "fma(s, c, -(M c))) gives the same bits for +0 and -0",
    "divide_row: where no value of the row it divides is a subnormal quotient of a nonzero x, the f64 "
    "product x * rcp(l) rounded to f32 is div.rn.f32(x, l) (its comment's theorem); so the select of the "
    "subnormal branch is div.rn.f32(x, l) for each value, whichever values share the branch",
    "add.f32, mul.f32 and the product of fma.rn.f32 are commutative (IEEE): their operands are taken in one "
    "order",
    "a wgmma k16 step gives each element the bits mma.sync m16n8k16 gives it from the same operands "
    "(wgmma_ptx.cuh; WgmmaBits measures it on the H200)",
    "NaN payloads are outside the claim",
]


@dataclass(frozen=True)
class Case:
    """One comparison: a sequence whose query rows sit at positions first .. first + count - 1 (the
    last at `last`), the KV split size split_tiles x 64, group heads a KV head, num_kv_heads KV heads,
    head_dim hd, output type out; per-split CTAs ctas (items streamed over them); the paths run."""

    hd: int
    group: int
    num_kv_heads: int
    last: int
    count: int
    split_tiles: int
    out: str = "f"
    block_size: int = 16
    ctas: int = 1
    paths: tuple[str, ...] = ("folded", "folded2", "wgmma", "decode", "decode_fold", "streaming")

    @property
    def num_heads(self) -> int:
        return self.group * self.num_kv_heads

    @property
    def positions(self) -> list[int]:
        return list(range(self.last - self.count + 1, self.last + 1))

    @property
    def num_splits(self) -> int:
        return self.last // (self.split_tiles * TILE) + 1

    def name(self) -> str:
        return (f"head_dim {self.hd}, group {self.group}, {self.num_kv_heads} KV head(s), positions "
                f"{self.positions[0]}..{self.last} ({self.num_splits} splits of {self.split_tiles * TILE}), "
                f"{'f32' if self.out == 'f' else 'bf16'} out, {' / '.join(self.paths)}")


class Inputs:
    """The symbolic inputs of a case: q [rows][num_heads * hd] f32, K and V by logical position (each
    element its own leaf), in a paged pool [blocks][num_kv_heads][block_size][hd] whose block table
    maps logical block j to physical block blocks - 1 - j."""

    def __init__(self, case: Case) -> None:
        hd, kvh, bs = case.hd, case.num_kv_heads, case.block_size
        self.rows = case.count
        width = case.num_heads * hd
        self.q = [[Node(("leaf", "q", r, c), 4) for c in range(width)] for r in range(self.rows)]
        # every position a tile the last row's reaches (the loaders read whole tiles)
        self.blocks = ((case.last // TILE + 1) * TILE + bs - 1) // bs
        self.kv = {}
        for t in ("k", "v"):
            pool = []
            for phys in range(self.blocks):
                j = self.blocks - 1 - phys
                for h in range(kvh):
                    for o in range(bs):
                        pos = j * bs + o
                        for d in range(hd):
                            leaf = Node(("leaf", t, pos, h * hd + d), 2)
                            pool += [(leaf, 0), (leaf, 1)]
            self.kv[t] = pool
        self.table = [self.blocks - 1 - j for j in range(self.blocks)]


def _i32(values: list[int]) -> list:
    return [b for v in values for b in (v & 0xFFFFFFFF).to_bytes(4, "little")]


def _f32_bits(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", v))[0]


def scale_c(hd: int) -> int:
    """p.c's bits: (1 / sqrt(hd)) * log2(e), each rounded to f32 as the launcher does."""
    def f32(x: float) -> float:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    return _f32_bits(f32(f32(1.0 / hd ** 0.5) * f32(1.44269504088896340736)))


@dataclass
class Layout:
    mma: dict[str, tuple[int, int]]  # MmaParams field -> (offset, bytes)
    work: list[str]  # AttentionWork fields in order


def layout(spec_path: str) -> Layout:
    sp = specmod.load_spec(spec_path)
    mma = {f.name: (off, 8 if f.type in ("ptr", "i64") else 4) for off, f in sp.struct_offsets["MmaParams"]}
    return Layout(mma, [f.name for _, f in sp.struct_offsets["AttentionWork"]])


class Machine:
    """Global memory of one path's launches: inputs, the output, the partial workspace."""

    def __init__(self, case: Case, inputs: Inputs, c_bits: int) -> None:
        self.case, self.c_bits = case, c_bits
        gm = self.gm = GlobalMemory()
        hd, width = case.hd, case.num_heads * case.hd
        self.q = gm.add("q", inputs.rows * width * 4, writable=False,
                        data=[(leaf, i) for row in inputs.q for leaf in row for i in range(4)])
        self.k = gm.add("k", len(inputs.kv["k"]), writable=False, data=inputs.kv["k"])
        self.v = gm.add("v", len(inputs.kv["v"]), writable=False, data=inputs.kv["v"])
        self.table = gm.add("block_tables", 4 * len(inputs.table), writable=False, data=_i32(inputs.table))
        self.stride = gm.add("block_table_stride", 4, writable=False, data=_i32([len(inputs.table)]))
        self.out_bytes = 4 if case.out == "f" else 2
        self.out = gm.add("out", inputs.rows * width * self.out_bytes)
        slots = inputs.rows * case.num_splits
        self.partial_o = gm.add("partial_o", slots * case.num_heads * hd * 4)
        self.partial_ml = gm.add("partial_ml", slots * case.num_heads * 2 * 4)

    def mma_params(self, lay: Layout, work: Buffer, count: int) -> bytes:
        case = self.case
        shift = case.block_size.bit_length() - 1 if case.block_size & (case.block_size - 1) == 0 and \
            case.block_size <= 64 else -1
        fields = {"q": self.q.base, "q_row_stride": case.num_heads * case.hd, "num_heads": case.num_heads,
                  "group": case.group, "block_tables": self.table.base, "block_table_stride": self.stride.base,
                  "k": self.k.base, "v": self.v.base, "num_kv_heads": case.num_kv_heads,
                  "block_size": case.block_size, "block_shift": shift, "tiles_per_split": case.split_tiles,
                  "c": self.c_bits, "out": self.out.base, "out_row_stride": case.num_heads * case.hd,
                  "partial_o": self.partial_o.base, "partial_ml": self.partial_ml.base, "work": work.base,
                  "num_work_dev": 0, "num_work_host": count, "window": 0}
        if set(fields) != set(lay.mma):
            raise ExecError(f"MmaParams fields {sorted(lay.mma)} in kernels.toml, the runner sets {sorted(fields)}")
        size = max(off + b for off, b in lay.mma.values())
        return param_bytes((size + 7) // 8 * 8, {lay.mma[f][0]: (v, lay.mma[f][1]) for f, v in fields.items()})

    def work(self, lay: Layout, items: list[dict]) -> Buffer:
        if set(items[0]) != set(lay.work):
            raise ExecError(f"AttentionWork fields {lay.work} in kernels.toml, the runner sets {sorted(items[0])}")
        return self.gm.add(f"work{len(self.gm.buffers)}", 28 * len(items), writable=False,
                           data=_i32([it[f] for it in items for f in lay.work]))

    def stored(self, dag: Dag) -> tuple[dict[tuple[int, int], Node], list[tuple[int, int]]]:
        """(row, column) -> the output's node, and the elements never stored."""
        out, missing = {}, []
        width = self.case.num_heads * self.case.hd
        b = self.out_bytes
        for r in range(len(self.out.data) // (width * b)):
            for col in range(width):
                e = self.out.data[(r * width + col) * b:(r * width + col + 1) * b]
                if None in e:
                    missing.append((r, col))
                    continue
                try:
                    out[(r, col)] = value_of_bytes(e, "f32", dag) if b == 4 else half(e[0], e[1], dag)
                except TypeError:
                    raise ExecError(f"out[{r}][{col}] holds bytes of different values") from None
        return out, missing


def _item(row: int, position: int, count: int, s0: int, s1: int, partial: int) -> dict:
    return {"seq": 0, "first_row": row, "first_position": position, "num_positions": count, "split_begin": s0,
            "split_end": s1, "partial": partial}


def _launch(prog: Program, grid: tuple[int, int], params, gm: GlobalMemory, dag: Dag,
            smem: int) -> None:
    threads = prog.func.ntid[0] if prog.func.ntid else THREADS
    for y in range(grid[1]):
        for x in range(grid[0]):
            run_cta(Cta(prog, threads, (x, y, 0), (grid[0], grid[1], 1), params, gm, dag, smem))


def run_path(path: str, progs: dict[str, Program], case: Case, lay: Layout, inputs: Inputs,
             dag: Dag) -> Machine:
    """Runs one path's launches on the case; returns its memory. Errors: ExecError."""
    mc = Machine(case, inputs, scale_c(case.hd))
    kvh, splits = case.num_kv_heads, case.num_splits
    if path in ("folded", "folded2", "decode_fold", "wgmma"):
        items = [_item(0, case.positions[0], case.count, 0, splits, -1)]
        work = mc.work(lay, items)
        _launch(progs[path], (kvh, 1), mc.mma_params(lay, work, 1), mc.gm, dag, SMEM)
        return mc
    # one item per (row, split), partial slot row * splits + split; the merge folds each row's slots
    items = [_item(r, p, 1, s, s + 1, r * splits + s) for r, p in enumerate(case.positions)
             for s in range(splits)]
    work = mc.work(lay, items)
    _launch(progs[path], (kvh, min(case.ctas, len(items))), mc.mma_params(lay, work, len(items)), mc.gm, dag,
            SMEM)
    merges = mc.gm.add("merges", 12 * case.count, writable=False,
                       data=_i32([v for r in range(case.count) for v in (r, r * splits, splits)]))
    num = mc.gm.add("num_merges", 4, writable=False, data=_i32([case.count]))
    params = merge_params(merges, num, mc.partial_o, mc.partial_ml, case.num_heads, case.hd, mc.c_bits, mc.out)
    _launch(progs["merge"], (case.count, case.num_heads), params, mc.gm, dag, 0)
    return mc


def merge_params(merges: Buffer, num: Buffer, partial_o: Buffer, partial_ml: Buffer, heads: int, hd: int,
                 c_bits: int, out: Buffer) -> list[bytes]:
    """attention_merge_kernel's parameters, each its bytes (out's rows heads x hd apart)."""
    return [v.to_bytes(n, "little") for v, n in (
        (merges.base, 8), (num.base, 8), (partial_o.base, 8), (partial_ml.base, 8), (heads, 4), (hd, 4), (c_bits, 4),
        (out.base, 8), (heads * hd, 8))]


_PROGRAMS: dict[tuple[str, str], Program] = {}  # (PTX path, entry regex) -> program, per process
_MODULES: dict[str, PtxModule] = {}  # PTX path -> the file, read once per process


def ptx_files(ptx: str) -> list[str]:
    """The PTX files ptx names: a path, or a glob (the kernels of one op live in one source each, so
    the paths' kernels come from several files: attention_*.compute_80.ptx)."""
    return sorted(glob.glob(ptx)) if any(c in ptx for c in "*?[") else [ptx]


def program(ptx: str, entry: str) -> Program:
    """The compiled entry matching the regex entry (exactly one) in the PTX file(s) ptx names
    (ptx_files). Only that entry is parsed (a tenth of the time of the whole file). Errors:
    ExecError, OSError."""
    key = (ptx, entry)
    if key in _PROGRAMS:
        return _PROGRAMS[key]
    found = []
    for f in ptx_files(ptx):
        if f not in _MODULES:
            _MODULES[f] = PtxModule(f)
        found += [(_MODULES[f], e.name) for e in _MODULES[f].entries if re.search(entry, e.name)]
    if len(found) != 1:
        raise ExecError(f"{len(found)} entries match /{entry}/ in {ptx}")
    module, name = found[0]
    got = _PROGRAMS[key] = compile_program(module.function(name), module)
    return got


@dataclass(frozen=True)
class MergeCase:
    """The merge kernel alone on one row of `splits` saved states (leaves), num_heads heads of hd:
    its output must be the in-order fold of end_split (merge_contract). Enough splits to cross its
    staging (kMergeStageFloats / hd splits a stage) and its unrolled loop's remainder."""

    hd: int
    splits: int
    out: str = "f"
    num_heads: int = 2

    def name(self) -> str:
        return f"the merge alone, head_dim {self.hd}, {self.splits} splits, {'f32' if self.out == 'f' else 'bf16'} out"


def merge_contract(dag: Dag, c: Node, m: list, l: list, o: list) -> Node:
    """O / L of the in-order fold of the states (m[s], l[s], o[s]): the first copied, each later one
    folded with fold_coef and fold (end_split's and the merge kernel's operations), divide_row's
    quotient last."""
    M, L, O = m[0], l[0], o[0]
    for s in range(1, len(m)):
        top = dag.maximum("max.f32", M, m[s])
        a, b = (dag.op("ex2.approx.ftz.f32", 4, dag.f32_op("mul", dag.f32_op("sub", x, top), c)) for x in (M, m[s]))
        L = dag.f32_op("add", dag.f32_op("mul", L, a), dag.f32_op("mul", l[s], b))
        O = dag.f32_op("add", dag.f32_op("mul", O, a), dag.f32_op("mul", o[s], b))
        M = top
    return dag.op("div.rn.f32", 4, O, L)


def run_merge(ptx: str, case: MergeCase, entries: dict[str, str] | None = None) -> "CaseOutcome":
    """Runs the merge kernel on symbolic saved states and compares each output value with merge_contract."""
    import time
    t0 = time.time()
    res = CaseOutcome(case)
    try:
        prog = program(ptx, {**ENTRIES, **(entries or {})}["merge"].format(out=_OUT[case.out]))
        dag = Dag(commutative=True)
        hd, heads, n = case.hd, case.num_heads, case.splits
        po = [[[Node(("leaf", "partial_o", s, h * hd + d), 4) for d in range(hd)] for h in range(heads)]
              for s in range(n)]
        pml = [[[Node(("leaf", "partial_" + x, s, h), 4) for x in "ml"] for h in range(heads)] for s in range(n)]
        gm = GlobalMemory()
        o_buf = gm.add("partial_o", n * heads * hd * 4, writable=False,
                       data=[(v, i) for sl in po for hv in sl for v in hv for i in range(4)])
        ml_buf = gm.add("partial_ml", n * heads * 8, writable=False,
                        data=[(v, i) for sl in pml for hv in sl for v in hv for i in range(4)])
        merges = gm.add("merges", 12, writable=False, data=_i32([0, 0, n]))
        num = gm.add("num_merges", 4, writable=False, data=_i32([1]))
        width = 4 if case.out == "f" else 2
        out = gm.add("out", heads * hd * width)
        c_bits = scale_c(hd)
        _launch(prog, (1, heads), merge_params(merges, num, o_buf, ml_buf, heads, hd, c_bits, out), gm, dag, 0)
        c = dag.const(c_bits, 4)
        for h in range(heads):
            for d in range(hd):
                e = out.data[(h * hd + d) * width:(h * hd + d + 1) * width]
                if None in e:
                    res.differences.append(f"out[0][{h * hd + d}] not stored")
                    return res
                got = value_of_bytes(e, "f32", dag) if width == 4 else half(e[0], e[1], dag)
                want = merge_contract(dag, c, [pml[s][h][0] for s in range(n)], [pml[s][h][1] for s in range(n)],
                                      [po[s][h][d] for s in range(n)])
                if width == 2:
                    want = dag.bf16_round(want)
                if got is not want:
                    a, b = first_difference(got, want)
                    res.differences.append(f"head {h}, column {d}: the merge stores {describe(a)[:200]} where the "
                                           f"in-order fold has {describe(b)[:200]}")
                    return res
                res.compared += 1
    except ExecError as e:
        res.error = str(e)
    except Exception as e:  # an executor fault: not proven, and says why
        res.error = f"{type(e).__name__}: {e}"
    finally:
        res.seconds = time.time() - t0
    return res


@dataclass
class CaseOutcome:
    case: Case | MergeCase
    compared: int = 0  # output values compared across the paths
    differences: list[str] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0


def describe(n, depth: int = 0) -> str:
    """A short form of a DAG node for a report."""
    if not isinstance(n, Node):
        return repr(n)
    k = n.key
    if k[0] == "leaf":
        return f"{k[1]}[{k[2]}][{k[3]}]"
    if k[0] == "const":
        return f"const {k[2]:#x}"
    if depth > 2:
        return f"{k[0]}(...)"
    args = k[1] if len(k) == 2 and isinstance(k[1], frozenset) else k[1:]
    inner = ", ".join(describe(a, depth + 1) for a in list(args)[:4])
    return f"{k[0]}({inner}{', ...' if len(args) > 4 else ''})"


def first_difference(a, b, trail: list | None = None) -> tuple:
    """Where a and b part: the first operand that differs of equal operations, down to a pair whose
    operations (or operand counts) differ (trail: the operations passed on the way)."""
    while a is not b:
        if trail is not None and isinstance(a, Node):
            trail.append(a.key[0])
        if not (isinstance(a, Node) and isinstance(b, Node)) or a.key[0] != b.key[0] or \
                len(a.key) != len(b.key) or a.key[0] in ("leaf", "const") or isinstance(a.key[1], frozenset):
            return a, b
        i = next((i for i in range(1, len(a.key)) if a.key[i] is not b.key[i] and a.key[i] != b.key[i]), None)
        if i is None:
            return a, b
        a, b = a.key[i], b.key[i]
    return a, b


def run_case(ptx: str, spec_path: str, case: Case, entries: dict[str, str] | None = None,
             ptx_sm90: str | None = None) -> CaseOutcome:
    """Runs every path of the case on one Dag and compares each output value across them. entries:
    other entry regexes for some paths (mutants.py's planted kernels); ptx_sm90: the PTX of the wgmma
    path (None: ptx)."""
    import gc
    import time
    t0 = time.time()
    res = CaseOutcome(case)
    enabled = gc.isenabled()
    gc.disable()
    try:
        lay = layout(spec_path)
        kinds = {"hd": case.hd, "out": _OUT[case.out]}
        names = {**ENTRIES, **(entries or {})}
        progs = {p: program((ptx_sm90 or ptx) if p == "wgmma" else ptx, names[p].format(**kinds))
                 for p in set(case.paths) | {"merge"}}
        dag = Dag(commutative=True)
        inputs = Inputs(case)
        stored = {}
        for path in case.paths:
            got, missing = run_path(path, progs, case, lay, inputs, dag).stored(dag)
            if missing:
                r, c = missing[0]
                res.differences.append(f"{path}: out[{r}][{c}] not stored ({len(missing)} values)")
            stored[path] = got
        ref_path = case.paths[0]
        ref = stored[ref_path]
        for path in case.paths[1:]:
            for (r, col), node in stored[path].items():
                want = ref.get((r, col))
                if want is None:
                    continue
                if node is not want:
                    a, b = first_difference(want, node)
                    head, d = divmod(col, case.hd)
                    res.differences.append(
                        f"row at position {case.positions[r]}, head {head}, column {d}: {ref_path} and {path} "
                        f"differ: {describe(a)[:220]} vs {describe(b)[:220]}")
                    break
                res.compared += 1
    except ExecError as e:
        res.error = str(e)
    except Exception as e:  # an executor fault: the case is not proven, and says why
        res.error = f"{type(e).__name__}: {e}"
    finally:
        if enabled:
            gc.enable()
        res.seconds = time.time() - t0
    return res


PATHS = ("folded", "folded2", "wgmma", "decode", "decode_fold", "streaming")


def cases() -> list[Case]:
    """The cases. One decode row each (a per-split item is one position) whose splits run on every
    path: head_dim 64 (SmolLM2-135M: group 3) and 128 (Llama-3.1-8B, Qwen3-8B: group 4); 2 and 3
    splits of 1, 2 and 3 tiles (a split's first, middle and last tile; the split size is the
    deployment's constant, 1,024 positions, reduced: see VERIFICATION); the last tile masked (the
    position 5 or 37 into its tile); one and two KV heads; f32 and bf16 out; the per-split items on one
    CTA streaming them all (the pipeline across items) and on two. And items of 20 positions (80 rows:
    both of the wgmma kernel's warpgroups, the trailing one too) folded by the two 128-row kernels, the
    wgmma one and the two-block mma.sync one, against each other."""
    rows = [Case(64, 3, 2, 1 * TILE + 37, 1, 1, "f", ctas=1),
            Case(64, 4, 1, 2 * 2 * TILE + 37, 1, 2, "bf16", ctas=2),
            Case(64, 3, 1, 6 * TILE + 5, 1, 3, "f", ctas=2),
            Case(128, 4, 1, 2 * TILE + 37, 1, 1, "f", ctas=2),
            Case(128, 4, 2, 3 * TILE + 5, 1, 3, "bf16", ctas=1)]
    items = [Case(64, 4, 1, 2 * TILE + 37, 20, 1, "f", paths=("folded2", "wgmma")),
             Case(128, 4, 1, 3 * TILE + 40, 20, 2, "bf16", paths=("folded2", "wgmma"))]
    return rows + items


def merge_cases() -> list[MergeCase]:
    """The merge kernel alone across its stages (kMergeStageFloats / hd = 32 splits a stage at
    head_dim 128, 64 at 64) and its loop's unrolled remainders: a row of 33 and 70 splits at 128
    (1,024-position splits: 33K and 70K positions), 65 at 64."""
    return [MergeCase(128, 33), MergeCase(128, 70, "bf16"), MergeCase(64, 65)]


def _run(ptx: str, spec_path: str, case: Case | MergeCase, entries: dict[str, str] | None,
         ptx_sm90: str | None) -> CaseOutcome:
    if isinstance(case, MergeCase):
        return run_merge(ptx, case, entries)
    return run_case(ptx, spec_path, case, entries, ptx_sm90)


def _cost(c: Case | MergeCase) -> float:
    if isinstance(c, MergeCase):
        return c.hd * c.splits / 64
    return c.hd * c.num_kv_heads * c.num_splits * c.split_tiles * c.count ** .5


@dataclass
class ChainVerdict:
    """What the comparison ran (summary lines) and every reason it is not proven ([] = proven)."""

    summary: list[str]
    reasons: list[str]


def compare(ptx: str, spec_path: str, workers: int = 2, todo: list | None = None,
            entries: dict[str, str] | None = None, ptx_sm90: str | None = None) -> ChainVerdict:
    """Runs the cases (cases() and merge_cases() by default; in `workers` processes, the costliest
    first) and gathers the verdict: every output value of every case must be the same node on every
    path (the merge's: the in-order fold's). ptx_sm90: the PTX of the wgmma kernel (None: ptx)."""
    import time
    from concurrent.futures import ProcessPoolExecutor
    t0 = time.time()
    for f in (ptx, ptx_sm90 or ptx):
        if not ptx_files(f) or not all(os.path.exists(x) for x in ptx_files(f)):
            return ChainVerdict([], [f"split paths not compared: no {f}"])
    todo = sorted(todo or cases() + merge_cases(), key=_cost, reverse=True)
    paths = [p for p in PATHS if any(isinstance(c, Case) and p in c.paths for c in todo)]
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            outcomes = list(pool.map(_run, [ptx] * len(todo), [spec_path] * len(todo), todo, [entries] * len(todo),
                                     [ptx_sm90] * len(todo)))
    else:
        outcomes = [_run(ptx, spec_path, c, entries, ptx_sm90) for c in todo]
    reasons = []
    for o in outcomes:
        if o.error:
            reasons.append(f"split paths: {o.case.name()}: not executed: {o.error[:300]}")
        for d in o.differences[:2]:
            reasons.append(f"split paths: {o.case.name()}: {d}")
        if not o.error and not o.differences and not o.compared:
            reasons.append(f"split paths: {o.case.name()}: nothing compared")
    busy = sum(o.seconds for o in outcomes)
    names = {"folded": "attention_mma_kernel<hd, OutT, true, 1> folding the splits in one CTA",
             "folded2": "its two-block form <.., true, 2> (128-row CTAs)",
             "wgmma": "attention_wgmma_kernel<hd, OutT, true> (sm_90a, 128-row CTAs)",
             "decode": "attention_decode_kernel per split + attention_merge_kernel",
             "decode_fold": "attention_decode_kernel folding the splits itself",
             "streaming": "attention_mma_kernel<hd, OutT, false, 1> per split (partial >= 0) + the merge kernel"}
    summary = [
        f"split-path comparison (attention_chains.py: symbolic execution of {os.path.basename(ptx)}): "
        f"{len(outcomes)} cases, {sum(o.compared for o in outcomes)} output values compared, each the same DAG "
        f"node on every path (the merge alone: the in-order fold's); {busy:.1f} s of runs, "
        f"{time.time() - t0:.1f} s wall",
        "  paths: " + "; ".join(names[p] for p in paths),
        "  cases: " + "; ".join(c.name() for c in todo),
        "  assumptions: " + "; ".join(ASSUMPTIONS)]
    return ChainVerdict(summary, reasons)
