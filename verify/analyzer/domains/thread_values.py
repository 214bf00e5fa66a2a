# Exact values of the PTX registers that are functions of the thread index alone (values.py uses
# them to narrow address intervals). Swizzled shared-memory layouts compute an address as
# x + (bit ? -c : c) where the bit is one of x's own bits (x ^ c); intervals lose that relation and
# reach past the buffer. Here such a register is evaluated concretely for every thread index
# (%tid.x/y/z over their ranges, at most _MAX_THREADS combinations), and the hull of those values
# is its interval.
# Sound: a register qualifies only if it has one definition, unguarded, by an integer operation
# whose concrete semantics below are exact (PTX ISA: typed wrap-around, shift clamping, sign
# extension), and whose register operands qualify in turn, each defined before its use on every
# path (dominance); the leaves are immediates, symbols (0: addresses are relative to their
# symbol, as in intervals.py), the thread index and parameters a plan fixes. Such a register then
# holds the same value every time its definition runs, so every later read, in any loop
# iteration, sees f(thread index). Anything else (a loop counter, a load, shfl, a guarded
# definition, an operation not modelled) is not evaluated.
from __future__ import annotations

from ..frontend.kir import Function, Inst
from .intervals import Interval, int_type, parse_imm

_MAX_THREADS = 1024
_MAX_DEPTH = 64
_THREAD_SPECIALS = ("%tid.x", "%tid.y", "%tid.z")
_OPS = {"mov", "add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor", "not", "neg", "min", "max",
        "setp", "selp", "cvt", "ld"}
_CMP_SIGNED = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
               "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}
_CMP_UNSIGNED = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}


def _signed(v: int, bits: int) -> int:
    return v - (1 << bits) if v >> (bits - 1) & 1 else v


class ThreadValues:
    """Per function (and plan constants): register -> its value for every thread index, where it
    is a function of the thread index alone."""

    def __init__(self, func: Function, succ: dict[str, list[str]], consts: dict[tuple[str, int], int],
                 special: dict[str, Interval]) -> None:
        self.func, self.succ, self.consts = func, succ, consts
        ranges = [special.get(s, (0, 0)) for s in _THREAD_SPECIALS]
        count = 1
        for lo, hi in ranges:
            count *= hi - lo + 1
        self.threads: list[tuple[int, int, int]] = []
        if count <= _MAX_THREADS and all(lo >= 0 for lo, _ in ranges):
            self.threads = [(x, y, z) for z in range(ranges[2][0], ranges[2][1] + 1)
                            for y in range(ranges[1][0], ranges[1][1] + 1)
                            for x in range(ranges[0][0], ranges[0][1] + 1)]
        ndefs: dict[str, int] = {}
        self.defs: dict[str, tuple[Inst, str, int]] = {}  # register -> (its only definition, block, index)
        for b in func.blocks:
            for k, inst in enumerate(b.insts):
                for d in inst.dsts:
                    ndefs[d] = ndefs.get(d, 0) + 1
                    self.defs[d] = (inst, b.label, k)
        self.defs = {r: v for r, v in self.defs.items() if ndefs[r] == 1}
        self.memo: dict[str, tuple[list[int], int] | None] = {}  # register -> (values, bits)
        self._dom: dict[str, str] | None = None  # block -> its immediate dominator

    # -- dominance over the feasible control flow (Cooper, Harvey and Kennedy's iteration) --
    def _idom(self) -> dict[str, str]:
        if self._dom is None:
            entry = self.func.blocks[0].label
            post: list[str] = []
            seen = {entry}
            stack = [(entry, iter(self.succ.get(entry, ())))]
            while stack:
                lab, it = stack[-1]
                nxt = next((s for s in it if s not in seen), None)
                if nxt is None:
                    post.append(lab)
                    stack.pop()
                else:
                    seen.add(nxt)
                    stack.append((nxt, iter(self.succ.get(nxt, ()))))
            num = {lab: i for i, lab in enumerate(post)}
            preds: dict[str, list[str]] = {}
            for a, ss in self.succ.items():
                if a in num:
                    for s in ss:
                        preds.setdefault(s, []).append(a)
            idom = {entry: entry}

            def meet(a: str, b: str) -> str:
                while a != b:
                    while num[a] < num[b]:
                        a = idom[a]
                    while num[b] < num[a]:
                        b = idom[b]
                return a
            changed = True
            while changed:
                changed = False
                for lab in reversed(post[:-1]):
                    done = [p for p in preds.get(lab, ()) if p in idom]
                    new = done[0]
                    for p in done[1:]:
                        new = meet(p, new)
                    if idom.get(lab) != new:
                        idom[lab] = new
                        changed = True
            self._dom = idom
        return self._dom

    def _before(self, reg: str, block: str, index: int) -> bool:
        """reg's only definition runs before (block, index) on every path from the entry."""
        _, dblock, dindex = self.defs[reg]
        if dblock == block:
            return dindex < index
        idom = self._idom()
        if block not in idom:
            return False  # unreachable
        while block != idom[block]:
            block = idom[block]
            if block == dblock:
                return True
        return False

    # -- the interval at a use --
    def interval(self, reg: str, block: str, index: int) -> Interval | None:
        """The hull of reg's values over every thread, read at instruction `index` of `block`;
        None where reg is not a function of the thread index alone (or its hull would straddle
        the sign bit, where signed and unsigned readings differ)."""
        if not self.threads or reg not in self.defs or not self._before(reg, block, index):
            return None
        got = self._values(reg, 0)
        if got is None:
            return None
        vals, bits = got
        lo, hi = min(vals), max(vals)
        if bits < 2 or hi >> (bits - 1):
            return None
        return (lo, hi)

    def _values(self, reg: str, depth: int) -> tuple[list[int], int] | None:
        if reg in self.memo:
            return self.memo[reg]
        self.memo[reg] = None  # a cycle (impossible for dominating definitions) stays unevaluated
        out = None
        if depth < _MAX_DEPTH and reg in self.defs:
            inst, block, index = self.defs[reg]
            out = self._eval(inst, block, index, depth)
        self.memo[reg] = out
        return out

    def _operand(self, text: str, bits: int, block: str, index: int, depth: int) -> list[int] | None:
        """The operand's bits (truncated to `bits`) for every thread."""
        text = text.strip()
        mask = (1 << bits) - 1
        v = parse_imm(text)
        if v is not None:
            return [v & mask] * len(self.threads)
        if text in _THREAD_SPECIALS:
            i = _THREAD_SPECIALS.index(text)
            return [t[i] & mask for t in self.threads]
        if text.startswith("%") or "#s" in text:
            if text not in self.defs or not self._before(text, block, index):
                return None
            got = self._values(text, depth + 1)
            return [x & mask for x in got[0]] if got is not None else None
        if text in self.func.symbols:
            return [0] * len(self.threads)  # a symbol's address, relative to itself
        return None

    def _eval(self, inst: Inst, block: str, index: int, depth: int) -> tuple[list[int], int] | None:
        """(every thread's value, bits) of inst's one result, where its semantics below are exact."""
        parts = inst.op.split(".")
        base = parts[0]
        if inst.pred is not None or base not in _OPS or len(inst.dsts) != 1 or not inst.args or "|" in inst.args[0]:
            return None
        if any(p in ("cc", "sat", "f16", "f32", "f64", "bf16", "rn", "rz", "rm", "rp") for p in parts):
            return None  # carries, saturation, floating point: not modelled (mul.hi: below)
        if base == "ld":
            return self._param(inst, parts)
        tys = [int_type(p) for p in parts[1:] if int_type(p)]
        args = inst.args[1:]

        def opnd(k: int, ty: tuple[str, int]) -> list[int] | None:
            return self._operand(args[k], ty[1], block, index, depth) if k < len(args) else None

        if base == "setp":
            return self._setp(parts, tys, args, opnd)
        if "pred" in parts:
            if base not in ("and", "or", "xor", "not", "mov"):
                return None
            xs = [self._operand(x, 1, block, index, depth) for x in args]
            if any(x is None for x in xs):
                return None
            return _bitwise(base, xs, 1), 1
        if base == "cvt":
            return self._cvt(parts, tys, args, opnd)
        if not tys:
            return None
        ty = tys[0]
        bits = ty[1] * 2 if "wide" in parts else ty[1]
        if base in ("mul", "mad") and not ("lo" in parts or "wide" in parts):
            return None
        if base == "selp":
            if len(args) != 3:
                return None
            a, b, p = opnd(0, ty), opnd(1, ty), self._operand(args[2], 1, block, index, depth)
            if a is None or b is None or p is None:
                return None
            return [x if c else y for x, y, c in zip(a, b, p)], bits
        n = {"mov": 1, "not": 1, "neg": 1, "mad": 3}.get(base, 2)
        if len(args) != n or (base == "mov" and args[0].strip().startswith("{")):
            return None
        shift = base in ("shl", "shr")
        xs = [opnd(k, ("u", 32) if shift and k == 1 else ty) for k in range(n)]
        if base == "mad" and "wide" in parts:  # the addend has the wide type
            xs[2] = self._operand(args[2], bits, block, index, depth)
        if any(x is None for x in xs):
            return None
        return _arith(base, parts, ty, bits, xs)

    def _param(self, inst: Inst, parts: list[str]) -> tuple[list[int], int] | None:
        """ld.param of a parameter the plan fixes."""
        if inst.space != "param" or len(inst.params) != 1 or len(parts) != 3:
            return None
        ty = int_type(parts[2])
        c = self.consts.get(inst.params[0])
        if ty is None or c is None:
            return None
        return [c & ((1 << ty[1]) - 1)] * len(self.threads), ty[1]

    @staticmethod
    def _setp(parts: list[str], tys: list, args: list[str], opnd) -> tuple[list[int], int] | None:
        if len(parts) != 3 or not tys or len(args) != 2:
            return None  # setp.cmp.bool.type (a combined predicate) is not modelled
        cmp_, ty = parts[1], tys[0]
        sign = ty[0] == "s"
        if cmp_ in _CMP_UNSIGNED:
            cmp_, sign = _CMP_UNSIGNED[cmp_], False
        if cmp_ not in _CMP_SIGNED or (ty[0] == "b" and cmp_ not in ("eq", "ne")):
            return None
        a, b = opnd(0, ty), opnd(1, ty)
        if a is None or b is None:
            return None
        f = _CMP_SIGNED[cmp_]
        if sign:
            return [int(f(_signed(x, ty[1]), _signed(y, ty[1]))) for x, y in zip(a, b)], 1
        return [int(f(x, y)) for x, y in zip(a, b)], 1

    @staticmethod
    def _cvt(parts: list[str], tys: list, args: list[str], opnd) -> tuple[list[int], int] | None:
        if len(tys) != 2 or len(parts) != 3 or len(args) != 1:
            return None
        dty, sty = tys
        a = opnd(0, sty)
        if a is None:
            return None
        wide = [_signed(x, sty[1]) if sty[0] == "s" else x for x in a]
        return [x & ((1 << dty[1]) - 1) for x in wide], dty[1]


def _arith(base: str, parts: list[str], ty: tuple[str, int], bits: int, xs: list) -> tuple[list[int], int] | None:
    """An integer operation on every thread's operand bits xs (typed: signed where ty is)."""
    mask = (1 << bits) - 1
    sx = [[_signed(v, ty[1]) for v in x] for x in xs] if ty[0] == "s" else xs
    if base == "mad" and "wide" in parts and ty[0] == "s":
        sx[2] = [_signed(v, bits) for v in xs[2]]
    if base in ("and", "or", "xor", "not"):
        vals = _bitwise(base, xs, ty[1])
    elif base == "shr" and ty[0] == "s":
        vals = [a >> min(b, bits - 1) for a, b in zip(sx[0], xs[1])]
    elif base in _ARITH:
        vals = _ARITH[base](xs if base in ("mov", "shl", "shr") else sx, bits)
    else:
        return None
    return [v & mask for v in vals], bits


# base -> f(operands, bits) -> values, on signed operands where the type is (mov and shifts: bits)
_ARITH = {"mov": lambda x, w: x[0],
          "add": lambda x, w: [a + b for a, b in zip(x[0], x[1])],
          "sub": lambda x, w: [a - b for a, b in zip(x[0], x[1])],
          "neg": lambda x, w: [-a for a in x[0]],
          "mul": lambda x, w: [a * b for a, b in zip(x[0], x[1])],
          "mad": lambda x, w: [a * b + c for a, b, c in zip(x[0], x[1], x[2])],
          "min": lambda x, w: [min(a, b) for a, b in zip(x[0], x[1])],
          "max": lambda x, w: [max(a, b) for a, b in zip(x[0], x[1])],
          "shl": lambda x, w: [a << b if b < w else 0 for a, b in zip(x[0], x[1])],
          "shr": lambda x, w: [a >> b if b < w else 0 for a, b in zip(x[0], x[1])]}


def _bitwise(base: str, xs: list[list[int]], bits: int) -> list[int]:
    mask = (1 << bits) - 1
    if base == "not":
        return [~a & mask for a in xs[0]]
    if base == "mov":
        return xs[0]
    if base == "and":
        return [a & b for a, b in zip(xs[0], xs[1])]
    if base == "or":
        return [a | b for a, b in zip(xs[0], xs[1])]
    return [a ^ b for a, b in zip(xs[0], xs[1])]
