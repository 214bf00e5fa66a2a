# The memory model of the information-flow analysis (checks/flow.py): pointer provenance (roots:
# parameters, symbols, stack objects and the pointers stored in them, as sets per register), the
# cell of an access, (LLVM) constant byte offsets into stack objects, TMA tensor maps, and the
# shared bytes a wgmma descriptor reads.
from __future__ import annotations

import re

from ..frontend.kir import Function, Inst
from .values import ValueInfo


def pointer_roots(func: Function, insts: list[tuple[str, Inst]]) -> dict[str, set[tuple]]:
    """The roots (parameters, symbols) each register's value may derive from, as an address."""
    roots: dict[str, set[tuple]] = {}
    if func.kind == "llvm":
        for p in func.params:
            roots[p] = {("param", p, 0)}
    stored: dict[tuple, set[tuple]] = {}  # llvm: (stack object, byte offset or None) -> roots stored there
    offs = stack_offsets(func, insts) if func.kind == "llvm" else {}
    changed = True
    while changed:
        changed = False
        for _, inst in insts:
            new: set[tuple] = set()
            if func.kind == "llvm" and inst.kind == "store":
                for cell in roots_of(inst.addr, roots):
                    if cell[0] == "sym":
                        key = (cell, offs.get(inst.addr[0]) if inst.addr else None)
                        got = roots_of(inst.srcs[:1], roots)
                        if not got <= stored.get(key, set()):
                            stored[key] = stored.get(key, set()) | got
                            changed = True
                continue
            if inst.kind == "load" and inst.space == "param":
                new = {("param", p, off) for p, off in inst.params}
            elif inst.kind == "load":
                if func.kind == "llvm" and inst.op.startswith("load ptr"):
                    # a pointer read out of a struct parameter: the struct's pointed-to data; out
                    # of a stack object: the pointers stored there
                    at = roots_of(inst.addr, roots)
                    new = {("param", r[1], "*") for r in at if r[0] == "param"}
                    off = offs.get(inst.addr[0]) if inst.addr else None
                    for r in at:
                        if r[0] == "sym":  # the pointers stored at that field (any field if unknown)
                            for (cell, o), got in stored.items():
                                if cell == r and (off is None or o is None or o == off):
                                    new |= got
                    if not any(r[0] in ("param", "sym") for r in at):
                        new = {("loaded",)}
            elif inst.kind in ("move", "arith", "other", "call"):
                base = inst.op.split(".")[0].split()[0]
                if base in ("mad", "fma"):
                    carried = inst.srcs[-1:]  # the addend: base pointer + index * stride
                elif base == "getelementptr":
                    carried = inst.srcs[:1]  # the base pointer; the indices are integers
                elif base in ("add", "sub", "mov", "cvta", "cvt", "selp", "or", "getelementptr", "bitcast",
                              "phi", "select", "inttoptr", "ptrtoint", "addrspacecast", "mapa"):
                    carried = inst.srcs
                else:
                    carried = []
                for s in carried:
                    new |= roots.get(s, set())
                for sym in inst.symbols:
                    new.add(("param-sym", sym) if func.symbols.get(sym) == "param" else ("sym", sym))
            for d in inst.dsts:
                if not new <= roots.get(d, set()):
                    roots[d] = roots.get(d, set()) | new
                    changed = True
    return roots


def stack_offsets(func: Function, insts: list[tuple[str, Inst]]) -> dict[str, int]:
    """LLVM: register -> constant byte offset into the stack object it points to (alloca = 0,
    bitcast keeps it, getelementptr with constant indices adds llvm.py's inst.offset). A register
    absent here has an unknown offset."""
    offs: dict[str, int] = {}
    changed = True
    while changed:
        changed = False
        for _, inst in insts:
            if not inst.dsts:
                continue
            d = inst.dsts[0]
            v = None
            if inst.op == "alloca":
                v = 0
            elif inst.op in ("bitcast", "addrspacecast") and inst.srcs and inst.srcs[-1] in offs:
                v = offs[inst.srcs[-1]]
            elif inst.op == "getelementptr" and inst.args[:1] == ["const"] and inst.args[1] in offs:
                v = offs[inst.args[1]] + inst.offset
            if v is not None and offs.get(d) != v:
                if d in offs:  # defined twice with different offsets (phi): unknown
                    continue
                offs[d] = v
                changed = True
    return offs


def cell(roots, pointers: set[tuple], addr_regs: list[str], sym: str) -> tuple:
    """The cell an access touches: the one root its address derives from (a parameter, a symbol, a
    stack object), preferring roots used as pointers where there are several; else unknown or
    multi (a read of it may meet any write)."""
    rs = roots_of(addr_regs, roots) | ({("sym", sym)} if sym else set())
    if len(rs) > 1:
        rs = {r for r in rs if r in pointers} or rs
    if not rs:
        return ("unknown",)
    rs = {("param", r[1], "blob") if r[0] == "param-sym" else r for r in rs}
    if len(rs) == 1:
        return next(iter(rs))
    return ("multi",) + tuple(sorted(map(str, rs)))


def tensor_map(regs: list[str], iv, roots) -> tuple | None:
    """The cell of a TMA operand [tensor map, {coordinates}] whose map is a kernel parameter (its
    address derives from the parameter symbol, at a known offset): ("param", name, ("tmap", offset)),
    the global tensor that map describes. None for any other operand."""
    if len(regs) < 2 or iv is None or iv[0] != iv[1]:
        return None
    rs = roots.get(regs[0], set())
    params = {r for r in rs if r[0] == "param-sym"}
    if len(params) != 1 or len(rs) != 1:
        return None
    return ("param", next(iter(params))[1], ("tmap", iv[0]))


def wgmma_reads(inst: Inst, vi: ValueInfo | None) -> list[tuple[int, int]] | None:
    """Byte ranges (relative to the shared symbol) a wgmma's descriptor operands can read: start
    address (descriptor bits 0-13, x16) plus rows/8 core-matrix groups at the stride byte offset
    (bits 32-45, x16); A has 64 rows, B the instruction's N. None where not decoded (any byte)."""
    if vi is None:
        return None
    descs = vi.desc.get(id(inst))
    if not descs:
        return None
    m = re.search(r"\.m64n(\d+)k", inst.op)
    n = int(m.group(1)) if m else 256
    a_in_regs = inst.args[1].strip().startswith("{") if len(inst.args) > 1 else False
    rows = [n] if a_in_regs else [64, n]
    # imm-trans-b, the last operand: B is N-major (128-byte swizzle: n / 64 column blocks at the
    # leading byte offset, each 16 k rows = two 8-row groups at the stride byte offset).
    trans_b = [False, inst.args[-1].strip() == "1"] if len(inst.args) >= 7 else [False, False]
    out = []
    for i, (iv, r) in enumerate(zip(descs, rows)):
        if iv is None or iv[0] < 0 or (iv[0] >> 14) != (iv[1] >> 14) or (iv[0] >> 32) != (iv[1] >> 32):
            return None
        start_lo, start_hi = (iv[0] & 0x3FFF) * 16, (iv[1] & 0x3FFF) * 16
        sbo = ((iv[0] >> 32) & 0x3FFF) * 16
        lbo = ((iv[0] >> 16) & 0x3FFF) * 16
        if trans_b[i + (1 if a_in_regs else 0)] and sbo > 0:
            span = (max(r // 64, 1) - 1) * lbo + 2 * sbo
        else:
            span = (r + 7) // 8 * max(sbo, lbo, 128) + 1024
        out.append((start_lo, start_hi + span))
    return out


def roots_of(regs, roots) -> set[tuple]:
    out: set[tuple] = set()
    for r in regs:
        out |= roots.get(r, set())
    return out
