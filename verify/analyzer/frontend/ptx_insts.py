# The PTX instruction classifier of the front end (ptx.py): one statement -> kir.Inst, by a table
# of base opcode (the text before the first dot) -> reader (ISA 8.x): branches, exits, barriers
# and fences, calls, loads, stores, atomics, mbarrier operations, asynchronous copies (cp.async,
# TMA), moves; anything else computes registers from registers (arithmetic, with tensor-core
# instructions and floating-point rounding marked). Inline-asm scopes ({ .reg .pred p; ... }) rename
# their local registers (Scope).
from __future__ import annotations

import re

from .kir import Inst, split_outside

_FLOAT_TYPES = ("f16", "f16x2", "bf16", "bf16x2", "f32", "f64", "tf32", "e4m3", "e5m2", "e4m3x2", "e5m2x2")
_SPECIAL = re.compile(
    r"^%(tid|ntid|laneid|warpid|nwarpid|ctaid|nctaid|smid|nsmid|gridid|clusterid|nclusterid|cluster_ctaid|"
    r"cluster_nctaid|cluster_ctarank|cluster_nctarank|is_explicit_cluster|lanemask_\w+|clock|clock64|"
    r"globaltimer\w*|pm\d|envreg\d+|total_smem_size|dynamic_smem_size|aggr_smem_size|reserved_smem\w*)"
    r"(\.[xyz])?$"
)
_VEC = re.compile(r"\.v(\d)\.")
_TOKEN = re.compile(r"%[A-Za-z_$][\w$]*(?:\.[xyzw])?|\b[A-Za-z_$][\w$]*\b")
_MEM = re.compile(r"^([%\w$.]+)\s*(?:\+\s*(-?\d+))?$")
_TYPE_PART = re.compile(r"^(b|s|u|f|bf)\d+(x\d+)?$|^pred$|^tf32$|^e[45]m[23](x2)?$")
_NAME = re.compile(r"%?[A-Za-z_$][\w$]*")
_GUARD = re.compile(r"^@(!?)(%?[\w$]+)\s+(.*)$")
_WORD = re.compile(r"\b[A-Za-z_$][\w$]*\b")
_TYPES: dict[str, list[str]] = {}  # opcode -> its type parts (read once per opcode)
_WIDTHS: dict[str, int] = {}
_SPACES = ("shared::cluster", "shared::cta", "shared", "global", "local", "param", "const")


class Scope:
    """The inline-asm scopes open at a statement: name -> its unique name, innermost last."""

    def __init__(self) -> None:
        self.stack: list[dict[str, str]] = []
        self.counter = 0

    def rename(self, name: str) -> str:
        for frame in reversed(self.stack):
            if name in frame:
                return frame[name]
        return name


def _regs_in(operand: str, scope: Scope) -> list[str]:
    """Registers (or scoped names) in one operand, renamed for inline-asm scopes."""
    regs = []
    for tok in _TOKEN.findall(operand):
        if tok.startswith("%") or scope.rename(tok) != tok:
            regs.append(scope.rename(tok))
    return regs


def _mem_operand(operand: str, scope: Scope):
    """[base+off] -> (registers, symbol, offset)."""
    inner = operand.strip()[1:-1].strip()
    m = _MEM.match(inner)
    if m:
        base, off = m.group(1), int(m.group(2) or 0)
        if base.startswith("%") or scope.rename(base) != base:
            return [scope.rename(base)], None, off
        return [], base, off
    return _regs_in(inner, scope), None, 0


def _types_of(op: str) -> list[str]:
    got = _TYPES.get(op)
    if got is None:
        got = _TYPES[op] = [p for p in op.split(".")[1:] if _TYPE_PART.match(p)]
    return got


def _rename_all(operand: str, scope: Scope) -> str:
    if not scope.stack:
        return operand.strip()
    return _NAME.sub(lambda m: scope.rename(m.group(0)), operand.strip())


def _access_width(op: str) -> int:
    """Bytes one load/store moves (vector count x element size); 0 when not a plain access.
    ldmatrix/stmatrix: each thread's address names one 16-byte row of an 8x8 b16 matrix."""
    got = _WIDTHS.get(op)
    if got is None:
        got = _WIDTHS[op] = _width_of(op)
    return got


def _width_of(op: str) -> int:
    if op.startswith("ldmatrix") or op.startswith("stmatrix"):
        return 16
    t = _types_of(op)
    if not t:
        return 0
    m = re.match(r"^[a-z]+?(\d+)", t[-1])
    bits = int(m.group(1)) if m else 0
    if "x" in t[-1]:
        bits *= int(t[-1].split("x")[1])
    v = _VEC.search(op + ".")
    return bits // 8 * (int(v.group(1)) if v else 1)


class _Stmt:
    """One statement being read: its opcode, operands and the scope and symbols it is read in."""

    def __init__(self, inst: Inst, rest: str, scope: Scope, symbols: dict[str, str]) -> None:
        self.inst, self.op, self.rest = inst, inst.op, rest
        self.base = self.op.split(".")[0]
        self.ops = split_outside(rest, "{[", "}]")
        self.scope, self.symbols = scope, symbols
        self.any_float = any(t in _FLOAT_TYPES for t in _types_of(self.op))

    def regs(self, o: str) -> list[str]:
        return _regs_in(o, self.scope)

    def memory(self, o: str):
        """A memory operand's (registers, symbol, offset); the symbol is recorded."""
        rs, sym, off = _mem_operand(o, self.scope)
        if sym:
            self.inst.symbols.append(sym)
        return rs, sym, off

    def space_of(self, sym: str | None, default: str) -> str:
        for sp in _SPACES:
            if f".{sp}" in self.op:
                return sp.split("::")[0]
        if sym and sym in self.symbols:
            return self.symbols[sym]
        return default


def parse_inst(stmt: str, scope: Scope, symbols: dict[str, str]) -> Inst:
    """One statement (no trailing ';', labels apart) as a kir.Inst."""
    pred = None
    neg = False
    pm = _GUARD.match(stmt)
    if pm:
        pred = scope.rename(pm.group(2))
        neg = pm.group(1) == "!"
        stmt = pm.group(3)
    parts = stmt.split(None, 1)
    inst = Inst(op=parts[0], kind="other", pred=pred)
    inst.pred_neg = neg
    s = _Stmt(inst, parts[1] if len(parts) > 1 else "", scope, symbols)
    inst.args = [_rename_all(o, scope) for o in s.ops]
    inst.width = _access_width(s.op)
    return _READERS.get(s.base, _arith)(s)


# ---- control ----

def _branch(s: _Stmt) -> Inst:
    s.inst.kind = "branch"
    s.inst.targets = [t.strip() for t in s.ops if t.strip().startswith("$") or re.match(r"^[\w$]+$", t.strip())]
    return s.inst


def _ret(s: _Stmt) -> Inst:
    s.inst.kind = "ret"
    return s.inst


def _barrier(s: _Stmt) -> Inst:
    """Barriers, fences and hints: they order or hint, and move no value."""
    inst = s.inst
    inst.kind = "barrier"
    for o in s.ops:
        if o.startswith("["):
            s.memory(o)
        else:
            inst.srcs += s.regs(o)
    if s.base == "createpolicy":  # a cache policy: a hint, moves no value
        inst.kind = "other"
        inst.dsts = s.regs(s.ops[0]) if s.ops else []
        inst.srcs = []
    return inst


def _call(s: _Stmt) -> Inst:
    inst = s.inst
    inst.kind = "call"
    m = re.search(r"([\w$]+)\s*,?\s*\(", s.rest) or re.search(r"\b([\w$]+)\b", s.rest)
    inst.callee = m.group(1) if m else "?"
    inst.srcs = [r for o in s.ops for r in s.regs(o)]
    return inst


# ---- memory ----

def _load(s: _Stmt) -> Inst:
    inst = s.inst
    inst.kind = "load"
    inst.dsts = s.regs(s.ops[0])
    rs, sym, off = s.memory(s.ops[1])
    inst.addr = rs
    inst.offset = off
    inst.mem_sym = sym or ""
    inst.space = s.space_of(sym, "generic")
    if inst.space == "param" and sym:
        inst.params.append((sym, off))
    inst.fp_dst = s.any_float
    return inst


def _store(s: _Stmt) -> Inst:
    inst = s.inst
    inst.kind = "store"
    rs, sym, off = s.memory(s.ops[0])
    inst.addr = rs
    inst.offset = off
    inst.mem_sym = sym or ""
    inst.space = s.space_of(sym, "generic")
    inst.srcs = [r for o in s.ops[1:] for r in s.regs(o)]
    return inst


def _atomic(s: _Stmt) -> Inst:
    """atom (old value returned), red and cp.reduce (none)."""
    inst, ops = s.inst, s.ops
    inst.kind = "atomic"
    inst.fp = s.any_float
    if s.base == "atom":
        inst.dsts = s.regs(ops[0])
        rs, sym, off = s.memory(ops[1])
        inst.srcs = [r for o in ops[2:] for r in s.regs(o)]
    else:
        rs, sym, off = s.memory(ops[0])
        inst.srcs = [r for o in ops[1:] for r in s.regs(o)]
    inst.addr = rs
    inst.offset = off
    inst.mem_sym = sym or ""
    inst.space = s.space_of(sym, "global")
    return inst


def _mbarrier(s: _Stmt) -> Inst:
    inst = s.inst
    inst.kind = "other"
    if s.ops and not s.ops[0].startswith("["):
        inst.dsts = s.regs(s.ops[0])
        for o in s.ops[1:]:
            if o.startswith("["):
                s.memory(o)
    inst.special = ["%mbarrier_phase"]  # completion state: timing, not data
    return inst


def _cp(s: _Stmt) -> Inst:
    """cp.reduce (an atomic), cp.async.mbarrier (a barrier arrival), the commits and waits
    (barriers), else cp.async / cp.async.bulk(.tensor): memory to memory."""
    op = s.op
    if op.startswith("cp.reduce"):
        return _atomic(s)
    if op.startswith("cp.async.mbarrier"):
        return _mbarrier(s)
    if op.startswith("cp.async.commit_group") or op.startswith("cp.async.wait") or \
            op.startswith("cp.async.bulk.commit_group") or op.startswith("cp.async.bulk.wait_group"):
        s.inst.kind = "barrier"
        return s.inst
    return _copy(s)


def _copy(s: _Stmt) -> Inst:
    inst, op = s.inst, s.op
    inst.kind = "copy"
    mem_ops = [o for o in s.ops if o.startswith("[")]
    other = [o for o in s.ops if not o.startswith("[")]
    dst = mem_ops[0] if mem_ops else ""
    src = mem_ops[1] if len(mem_ops) > 1 else ""
    drs, dsym, doff = s.memory(dst) if dst else ([], None, 0)
    inst.dst_addr = drs
    inst.dst_offset = doff
    srs, ssym, soff = s.memory(src) if src else ([], None, 0)
    inst.addr = srs
    inst.offset = soff
    m_size = re.match(r"^\s*(\d+)\s*$", other[0]) if other else None
    inst.width = int(m_size.group(1)) if m_size and op.startswith("cp.async.c") else 0
    # cp.async.ca/cg.shared.global [dst], [src], size{, src-size}: src-size 0 zero-fills: data.
    if op.startswith("cp.async.ca") or op.startswith("cp.async.cg"):
        inst.srcs = [r for o in other[1:] for r in s.regs(o)]
    else:  # bulk / tensor: multicast masks, cache hints, byte counts: addresses and hints
        inst.addr = srs + [r for o in other for r in s.regs(o)]
    spaces = re.findall(r"\.(shared::cluster|shared::cta|shared|global)", op)
    inst.dst_space = spaces[0].split("::")[0] if spaces else "shared"
    inst.space = spaces[1].split("::")[0] if len(spaces) > 1 else "global"
    inst.mem_sym = ssym or ""
    inst.dst_sym = dsym or ""
    return inst


# ---- registers ----

def _mov(s: _Stmt) -> Inst:
    if len(s.ops) != 2:
        return _arith(s)
    inst = s.inst
    inst.kind = "move"
    inst.dsts = s.regs(s.ops[0])
    src = s.ops[1].strip()
    if _SPECIAL.match(src):
        inst.special.append(src)
    elif src.startswith("%") or s.scope.rename(src) != src:
        inst.srcs = s.regs(src)
    elif re.match(r"^[A-Za-z_$][\w$]*$", src):
        inst.symbols.append(src)  # the address of a symbol
    elif src.startswith("{"):
        inst.srcs = s.regs(src)
    inst.fp_dst = s.any_float
    return inst


def _wgmma(s: _Stmt) -> Inst:
    if s.op.startswith(("wgmma.fence", "wgmma.commit_group", "wgmma.wait_group")):
        s.inst.kind = "barrier"
        return s.inst
    return _arith(s)


def _tensor_core(s: _Stmt) -> Inst:
    """mma, wgmma: floating-point arithmetic; wgmma's descriptors are addresses of its operand
    tiles, and its accumulator is read (scale-d) and written."""
    inst = s.inst
    inst.fp = True
    inst.fp_dst = True
    inst.dsts = s.regs(s.ops[0])
    for idx, o in enumerate(s.ops[1:], start=1):
        rs = s.regs(o)
        if s.base == "wgmma" and not o.startswith("{") and idx <= 2:
            inst.addr += rs
            inst.ignored_srcs += rs
        else:
            inst.srcs += rs
    if s.base == "wgmma" and ".sync" in s.op and "mma_async" in s.op:
        inst.srcs += inst.dsts
    return inst


def _arith(s: _Stmt) -> Inst:
    """Everything else computes registers from registers."""
    inst, base = s.inst, s.base
    inst.kind = "arith"
    if base in ("mma", "wgmma"):
        return _tensor_core(s)
    dst_ops = s.ops[:1]
    if base in ("setp", "set") and dst_ops and "|" in dst_ops[0]:
        dst_ops = [d for d in dst_ops[0].split("|")]
    inst.dsts = [r for o in dst_ops for r in s.regs(o)]
    for o in s.ops[1:]:
        if _SPECIAL.match(o.strip()):
            inst.special.append(o.strip())
        else:
            inst.srcs += s.regs(o)
            for tok in _WORD.findall(o):
                if tok in s.symbols:
                    inst.symbols.append(tok)
    if base == "activemask":
        inst.special.append("%activemask")
    if base == "cvta":
        inst.kind = "move"
    # Floating-point arithmetic and rounding: its result's bits depend on the operation order.
    if s.any_float and base not in ("setp", "set", "testp", "selp", "slct", "mov", "shfl", "prmt"):
        inst.fp = True
    if base == "cvt" and s.any_float:
        inst.fp = True
    inst.fp_dst = s.any_float and base not in ("setp", "set", "testp")
    if base in ("selp", "slct") and s.any_float:
        inst.fp = True  # a floating-point choice: its predicate shapes the value
    return inst


_BARRIERS = ("bar", "barrier", "membar", "fence", "griddepcontrol", "setmaxnreg", "nanosleep", "pmevent", "prefetch",
             "prefetchu", "discard", "applypriority", "createpolicy", "tensormap")
# base opcode -> reader; anything else: _arith
_READERS = {"bra": _branch, "brx": _branch, "ret": _ret, "exit": _ret, "trap": _ret,
            **{b: _barrier for b in _BARRIERS}, "wgmma": _wgmma, "call": _call,
            **{b: _load for b in ("ld", "ldu", "ldmatrix", "tex", "tld4", "suld")},
            **{b: _store for b in ("st", "stmatrix", "sust")}, "atom": _atomic, "red": _atomic,
            "mbarrier": _mbarrier, "cp": _cp, "mov": _mov}
