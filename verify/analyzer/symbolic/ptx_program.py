# A PTX entry ready for the symbolic execution (ptx_exec.py): its instructions flattened into a
# Program (label -> index, one compiled handler per instruction: ptx_ops.py fills them), the
# branches' joins (join_of: where a branch on a floating-point value's two ways meet), and the
# operand forms the handlers read (registers by index, immediates, special registers and symbols,
# addresses), each read once at compile time into a getter over a CTA's registers.
from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import repeat

from ..domains.ptx_dag import ExecError
from ..frontend.kir import Function, Inst, split_outside


@dataclass
class Program:
    """An entry ready to run: flat instructions, label -> index, compiled handlers."""

    func: Function
    insts: list[Inst]
    labels: dict[str, int]
    handlers: list  # per instruction: (kind, payload); kind run | branch | ret | bar | collective
    reg_index: dict[str, int]
    shared: dict[str, tuple[int, int, int]]  # symbol -> (align, size or -1 for extern [], order)
    param_symbols: list[str]  # the entry's parameters in order (Cta.params: their bytes)
    local: dict[str, int]  # the entry's local arrays (at most one, its __local_depot) -> bytes
    joins: dict[int, tuple[int, list[int], set[int]]] = field(default_factory=dict)  # branch -> join_of

    def line(self, pc: int) -> str:
        i = self.insts[pc]
        return f"line {i.line}: {i.text}"


SPECIALS = ("%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ntid.z", "%ctaid.x", "%ctaid.y", "%ctaid.z",
             "%nctaid.x", "%nctaid.y", "%nctaid.z", "%laneid")


def join_of(prog: Program, pc: int) -> tuple[int, list[int], set[int]]:
    """The branch at pc: (its join, the immediate post-dominator's first instruction; the registers
    the instructions between them write; those of them that are predicates). Errors: ExecError where
    the branch has no join before the exit."""
    got = prog.joins.get(pc)
    if got is not None:
        return got
    starts = sorted(set(prog.labels.values()))
    block_of = {}
    for i, st in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(prog.insts)
        for x in range(st, end):
            block_of[x] = i
    n = len(starts)
    succs: list[list[int]] = []
    for i, st in enumerate(starts):
        last = (starts[i + 1] if i + 1 < n else len(prog.insts)) - 1
        kind, payload = prog.handlers[last]
        if kind == "ret":
            succs.append([])
        elif kind == "branch":
            to = [block_of[prog.labels[payload[0]]]]
            succs.append(to + ([i + 1] if payload[1] is not None and i + 1 < n else []))
        else:
            succs.append([i + 1] if i + 1 < n else [])
    full = (1 << n) - 1
    pdom = [full] * n
    changed = True
    while changed:
        changed = False
        for i in range(n - 1, -1, -1):
            acc = full if succs[i] else 0
            for j in succs[i]:
                acc &= pdom[j]
            new = acc | (1 << i)
            if new != pdom[i]:
                pdom[i], changed = new, True
    b = block_of[pc]
    strict = pdom[b] & ~(1 << b)
    ipdom = next((j for j in range(n) if strict >> j & 1 and pdom[j] == strict), None)
    if ipdom is None:
        raise ExecError(f"{prog.line(pc)}: a branch on a floating-point value with no join before the exit")
    region, todo = set(), [j for j in succs[b] if j != ipdom]
    while todo:
        j = todo.pop()
        if j in region:
            continue
        region.add(j)
        todo += [k for k in succs[j] if k != ipdom]
    written: set[int] = set()
    for j in region:
        end = starts[j + 1] if j + 1 < n else len(prog.insts)
        for x in range(starts[j], end):
            written.update(prog.reg_index[r] for r in prog.insts[x].dsts if r in prog.reg_index)
    types = prog.func.reg_types
    names = {i: r for r, i in prog.reg_index.items()}
    preds = {r for r in written if (types.get(names[r]) or types.get(re.sub(r"\d+$", "", names[r]))) == "pred"}
    got = prog.joins[pc] = (starts[ipdom], sorted(written), preds)
    return got


# ---- operands ----


def reg(prog: Program, name: str) -> int:
    i = prog.reg_index.get(name)
    if i is None:
        i = prog.reg_index[name] = len(prog.reg_index)
    return i


def imm(tok: str) -> int | None:
    m = re.match(r"^(-?)(0[xX][0-9a-fA-F]+|\d+)U?$", tok)
    if not m:
        return None
    v = int(m.group(2), 0)
    return -v if m.group(1) else v


def operand(prog: Program, tok: str) -> tuple:
    """("r", index) a register; ("c", value) an immediate (int, or ("f32", bits)); ("s", name) a
    special register or a symbol's address."""
    tok = tok.strip()
    if tok in SPECIALS:
        return ("s", tok)
    if tok.startswith("%"):
        if re.match(r"^%(warpid|smid|clock|clock64|globaltimer|nsmid|gridid|lanemask)", tok):
            raise ExecError(f"reads {tok}, scheduling state the executor does not model")
        return ("r", reg(prog, tok))
    m = re.match(r"^0[fF]([0-9a-fA-F]{8})$", tok)
    if m:
        return ("c", ("f32", int(m.group(1), 16)))
    m = re.match(r"^0[dD]([0-9a-fA-F]{16})$", tok)
    if m:
        return ("c", ("f64", int(m.group(1), 16)))
    v = imm(tok)
    if v is not None:
        return ("c", v)
    if re.match(r"^[A-Za-z_$][\w$#]*$", tok):
        if "#" in tok:
            return ("r", reg(prog, tok))  # an inline-asm scope's register (renamed by ptx.py)
        return ("s", tok)
    raise ExecError(f"operand {tok!r} not modelled")


def vector(prog: Program, tok: str) -> list[tuple]:
    tok = tok.strip()
    if not tok.startswith("{"):
        return [operand(prog, tok)]
    return [operand(prog, t) for t in split_outside(tok[1:-1], "{[", "}]")]


def address(prog: Program, tok: str) -> tuple:
    """[reg+off] -> ("r", index, off); [symbol+off] -> ("s", symbol, off)."""
    inner = tok.strip()[1:-1].strip()
    m = re.match(r"^([%\w$#.]+)\s*(?:\+\s*(-?\d+))?$", inner)
    if not m:
        raise ExecError(f"address {tok!r} not modelled")
    base, off = m.group(1), int(m.group(2) or 0)
    if base.startswith("%") or "#" in base:
        return ("r", reg(prog, base), off)
    return ("s", base, off)


class Const:
    """An operand that is the same for every thread: indexable and iterable like a register list."""

    __slots__ = ("v",)

    def __init__(self, v) -> None:
        self.v = v

    def __getitem__(self, _):
        return self.v

    def __iter__(self):
        return repeat(self.v)


def getter(op: tuple):
    """cta -> a per-thread list or a Const."""
    kind, v = op
    if kind == "r":
        return lambda cta: cta.regs[v]
    if kind == "c":
        c = Const(v)
        return lambda cta: c
    return lambda cta: cta.special(v)


def dst(prog: Program, tok: str) -> int:
    o = operand(prog, tok)
    if o[0] != "r":
        raise ExecError(f"destination {tok} is not a register")
    return o[1]


def address_getter(prog: Program, tok: str):
    """cta -> per-thread address list (or Const) of a memory operand."""
    a = address(prog, tok)
    if a[0] == "r":
        idx, off = a[1], a[2]
        if off == 0:
            return lambda cta: cta.regs[idx]
        return lambda cta: [None if v is None else v + off for v in cta.regs[idx]]
    sym, off = a[1], a[2]
    return lambda cta: Const(cta.symbol_address(sym) + off)
