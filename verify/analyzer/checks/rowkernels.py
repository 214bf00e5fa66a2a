# The CPU matmul's one-row comparisons (vosti-analyze), by symbolic execution of the compiled IR
# (dag.py), the weight decoders' integer operations included, for every weight codec:
#   - within the one-row path (m = 1): row_columns runs a column in a group of kMatmulRowCols
#     (dot_row<Codec, 4>, with or without the prefetch rows `ahead`) or alone (dot_row<Codec, 1>),
#     as the thread's first and last columns fall; every column of the group must get the DAG
#     dot_row<Codec, 1> gives its column;
#   - the one-row path against the tiled one (m >= 2): tiled_columns decodes the columns into its
#     tile and runs a micro-kernel over it; every element it stores must get the DAG
#     dot_row<Codec, 1> gives the same column of the same row (the micro-kernels among themselves:
#     microkernels.py).
# Each element's DAG is compared with the one dot_row<Codec, 1> computes from that element's own
# operands (its x row, its column's weight row, its bias): the same node iff the same operations
# on the same inputs.
# Checked for every k of the deployment's weight shapes (shapes.toml) that is a whole number of
# the codec's blocks, and every such k in 1..K_SMALL, with and without bias. dot_row<Codec, 4> is
# run with its prefetch rows `ahead` given and null (clang compiles its k loop twice, one per case).
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ..domains.dag_tables import same
from ..domains.dag_values import N, Unsupported, reset
from ..frontend.llvm import LlvmModule
from ..symbolic import dag
from . import microkernels

_CODEC = r"INS_(?:4avx2)?12_GLOBAL__N_1\d+(\w+?Codec)E"


def functions(module: LlvmModule) -> dict[str, dict[str, str]]:
    """codec -> {"row1", "row4", "rows", "tiled"}: the compiled dot_row<Codec, 1>,
    dot_row<Codec, 4>, row_columns<Codec> and tiled_columns<Codec>."""
    out: dict[str, dict[str, str]] = {}
    for name in module.funcs:
        m = re.search(r"dot_row" + _CODEC + r"Li(\d+)E", name)
        if m:
            out.setdefault(m.group(1), {})[f"row{m.group(2)}"] = name
            continue
        m = re.search(r"cpu_rows.*row_columns" + _CODEC, name)
        if m:
            out.setdefault(m.group(1), {})["rows"] = name
            continue
        m = re.search(r"tiled_columns" + _CODEC, name)
        if m:
            out.setdefault(m.group(1), {})["tiled"] = name
    return out


def weight_type(module: LlvmModule, rows_fn: str) -> int:
    """The weight type row_columns<Codec> passes block_layout (the codec's)."""
    body = "\n".join(module.funcs[rows_fn].body)
    m = re.search(r"call \{ i64, i64 \} @(\w*block_layout\w*)\(i32 noundef (\d+)\)", body)
    if not m:
        raise Unsupported(f"{rows_fn[:60]}: no call of block_layout")
    return int(m.group(2))


def block_layout(module: LlvmModule, quant: LlvmModule, rows_fn: str) -> tuple[int, int]:
    """(elements, bytes) of one block of the codec: block_layout(type) of the compiled
    quant_blocks.cc, for the weight type row_columns<Codec> passes it."""
    name = next(f for f in quant.funcs if "block_layout" in f)
    out = dag.call(quant, name, [weight_type(module, rows_fn)])
    return out[0], out[1]


def _rows_memory(cols: list[int]) -> dict:
    """The pointer arrays a run reads: rows[j] -> weight row W<cols[j]>, ahead[j] -> A<cols[j]>."""
    mem = {("ROWS", 8 * j): (("ptr", f"W{c}", 0), 8) for j, c in enumerate(cols)}
    mem.update({("AHEAD", 8 * j): (("ptr", f"A{c}", 0), 8) for j, c in enumerate(cols)})
    return mem


def _outputs(stores: dict, fn: str) -> dict[int, object]:
    """Y's elements (by float index) from a run's writes; raises if an input was written."""
    out = {}
    for (base, off), v in stores.items():
        if base == "Y":
            if off % 4:
                raise Unsupported(f"{fn[:60]} writes y at byte {off}")
            out[off // 4] = v
        elif base in ("X", "B", "ROWS", "AHEAD") or re.match(r"^[WA]\d+$", base):
            raise Unsupported(f"{fn[:60]} writes its input {base}")
    return out


class Reference:
    """y[r, c] as dot_row<Codec, 1> computes it: run with x at row r of X (row stride k), its
    weight row W<c>, bias at B[c], so that its leaves are exactly the element's own operands in
    the variant's run (equal DAGs are then the same computation on the same inputs)."""

    def __init__(self, module, modules, fn: str, k: int, pure: str) -> None:
        self.module, self.modules, self.fn, self.k, self.pure = module, modules, fn, k, pure
        self.memo: dict[tuple, N] = {}

    def __call__(self, r: int, c: int, bias: bool) -> N:
        key = (r, c, bias)
        if key not in self.memo:
            args = [("ptr", "X", 4 * self.k * r), ("ptr", "ROWS", 0), self.k, ("ptr", "B", 4 * c) if bias else None,
                    ("ptr", "Y", 0)]
            if len(self.module.funcs[self.fn].params) != 5:
                raise Unsupported(f"{self.fn[:60]}: {len(self.module.funcs[self.fn].params)} parameters")
            out = _outputs(dag.run(self.module, self.fn, args, memory=_rows_memory([c]), modules=self.modules,
                                   pure=self.pure), self.fn)
            if list(out) != [0]:
                raise Unsupported(f"{self.fn[:60]} stores y{sorted(out)}, not its one column")
            self.memo[key] = out[0]
        return self.memo[key]


def row_group(module, modules, fn: str, cols: int, k: int, bias: bool, ahead: bool, pure: str) -> dict[int, N]:
    """Column j -> the DAG dot_row<Codec, cols> stores at y[j] (weight rows W0.., bias B)."""
    nparams = len(module.funcs[fn].params)
    args = [("ptr", "X", 0), ("ptr", "ROWS", 0), k, ("ptr", "B", 0) if bias else None, ("ptr", "Y", 0)]
    if nparams == 6:
        args.append(("ptr", "AHEAD", 0) if ahead else None)
    elif nparams != 5 or ahead:
        raise Unsupported(f"{fn[:60]}: {nparams} parameters")
    out = _outputs(dag.run(module, fn, args, memory=_rows_memory(list(range(cols))), modules=modules, pure=pure), fn)
    if sorted(out) != list(range(cols)):
        raise Unsupported(f"{fn[:60]} stores y{sorted(out)}, not its {cols} columns")
    return out


def tiled(module, modules, fn: str, m: int, c0: int, c1: int, k: int, bias: bool,
          pure: str) -> dict[tuple[int, int], N]:
    """(r, c) -> the DAG tiled_columns<Codec> stores at y[r, c], for rows 0..m and columns [c0, c1)
    (x rows of stride k, weight rows W0.., bias B)."""
    ldy = c1 + 1
    params = module.funcs[fn].params
    if len(params) != 10:
        raise Unsupported(f"{fn[:60]}: {len(params)} parameters")
    args = [("ptr", "X", 0), m, k, ("ptr", "ROWS", 0), ("ptr", "B", 0) if bias else None, ("ptr", "Y", 0), ldy,
            c0, c1, ("ptr", "TILE", 0)]
    out = _outputs(dag.run(module, fn, args, memory=_rows_memory(list(range(c1))), modules=modules, pure=pure), fn)
    want = {r * ldy + c for r in range(m) for c in range(c0, c1)}
    if set(out) != want:
        raise Unsupported(f"{fn[:60]} stores {len(out)} elements, not its {len(want)}")
    return {divmod(e, ldy): v for e, v in out.items()}


def windows(module, modules, fn: str, c0: int, c1: int, k: int, bias: bool, pure: str) -> dict[int, N]:
    """Column c -> the DAG row_columns<Codec> stores at y[c] for the thread columns [c0, c1)."""
    params = module.funcs[fn].params
    if len(params) != 7:
        raise Unsupported(f"{fn[:60]}: {len(params)} parameters")
    args = [("ptr", "X", 0), k, ("ptr", "ROWS", 0), ("ptr", "B", 0) if bias else None, ("ptr", "Y", 0), c0, c1]
    out = _outputs(dag.run(module, fn, args, memory=_rows_memory(list(range(c1))), modules=modules, pure=pure), fn)
    if sorted(out) != list(range(c0, c1)):
        raise Unsupported(f"{fn[:60]} stores y{sorted(out)[:8]}, not columns [{c0}, {c1})")
    return out


# The thread column ranges row_columns is run on (first column, number of columns): single
# columns, one group, a group and singles, and a range long enough that its first groups
# prefetch and its last ones do not, in both prefetch modes.
WINDOWS = ((0, 1), (0, 4), (0, 7), (5, 27))
LINE_BYTES = 640  # row_columns prefetches rows of up to this many bytes in one burst, longer ones a line per block


@dataclass
class _Build:
    """Another build of the one-row path (the AVX-512 one) compared at one codec's ks: its module,
    its functions for the codec (`of`, with its name), its dispatch entry, the weight type, whether
    its dot_row functions are this build's (then only its dispatch is run), and its findings."""

    other: LlvmModule
    of: dict
    entry: str
    wtype: int
    identical: bool
    groups: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def stopped(self) -> bool:
        return len(self.groups) > 3 or len(self.paths) > 3


def compare_codec(module, quant, f: dict, codec: str, ks: list[int], pure: str,
                  others: tuple = ()) -> tuple[list[str], list[str], str, list[tuple[list[str], list[str]]]]:
    """(group differences, path differences, summary) of one codec (see the file comment), and the
    (group, path) differences of each other build (others: (module, its functions for the codec,
    its dispatch entry), other_build()). At each k, the runs of every build share one reference:
    dot_row<Codec, 1>'s DAGs in one epoch of the node table, computed once."""
    modules = [quant]
    groups: list[str] = []
    paths: list[str] = []
    missing = [r for r in ("row1", "row4", "rows", "tiled") if r not in f]
    builds: list[_Build | tuple[list[str], list[str]]] = [_setup_build(module, quant, f, codec, *o) for o in others]
    live = [b for b in builds if isinstance(b, _Build)]
    results = lambda: [(b.groups, b.paths) if isinstance(b, _Build) else b for b in builds]  # noqa: E731
    if missing:
        return [f"{codec}: no compiled {', '.join(missing)}"], [], "", results()
    try:
        elems, block_bytes = block_layout(module, quant, f["rows"])
    except Unsupported as e:
        return [f"{codec}: {e}"], [], "", results()
    valid = [k for k in ks if k % elems == 0]
    line_k = next((k for k in valid if k // elems * block_bytes > LINE_BYTES), None)
    stopped = False  # more than three differences: this build's comparison ends there
    for k in valid:
        # The AVX-512 flags change the IR of most codecs' dot_row not at all: identical functions
        # compute identical DAGs, so only the dispatch (row_columns inlined into it) is run then.
        active = [b for b in live if not b.stopped() and (not b.identical or k in (valid[0], line_k))]
        if stopped and not active:
            continue
        reset()
        ref = Reference(module, modules, f["row1"], k, pure)
        if not stopped:
            _this_build(module, modules, f, codec, k, valid, line_k, ref, pure, groups, paths)
            stopped = len(groups) > 3 or len(paths) > 3
        for b in active:
            other_build(b, modules, f, codec, k, valid, line_k, ref, pure)
    reset()
    if not valid:
        return [], [], f"{codec}: no k", results()
    return groups, paths, "" if stopped else f"{codec} ({len(valid)} k)", results()


def _this_build(module, modules, f: dict, codec: str, k: int, valid: list[int], line_k, ref, pure: str,
                groups: list[str], paths: list[str]) -> None:
    """This build's comparisons at k: dot_row<Codec, 4>'s columns, row_columns on the thread column
    ranges (at the first k and the first line-prefetched one), and the tiled path's elements, each
    against dot_row<Codec, 1> (ref)."""
    small = k <= microkernels.K_SMALL
    for bias in (True, False) if small or k == valid[0] else (True,):
        where = f"{codec} at k={k}{' with bias' if bias else ''}"
        try:
            for ahead in (False, True):
                for j, got in row_group(module, modules, f["row4"], 4, k, bias, ahead, pure).items():
                    if got is not ref(0, j, bias):
                        groups.append(f"{where}: dot_row<{codec}, 4> column {j}"
                                      f"{' (prefetching)' if ahead else ''} differs from dot_row<{codec}, 1> "
                                      f"({dag.first_difference(got, ref(0, j, bias))})")
                        break
            for c0, n in WINDOWS if k in (valid[0], line_k) else ():
                if k == line_k and k != valid[0] and c0 == 0:
                    continue
                for c, got in windows(module, modules, f["rows"], c0, c0 + n, k, bias, pure).items():
                    if got is not ref(0, c, bias):
                        groups.append(f"{where}: row_columns<{codec}> on columns [{c0}, {c0 + n}): column {c} "
                                      f"differs from dot_row<{codec}, 1>")
                        break
        except Unsupported as e:
            groups.append(f"{where}: symbolic execution stopped: {e}")
        try:
            for m, c0, c1 in [(2, 0, 1)] + ([(5, 1, 6)] if small else []):
                for (r, c), got in tiled(module, modules, f["tiled"], m, c0, c1, k, bias, pure).items():
                    if got is not ref(r, c, bias):
                        why = dag.first_difference(got, ref(r, c, bias))
                        paths.append(f"{where}: tiled_columns<{codec}> element ({r}, {c}) of m={m} "
                                     f"differs from dot_row<{codec}, 1>'s ({why})")
                        break
        except Unsupported as e:
            paths.append(f"{where}: symbolic execution stopped: {e}")
        if len(groups) > 3 or len(paths) > 3:
            return


def _setup_build(module, quant, f: dict, codec: str, other, of: dict, entry: str):
    """The _Build of another build for the codec, or its findings where it cannot be run."""
    try:
        block_layout(module, quant, f["rows"])
        wtype = weight_type(module, f["rows"])
        identical = ir_identical(module, f["row1"], other, of["row1"]) and \
            ir_identical(module, f["row4"], other, of["row4"])
    except Unsupported as e:
        return [f"{codec}: {e}"], []
    return _Build(other, of, entry, wtype, identical)


def other_build(b: _Build, modules, f: dict, codec: str, k: int, valid: list[int], line_k, ref, pure: str) -> None:
    """Another build of the one-row path (b.other, whose dispatch b.entry inlines row_columns)
    against this codec's, at k: its dot_row<Codec', 1> must compute what this build's
    dot_row<Codec, 1> (ref) computes (same(): the table decoders by their case split; shown for one
    column's leaves, it holds for every column's, the execution being blind to leaf names), and
    every column of its dot_row<Codec', 4> and every column its dispatch stores, run on the thread
    column ranges for the codec's weight type, must be the same node as one of the two's for that
    column. Findings go to b.groups and b.paths."""
    other, of, entry, identical = b.other, b.of, b.entry, b.identical
    small = k <= microkernels.K_SMALL
    own = Reference(other, modules, of["row1"], k, pure)
    for bias in (True, False) if small or k == valid[0] else (True,):
        where = f"{codec} (AVX-512 build: {of['name']}) at k={k}{' with bias' if bias else ''}"
        try:
            if not identical and not same(own(0, 0, bias), ref(0, 0, bias)):
                b.paths.append(f"{where}: dot_row<{of['name']}, 1> differs from the AVX2 build's dot_row<{codec}, 1>")
            for ahead in (False, True) if not identical else ():
                for j, got in row_group(other, modules, of["row4"], 4, k, bias, ahead, pure).items():
                    if got is not ref(0, j, bias) and got is not own(0, j, bias):
                        b.groups.append(f"{where}: dot_row<{of['name']}, 4> column {j}"
                                        f"{' (prefetching)' if ahead else ''} differs from dot_row<{of['name']}, 1>")
                        break
            for c0, n in WINDOWS if k in (valid[0], line_k) else ():
                if k == line_k and k != valid[0] and c0 == 0:
                    continue
                for c, got in dispatch_windows(other, modules, entry, b.wtype, c0, c0 + n, k, bias, pure).items():
                    if got is not ref(0, c, bias) and got is not own(0, c, bias):
                        b.groups.append(f"{where}: {entry[:40]} on columns [{c0}, {c0 + n}): column {c} "
                                        f"differs from dot_row<{of['name']}, 1>")
                        break
        except Unsupported as e:
            b.groups.append(f"{where}: symbolic execution stopped: {e}")
        if b.stopped():
            return


_ATTR = re.compile(r" #\d+|, ![\w.]+ !\d+|, ![\w.]+ !\{[^}]*\}")


def ir_identical(m1: LlvmModule, f1: str, m2: LlvmModule, f2: str, seen: set | None = None) -> bool:
    """Whether two compiled functions have the same instructions (attribute groups and metadata
    aside: hints, not semantics), call functions that are themselves identical, and use named
    types and constant globals defined alike in both modules: then they compute the same values."""
    seen = set() if seen is None else seen
    if (f1, f2) in seen:
        return True
    seen.add((f1, f2))
    if f1 not in m1.funcs or f2 not in m2.funcs:
        return False
    p1, b1, p2, b2 = m1.funcs[f1].params, m1.funcs[f1].body, m2.funcs[f2].params, m2.funcs[f2].body
    t1 = [_ATTR.sub("", ln).replace(f1, "@SELF") for ln in b1]
    t2 = [_ATTR.sub("", ln).replace(f2, "@SELF") for ln in b2]
    if p1 != p2 or t1 != t2:
        return False
    text = "\n".join(t1)
    for t in set(re.findall(r'%"[^"]+"|%struct\.[\w.]+|%class\.[\w.]+|%union\.[\w.]+', text)):
        if m1.types.get(t) != m2.types.get(t):
            return False
    for g in set(re.findall(r"@([\w.$-]+)", text)) - {"SELF"}:
        if g in m1.funcs or g in m2.funcs:
            if not ir_identical(m1, g, m2, g, seen):
                return False
        elif "@" + g in m1.globals or "@" + g in m2.globals:
            if m1.globals.get("@" + g) != m2.globals.get("@" + g):
                return False
    return True


def dispatch_windows(module, modules, fn: str, wtype: int, c0: int, c1: int, k: int, bias: bool,
                     pure: str) -> dict[int, N]:
    """Column c -> the DAG fn(x, k, part, bias, y, c0, c1) (a matmul_row_columns_* entry: the
    codec from part.type) stores at y[c]; part = WeightRows{wtype, c1, rows}."""
    params = module.funcs[fn].params
    if len(params) != 7:
        raise Unsupported(f"{fn[:60]}: {len(params)} parameters")
    mem = _rows_memory(list(range(c1)))
    mem[("PART", 0)] = (wtype, 4)
    mem[("PART", 8)] = (c1, 8)
    mem[("PART", 16)] = (("ptr", "ROWS", 0), 8)
    args = [("ptr", "X", 0), k, ("ptr", "PART", 0), ("ptr", "B", 0) if bias else None, ("ptr", "Y", 0), c0, c1]
    out = _outputs(dag.run(module, fn, args, memory=mem, modules=modules, pure=pure), fn)
    if sorted(out) != list(range(c0, c1)):
        raise Unsupported(f"{fn[:60]} stores y{sorted(out)[:8]}, not columns [{c0}, {c1})")
    return out


_MODULES: dict[str, LlvmModule] = {}


def _module(path: str) -> LlvmModule:
    """The parsed IR (once per process: the pool's tasks share it)."""
    if path not in _MODULES:
        _MODULES[path] = LlvmModule(path)
    return _MODULES[path]


def codecs_by_cost(path: str) -> list[str]:
    """The codecs of the IR, the longest dot_row<Codec, 4> first (the order to hand them to a pool)."""
    module = _module(path)
    fns = functions(module)
    return sorted(fns, key=lambda c: -len(module.funcs[fns[c]["row4"]].body) if "row4" in fns[c] else 0)


def compare(path: str, quant_path: str, ks: list[int], pure: str,
            others: tuple[tuple[str, str], ...] = (), only: str = "") -> dict:
    """For every codec compiled in the IR at path: {"done": what was compared, one codec a line;
    "groups": {IR file: reasons its column groups differ}; "paths": reasons the one-row and tiled
    paths (or another build's one-row path, others: (IR file, its dispatch entry regex)) differ}.
    only: that codec alone (one task of a pool)."""
    module = _module(path)
    quant = _module(quant_path)
    fns = functions(module)
    out = {"done": [], "groups": {path: []}, "paths": []}
    if not fns:
        out["groups"][path].append("no dot_row instantiation in the IR")
        return out
    builds = []
    for other_path, entry_rx in others:
        other = _module(other_path)
        entry = next((f for f in other.funcs if re.search(entry_rx, f)), None)
        out["groups"][other_path] = [] if entry else [f"no function /{entry_rx}/ in {os.path.basename(other_path)}"]
        if entry:
            builds.append((other_path, other, entry, functions(other)))
    for codec, f in sorted(fns.items()):
        if only and codec != only:
            continue
        others, where = [], []
        for other_path, other, entry, ofns in builds:
            name = next((n for n in (codec.replace("Codec", "TableCodec"), codec) if n in ofns
                         and n.replace("Table", "") == codec and "row1" in ofns[n] and "row4" in ofns[n]), None)
            if name is None:
                out["groups"][other_path].append(f"{codec}: no dot_row<{codec}, 1 and 4> in "
                                                 f"{os.path.basename(other_path)}")
                continue
            others.append((other, dict(ofns[name], name=name), entry))
            where.append(other_path)
        g, p, summary, per_build = compare_codec(module, quant, f, codec, ks, pure, tuple(others))
        out["groups"][path] += g
        out["paths"] += p
        if summary:
            out["done"].append(summary)
        for other_path, (g, p) in zip(where, per_build):
            out["groups"][other_path] += g
            out["paths"] += p
    return out


if __name__ == "__main__":
    import sys
    import time
    t = time.time()
    ks = [int(x) for x in sys.argv[3].split(",")] if len(sys.argv) > 3 else [8, 32, 256]
    others = ((sys.argv[4], "matmul_row_columns_avx512"),) if len(sys.argv) > 4 else ()
    print(compare(sys.argv[1], sys.argv[2], ks, "decode_plain|f16_to_f32|block_layout", others),
          f"{time.time() - t:.1f} s")
