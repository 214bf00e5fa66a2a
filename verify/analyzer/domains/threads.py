# Two small analyses over a function's registers for the information-flow analysis (flow.py):
# the bit fields of %tid.x ((tid.x >> s) & mask: which tid bits a value depends on, so that a
# value's thread pseudo-axes are those bits only) and comparisons of row coordinates with row
# counts (row masks, assumption A-bounds: a register's coefficient of the row count, +1, -1, 0 or
# unknown, over all its definitions).
from __future__ import annotations

from ..frontend.kir import Function, Inst
from .labels import TID_BITS


def thread_fields(func: Function, insts: list[tuple[str, Inst]], vi) -> tuple[dict, set]:
    """Instructions whose result is a bit field of %tid.x, (tid.x >> s) & mask (register defined
    once): id -> the tid bits it depends on; and shfl.sync.idx reads from a constant lane."""
    ndefs: dict[str, int] = {}
    for _, inst in insts:
        for d in inst.dsts:
            ndefs[d] = ndefs.get(d, 0) + 1
    nt = (func.ntid or (1024, 1, 1))[0]
    field: dict[str, tuple[int, int]] = {}
    high: dict[str, tuple[str, int]] = {}  # register = field & -2^k: (field register, the mask)
    alias: dict[str, str] = {}
    out: dict[int, frozenset[str]] = {}
    broadcasts: set[int] = set()
    for _, inst in insts:
        base = inst.op.split(".")[0]
        d = inst.dsts[0] if len(inst.dsts) == 1 else None
        args = [a.strip() for a in inst.args[1:]]
        f = None
        if base == "mov" and args == ["%tid.x"]:
            f = (0, (1 << max(nt - 1, 1).bit_length()) - 1)
        elif base in ("mov", "cvt") and len(args) == 1 and args[0] in field and not inst.fp:
            f = field[args[0]]
        elif base == "shr" and len(args) == 2 and args[0] in field and args[1].isdigit():
            s0, m0 = field[args[0]]
            f = (s0 + int(args[1]), m0 >> int(args[1]))
        elif base == "and" and len(args) == 2 and args[0] in field and args[1].lstrip("-").isdigit():
            s0, m0 = field[args[0]]
            c = int(args[1]) & 0xFFFFFFFF
            f = (s0, m0 & (c >> s0))
            if int(args[1]) < 0 and d:
                high[d] = (args[0], int(args[1]))
        elif base == "add" and len(args) == 2 and vi is not None:
            ops = vi.operands.get(id(inst), [])
            for x, other in ((0, 1), (1, 0)):  # x + 0: x
                if len(ops) == 2 and ops[other] == (0, 0) and args[x] in field:
                    f = field[args[x]]
                    alias[d] = args[x]
        elif base == "sub" and len(args) == 2 and args[0] in field and args[1] in high:
            src_reg, c = high[args[1]]
            if alias.get(src_reg, src_reg) == alias.get(args[0], args[0]) or src_reg == args[0]:
                s0, m0 = field[args[0]]
                f = (s0, m0 & ((~c & 0xFFFFFFFF) >> s0))  # x - (x & -2^k): x's low k bits
        if f is not None and d and ndefs.get(d) == 1:
            field[d] = f
            out[id(inst)] = frozenset(TID_BITS[b] for b in range(10) if (f[1] << f[0]) >> b & 1)
        if base == "shfl" and ".idx" in inst.op and len(args) >= 2 and vi is not None:
            lane = vi.shfl_lane.get(id(inst))
            if lane is not None and lane[0] == lane[1]:
                broadcasts.add(id(inst))
                dst = inst.args[0].split("|")[0].strip()
                if args[0] in field and field[args[0]][0] >= 5 and ndefs.get(dst) == 1:
                    field[dst] = field[args[0]]  # a warp-uniform field: every lane holds lane c's value
                    out[id(inst)] = frozenset(TID_BITS[b] for b in range(10)
                                              if (field[dst][1] << field[dst][0]) >> b & 1)
    return out, broadcasts


def row_bound_compares(func: Function, insts: list[tuple[str, Inst]], extents: set) -> set[int]:
    """Integer comparisons x + c CMP m (or m - x CMP c ...) where m is a row-count parameter (a field
    labelled rows) entering with coefficient +-1 and everything else is free of it: the candidates
    for row masks. flow.analyze() accepts one as a mask when its other operand carries the row
    (or plan) axis, i.e. is a row coordinate, and nothing but row, plan, rows and padding.
    Coefficients are per register over all its definitions (a register defined twice with
    different coefficients has none)."""
    rows_fields = extents  # (param, offset) of the row and column counts
    if not rows_fields:
        return set()
    coef: dict[str, int | None] = {}

    def c(r: str) -> int | None:
        return coef.get(r.strip(), 0)

    def merge(d: str, v: int | None) -> bool:
        if d not in coef:
            coef[d] = v
            return v != 0
        if coef[d] is not None and coef[d] != v:
            coef[d] = None
            return True
        return False

    changed = True
    while changed:
        changed = False
        for _, inst in insts:
            if not inst.dsts:
                continue
            base = inst.op.split(".")[0]
            args = [a.strip() for a in inst.args[1:]]
            if inst.kind == "load" and inst.space == "param":
                size = inst.width // max(len(inst.dsts), 1) if inst.width else 4
                for k, d in enumerate(inst.dsts):
                    hit = any((p, off + k * size) in rows_fields for p, off in inst.params)
                    changed |= merge(d, 1 if hit else 0)
                continue
            regs = [a for a in args if a.startswith("%") or "#s" in a]
            cs = [c(a) for a in regs]
            if all(x == 0 for x in cs) or inst.fp or inst.fp_dst:
                v: int | None = 0 if all(x == 0 for x in cs) else None
            elif base in ("mov", "cvta") or (base == "cvt" and not inst.fp):
                v = cs[0] if len(cs) == 1 else None
            elif base == "add" and len(args) == 2:
                v = None if None in cs else sum(cs)
            elif base == "sub" and len(args) == 2:
                a0 = c(args[0]) if args[0] in regs else 0
                a1 = c(args[1]) if args[1] in regs else 0
                v = None if a0 is None or a1 is None else a0 - a1
            elif base == "neg" and len(cs) == 1:
                v = None if cs[0] is None else -cs[0]
            elif base == "mad" and "lo" in inst.op.split(".") and len(args) == 3 and \
                    (c(args[0]) == 0 and (c(args[1]) == 0 if args[1] in regs else True)):
                v = c(args[2]) if args[2] in regs else 0  # coordinate * stride + extent term
            else:
                v = None
            for d in inst.dsts:
                changed |= merge(d, v)
    out = set()
    for _, inst in insts:
        if inst.op.startswith("setp.") and len(inst.args) >= 3 and not inst.fp:
            parts = inst.op.split(".")
            if len(parts) != 3 or parts[2][0] not in "su":
                continue
            ca, cb = c(inst.args[1]), c(inst.args[2])
            if ca is not None and cb is not None and abs(ca - cb) == 1:
                out.add(id(inst))
    return out
