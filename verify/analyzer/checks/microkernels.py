# The CPU matmul's micro-kernel comparison (vosti-analyze): matmul_columns_avx2 picks
# dot_block<R, C> from kBlockTable by the rows left in the row block (from m) and the columns left
# in the thread's chunk (from the thread split). Every candidate must compute every element of its
# block by the same operation DAG (dag.py: symbolic execution of the compiled IR) as
# dot_block<1, 1> computes from that element's own operands (run on its x row, w row and bias):
# the lane-8 dot of the x row and the w row, then + bias. Checked for every k of the deployment's
# weight shapes (shapes.toml) and every k in 1..K_SMALL (every combination of vector blocks,
# unrolled trips and tail the loops can take at small k).
from __future__ import annotations

import re

from ..domains.dag_values import N, Unsupported, reset
from ..frontend.llvm import LlvmModule
from ..symbolic import dag

K_SMALL = 80


def block_table(module: LlvmModule, path: str, table: str = "kBlockTable") -> list[str]:
    """The function names of the constant table (the spec entry's `dispatch`), in table order."""
    text = open(path, encoding="utf-8", errors="replace").read()
    m = re.search(r"^@\S*" + re.escape(table) + r"\S* = .*$", text, re.M)
    if not m:
        return []
    return re.findall(r"@(_ZN\w*dot_block\w*)", m.group(0))


def _rc(name: str) -> tuple[int, int]:
    m = re.search(r"dot_blockILi(\d+)ELi(\d+)E", name)
    return int(m.group(1)), int(m.group(2))


def element_dags(module: LlvmModule, name: str, k: int, with_bias: bool) -> dict[tuple[int, int], N]:
    """(r, c) -> the DAG dot_block<R, C> stores at y[r, c]: x rows and w rows of stride k at X and W,
    the bias at B."""
    R, C = _rc(name)
    ldy = C + 3  # any stride: elements are found by offset
    args = [("ptr", "X", 0), k, ("ptr", "W", 0), k, ("ptr", "B", 0) if with_bias else None, ("ptr", "Y", 0), ldy]
    stores = dag.run(module, name, args)
    out = {}
    for (base, off), v in stores.items():
        if base != "Y":
            raise Unsupported(f"{name} stores to {base}")
        out[divmod(off // 4, ldy)] = v
    if set(out) != {(r, c) for r in range(R) for c in range(C)}:
        raise Unsupported(f"{name} stores {sorted(out)} instead of its {R}x{C} block")
    return out


def reference(module: LlvmModule, name: str, k: int, with_bias: bool, r: int, c: int) -> N:
    """The DAG dot_block<1, 1> (name) computes for element (r, c) of a block: run on x row r, w row c
    and bias[c] at the offsets element_dags gives them, so that its leaves are exactly that
    element's own operands (equal DAGs: the same operations on the same inputs)."""
    args = [("ptr", "X", 4 * k * r), k, ("ptr", "W", 4 * k * c), k, ("ptr", "B", 4 * c) if with_bias else None,
            ("ptr", "Y", 0), 4]
    stores = dag.run(module, name, args)
    if set(stores) != {("Y", 0)}:
        raise Unsupported(f"{name} stores {sorted(stores)[:4]} instead of its one element")
    return stores[("Y", 0)]


def compare(path: str, ks: list[int], table: str = "kBlockTable") -> tuple[list[str], list[str]]:
    """(names compared, reasons they differ): every element of every candidate of the table against
    dot_block<1,1> on that element's operands, for every k in ks, with and without bias."""
    module = LlvmModule(path)
    names = block_table(module, path, table)
    if not names:
        return [], [f"{table} not found in the IR"]
    ref = next((n for n in names if _rc(n) == (1, 1)), None)
    problems: list[str] = []
    for k in ks:
        reset()  # the DAGs of one k: nodes of earlier ones are not compared again
        for with_bias in (True, False):
            try:
                want: dict[tuple[int, int], N] = {}
                for name in names:
                    for (r, c), got in element_dags(module, name, k, with_bias).items():
                        if (r, c) not in want:
                            want[(r, c)] = reference(module, ref, k, with_bias, r, c)
                        if got is not want[(r, c)]:
                            problems.append(f"dot_block<{_rc(name)[0]},{_rc(name)[1]}> element ({r},{c}) at k={k}"
                                            f"{' with bias' if with_bias else ''} differs from dot_block<1,1>'s")
            except Unsupported as e:
                problems.append(f"k={k}: symbolic execution stopped: {e}")
            if len(problems) > 5:
                return names, problems
    return names, problems
