# Integer value analysis of a PTX function (abstract interpretation over intervals): for every
# integer and predicate register, at every instruction, an interval that contains every value it
# can hold, given the spec's constants (plan parameters fixed per plan, template constants are
# already literals in the PTX) and the ranges of the special registers (%tid < .maxntid ...).
# Used for
#   - feasible control flow: a branch whose predicate is constant has one successor (a plan that
#     fixes split = 0 removes the split path); a guarded instruction whose guard is constant
#     false never runs;
#   - memory cells: the byte range, relative to its shared/local symbol, that every access can
#     touch, so that distinct fields of one shared struct (or the stages of a ring) are distinct
#     cells (flow.py).
# Sound: a register absent from a state may hold anything; every transfer function returns an
# interval containing every result of the operation on values of its operand intervals, wrapping
# to the whole type range where the result can overflow; loops are widened (to the function's own
# constants, then to the type range) so the fixpoint is reached.
# Branch conditions refine the registers they compare on the edge they guard (the setp in the
# same block, its operands not redefined before the branch).
from __future__ import annotations

import re
from dataclasses import dataclass, field

from kir import Function, Inst

Interval = tuple[int, int]
_INT_TYPE = re.compile(r"^(s|u|b)(8|16|32|64)$")
_IMM = re.compile(r"^(-?)(0[xX][0-9a-fA-F]+|\d+)U?$")
_WIDEN_AFTER = 4  # visits of a block before its entry state is widened to the function's constants
_WIDEN_FULL = 14  # ... and then to the whole type range

SPECIAL_RANGES = {
    "%laneid": (0, 31), "%warpid": (0, 63), "%nwarpid": (1, 64), "%smid": (0, 1023), "%nsmid": (1, 1024),
    "%ctaid.x": (0, 2**31 - 1), "%ctaid.y": (0, 65534), "%ctaid.z": (0, 65534),
    "%nctaid.x": (1, 2**31 - 1), "%nctaid.y": (1, 65535), "%nctaid.z": (1, 65535),
    "%clusterid.x": (0, 2**31 - 1), "%clusterid.y": (0, 65534), "%clusterid.z": (0, 65534),
    "%nclusterid.x": (1, 2**31 - 1), "%nclusterid.y": (1, 65535), "%nclusterid.z": (1, 65535),
    "%cluster_ctaid.x": (0, 15), "%cluster_ctaid.y": (0, 15), "%cluster_ctaid.z": (0, 15),
    "%cluster_nctaid.x": (1, 16), "%cluster_nctaid.y": (1, 16), "%cluster_nctaid.z": (1, 16),
    "%cluster_ctarank": (0, 15), "%cluster_nctarank": (1, 16),
}


_INT_TYPE_CACHE: dict[str, tuple[str, int] | None] = {}


def int_type(t: str) -> tuple[str, int] | None:
    if t not in _INT_TYPE_CACHE:
        m = _INT_TYPE.match(t)
        _INT_TYPE_CACHE[t] = (m.group(1), int(m.group(2))) if m else None
    return _INT_TYPE_CACHE[t]


def type_range(sign: str, bits: int) -> Interval:
    """Values of the type; untyped bits (b) are read as either signed or unsigned (fit())."""
    if sign == "s":
        return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if sign == "b":
        return (-(1 << (bits - 1)), (1 << bits) - 1)
    return (0, (1 << bits) - 1)


def fit(iv: Interval | None, ty: tuple[str, int]) -> Interval | None:
    """The interval as values of type ty (two's complement wrap), or None (any value). An untyped
    (b) interval lies wholly in the signed or wholly in the unsigned reading of its bits."""
    if iv is None:
        return None
    if ty[0] == "b":
        return fit(iv, ("s", ty[1])) if iv[0] < 0 else (fit(iv, ("u", ty[1])) or fit(iv, ("s", ty[1])))
    lo, hi = iv
    tlo, thi = type_range(*ty)
    if tlo <= lo and hi <= thi:
        return iv
    size = 1 << ty[1]
    k = (lo - tlo) // size
    lo2, hi2 = lo - k * size, hi - k * size
    if tlo <= lo2 and hi2 <= thi:
        return (lo2, hi2)
    return None


def parse_imm(text: str) -> int | None:
    m = _IMM.match(text.strip())
    if not m:
        return None
    v = int(m.group(2), 0)
    return -v if m.group(1) else v


@dataclass
class ValueInfo:
    """What the value analysis established for one function."""

    feasible: dict[str, list[str]]  # block -> successors that can be taken
    reachable: set[str]
    never_runs: set[int] = field(default_factory=set)  # id(inst) of guarded insts whose guard is always false
    addr: dict[int, Interval | None] = field(default_factory=dict)  # id(inst) -> its address register's interval
    dst_addr: dict[int, Interval | None] = field(default_factory=dict)  # copies: the destination's
    desc: dict[int, list[Interval | None]] = field(default_factory=dict)  # wgmma: intervals of descriptor operands
    shfl_lane: dict[int, Interval | None] = field(default_factory=dict)  # shfl: the source lane operand
    wgmma_scale_d: dict[int, Interval | None] = field(default_factory=dict)  # wgmma: its scale-d predicate
    operands: dict[int, list[Interval | None]] = field(default_factory=dict)  # integer add/sub/and: operand intervals
    first_reg: dict[int, tuple[Interval | None, Interval | None]] = field(default_factory=dict)  # copies: the
    # intervals of the first register of the source and of the destination operand (TMA: the tensor map)
    const_pred: dict[int, int] = field(default_factory=dict)  # id(branch inst) -> 0/1 where decided


def _mul_iv(a: Interval, b: Interval) -> Interval:
    c = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return (min(c), max(c))


def _tdiv(x: int, y: int) -> int:
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y > 0) else -q


def _bits_cover(hi: int) -> int:
    return (1 << max(hi, 0).bit_length()) - 1


class _Eval:
    def __init__(self, func: Function, consts: dict[tuple[str, int], int], special: dict[str, Interval]):
        self.func = func
        self.consts = consts
        self.special = special
        self.thresholds = self._constants()

    def _constants(self) -> list[int]:
        """Widening thresholds: the constants the function compares with (loop bounds, ring sizes)."""
        vals = {0, 1, -1}
        for b in self.func.blocks:
            for inst in b.insts:
                if not inst.op.startswith("setp"):
                    continue
                for a in inst.args:
                    v = parse_imm(a)
                    if v is not None and abs(v) < 2**40:
                        vals |= {v, v - 1, v + 1}
        return sorted(vals)

    # -- operands --
    def operand(self, st: dict, text: str, ty: tuple[str, int] | None) -> Interval | None:
        text = text.strip()
        v = parse_imm(text)
        if v is not None:
            return fit((v, v), ty) if ty else (v, v)
        if text in self.special or text.split(".")[0] in self.special:
            iv = self.special.get(text) or self.special.get(text.split(".")[0])
            return fit(iv, ty) if ty else iv
        if text.startswith("%") or "#s" in text:
            iv = st.get(text)
            return fit(iv, ty) if ty and iv is not None else iv
        if re.match(r"^[A-Za-z_$][\w$]*$", text):
            return (0, 0)  # a symbol's address: 0 relative to itself (its root, in flow.py)
        return None

    # -- one instruction --
    def transfer(self, st: dict, inst: Inst, setp_of: dict | None = None) -> None:
        op = inst.op
        parts = op.split(".")
        base = parts[0]
        tys = [int_type(p) for p in parts[1:] if int_type(p)]
        dst_names = [d.strip() for d in inst.args[0].split("|")] if inst.args else []
        if inst.kind in ("branch", "ret", "barrier", "store"):
            return
        if inst.kind == "load" and inst.space == "param" and inst.params and inst.dsts:
            p, off = inst.params[0]
            size = inst.width // max(len(inst.dsts), 1) if inst.width else 4
            for i, d in enumerate(inst.dsts):
                c = self.consts.get((p, off + i * size))
                self._set(st, d, (c, c) if c is not None else None)
            return
        if inst.kind in ("load", "atomic", "call", "copy") or base in ("wgmma", "mma", "ldmatrix"):
            for d in inst.dsts:
                self._set(st, d, None)
            return
        if base == "setp" and len(dst_names) > 1:  # %p|%q: the comparison and its negation
            r0 = self._setp(st, inst, parts)
            self._set(st, dst_names[0], r0)
            self._set(st, dst_names[1], (1 - r0[1], 1 - r0[0]))
            return
        res = self._compute(st, inst, base, parts, tys, setp_of)
        res = self._magic_remainder(st, inst, base, parts, res, setp_of)
        if base in ("shfl", "elect", "vote", "match", "redux") and len(dst_names) > 1:
            # %r|%p: the value and a predicate
            self._set(st, dst_names[0], res)
            for d in dst_names[1:]:
                self._set(st, d, (0, 1))
            for d in inst.dsts:
                if d not in dst_names:
                    self._set(st, d, None)
            return
        if base == "mov" and inst.args and inst.args[0].startswith("{"):  # unpack a 64-bit value
            regs = [r.strip() for r in inst.args[0].strip("{}").split(",")]
            src = self.operand(st, inst.args[1], None)
            n = len(regs)
            bits = 64 // max(n, 1)
            for i, r in enumerate(regs):
                if src is not None and src[0] >= 0 and (src[0] >> (bits * (i + 1))) == (src[1] >> (bits * (i + 1))):
                    lo_part = (src[0] >> (bits * i)) & ((1 << bits) - 1)
                    hi_part = (src[1] >> (bits * i)) & ((1 << bits) - 1)
                    self._set(st, r, (lo_part, hi_part) if lo_part <= hi_part else None)
                else:
                    self._set(st, r, None)
            return
        m = self._mask_of(st, inst, base, parts) if res is None or res[0] >= 0 else None
        if m is not None:
            res = (0, m) if res is None else (res[0], min(res[1], m)) if res[0] <= m else res
        for d in inst.dsts:
            self._set(st, d, res, m)

    def _magic_remainder(self, st, inst: Inst, base: str, parts: list[str], res, setp_of):
        """x - (x * M >> S) * d, nvcc's x % d by a magic multiplier: [0, d - 1] where the multiplier
        divides exactly over x's range (Granlund-Montgomery: M * d >= 2^S, (M * d - 2^S) * x_max < 2^S).
        Facts live in setp_of["#sym"] for the block (straight-line code), dropped when a register
        they name is redefined."""
        if setp_of is None:
            return res
        sym = setp_of.setdefault("#sym", {})
        dst = inst.dsts[0] if inst.dsts else None
        a = [x.strip() for x in inst.args[1:]]
        fact = None
        if base == "mul" and "wide" in parts and "u32" in parts and len(a) == 2:
            m = parse_imm(a[1])
            if m is not None:
                fact = ("mulw", a[0], m % (1 << 32))
        elif base == "shr" and "u64" in parts and len(a) == 2 and sym.get(a[0], ("",))[0] == "mulw":
            sh = parse_imm(a[1])
            if sh is not None:
                fact = ("divq", sym[a[0]][1], sym[a[0]][2], sh)
        elif base == "cvt" and "u32" in parts and "u64" in parts and len(a) == 1 and sym.get(a[0], ("",))[0] == "divq":
            fact = sym[a[0]]
        elif base == "mul" and "lo" in parts and len(a) == 2 and sym.get(a[0], ("",))[0] == "divq":
            d = parse_imm(a[1])
            if d is not None and d > 0:
                fact = ("divmul",) + sym[a[0]][1:] + (d,)
        elif base == "sub" and len(a) == 2 and sym.get(a[1], ("",))[0] == "divmul" and \
                self._same(sym, sym[a[1]][1], a[0]):
            _, x, m, sh, d = sym[a[1]]
            xv = self.operand(st, x, ("u", 32)) or (0, (1 << 32) - 1)
            if m * d >= (1 << sh) and (m * d - (1 << sh)) * xv[1] < (1 << sh):
                res = (0, min(d - 1, xv[1]))
        elif base == "sub" and len(a) == 2 and sym.get(a[1], ("",))[0] == "and" and self._same(sym, sym[a[1]][1], a[0]):
            # x - (x & M) = x & ~M: for x >= 0, in [0, min(x, ~M)] (nvcc's signed x % 2^k, x >= 0)
            ty = next((int_type(p) for p in parts[1:] if int_type(p)), ("s", 32))
            xv = self.operand(st, a[0], ty)
            notm = ~sym[a[1]][2] & ((1 << ty[1]) - 1)
            if xv is not None and xv[0] >= 0:
                res = (0, min(xv[1], _bits_cover(xv[1]) & notm))
        if base == "and" and len(a) == 2 and parse_imm(a[1]) is not None:
            fact = ("and", a[0], parse_imm(a[1]))
        elif base in ("add", "sub", "or", "xor") and len(a) == 2 and self.operand(st, a[1], None) == (0, 0):
            fact = ("alias", a[0])
        elif base == "add" and len(a) == 2 and self.operand(st, a[0], None) == (0, 0):
            fact = ("alias", a[1])
        elif base == "mov" and len(a) == 1 and (a[0].startswith("%") or "#s" in a[0]):
            fact = ("alias", a[0])
        for d in inst.dsts:
            for k in [k for k, f in sym.items() if k == d or (len(f) > 1 and f[1] == d)]:
                sym.pop(k, None)
        if fact is not None and dst:
            sym[dst] = fact
        return res

    @staticmethod
    def _same(sym: dict, x: str, y: str) -> bool:
        """x and y hold the same value (alias facts of the block)."""
        def root(r: str) -> str:
            for _ in range(8):
                f = sym.get(r)
                if not f or f[0] != "alias":
                    break
                r = f[1]
            return r
        return root(x) == root(y)

    def _set(self, st: dict, reg: str, iv: Interval | None, mask: int | None = None) -> None:
        if iv is None:
            st.pop(reg, None)
        else:
            st[reg] = iv
        if mask is None:
            st.pop(("#m", reg), None)
        else:
            st[("#m", reg)] = mask

    def _maskv(self, st: dict, text: str) -> int | None:
        """Bits a non-negative operand may have set (None: unknown or possibly negative)."""
        text = text.strip()
        v = parse_imm(text)
        if v is not None:
            return v if v >= 0 else None
        if text.startswith("%") or "#s" in text:
            m = st.get(("#m", text))
            if m is not None:
                return m
            iv = st.get(text)
            return _bits_cover(iv[1]) if iv is not None and iv[0] >= 0 else None
        return None

    def _mask_of(self, st: dict, inst: Inst, base: str, parts: list[str]) -> int | None:
        """Known-zero bits of the result (as a mask of the bits it may set), for the bitwise index
        arithmetic of swizzled layouts, where intervals alone lose too much."""
        if "pred" in parts or not inst.dsts or len(inst.args) < 2:
            return None
        a = [x.strip() for x in inst.args[1:]]
        ms = [self._maskv(st, x) for x in a]
        tys = [int_type(p) for p in parts[1:] if int_type(p)]
        bits = tys[0][1] if tys else 64
        full = (1 << bits) - 1
        if base == "and" and len(ms) == 2:
            known = [m for m in ms if m is not None]
            return (known[0] & known[1] if len(known) == 2 else known[0]) if known else None
        if None in ms[:2]:
            return None
        if base == "bfi" and len(ms) == 4:  # bfi d, a, b, pos, len: a's low len bits into b at pos
            pos, ln = parse_imm(a[2]), parse_imm(a[3])
            if pos is None or ln is None:
                return None
            field_mask = ((1 << ln) - 1) << pos
            return ((ms[1] & ~field_mask) | ((ms[0] << pos) & field_mask)) & full
        if base == "prmt" and len(ms) >= 3 and "b32" in parts and len(parts) == 2:  # byte permute, default mode
            sel = parse_imm(a[2])
            if sel is None:
                return None
            out = 0
            for i in range(4):
                nib = (sel >> (4 * i)) & 0xF
                if nib & 8:
                    out |= 0xFF << (8 * i)  # sign replicate: any byte
                    continue
                src = ms[0] if nib < 4 else ms[1]
                out |= ((src >> (8 * (nib & 3))) & 0xFF) << (8 * i)
            return out
        if base in ("or", "xor", "selp") and len(ms) >= 2:
            return ms[0] | ms[1]
        if base == "add" and len(ms) == 2 and ms[0] & ms[1] == 0:
            return (ms[0] | ms[1]) & full
        if base == "shl" and len(ms) == 2:
            sh = parse_imm(a[1])
            return (ms[0] << sh) & full if sh is not None and sh < bits else None
        if base == "shr" and len(ms) == 2:
            sh = parse_imm(a[1])
            return ms[0] >> sh if sh is not None else None
        if base in ("mov", "cvta") and len(ms) == 1:
            return ms[0] & full
        if base == "cvt" and len(ms) == 1 and len(tys) == 2:
            return ms[0] & full if ms[0] < (1 << (min(tys[0][1], tys[1][1]) - 1)) else None
        return None

    def _compute(self, st, inst: Inst, base: str, parts: list[str], tys, setp_of=None) -> Interval | None:
        args = inst.args[1:]
        dty = tys[0] if tys else None
        sty = tys[-1] if tys else None
        if "wide" in parts and sty:
            dty = (sty[0], sty[1] * 2)
        if base == "cvt":
            all_t = [p for p in parts[1:] if re.match(r"^(s|u|b|f|bf)\d+(x\d+)?$", p)]
            if len(all_t) < 2 or not int_type(all_t[0]) or not int_type(all_t[1]):
                return None  # to or from floating point: not an integer value
            dty, sty = int_type(all_t[0]), int_type(all_t[1])
        if base == "setp":
            return self._setp(st, inst, parts)
        if base in ("and", "or", "xor", "not") and "pred" in parts:
            xs = [self.operand(st, a, None) for a in args]
            if any(x is None for x in xs):
                return (0, 1)
            if base == "not":
                return (1 - xs[0][1], 1 - xs[0][0])
            if all(x[0] == x[1] for x in xs):
                a, b = xs[0][0], xs[1][0]
                v = (a & b) if base == "and" else (a | b) if base == "or" else (a ^ b)
                return (v, v)
            if base == "and" and any(x == (0, 0) for x in xs):
                return (0, 0)
            if base == "or" and any(x == (1, 1) for x in xs):
                return (1, 1)
            return (0, 1)
        if base in ("selp", "slct"):
            if len(args) < 3:
                return None
            p = self.operand(st, args[2], None)
            a, b = self.operand(st, args[0], sty), self.operand(st, args[1], sty)
            if p == (1, 1):
                return a
            if p == (0, 0):
                return b
            setp = (setp_of or {}).get(args[2].strip())
            if setp is not None:  # each side under its condition (x == 11 ? 0 : x)
                st_t, st_f = self.refine(st, setp, True), self.refine(st, setp, False)
                a = self.operand(st_t, args[0], sty) if st_t is not None else None
                b = self.operand(st_f, args[1], sty) if st_f is not None else None
                if st_t is None:
                    return b
                if st_f is None:
                    return a
            if a is None or b is None:
                return None
            return (min(a[0], b[0]), max(a[1], b[1]))
        if base in ("mov", "cvta"):
            if not args:
                return None
            if args[0].startswith("{"):  # pack {lo, hi}
                regs = [r.strip() for r in args[0].strip("{}").split(",")]
                vals = [self.operand(st, r, None) for r in regs]
                if any(v is None or v[0] < 0 for v in vals) or len(vals) != 2:
                    return None
                bits = 32 if dty and dty[1] == 64 else 16
                if any(v[1] >= (1 << bits) for v in vals):
                    return None
                return ((vals[1][0] << bits) + vals[0][0], (vals[1][1] << bits) + vals[0][1])
            iv = self.operand(st, args[0], sty if base == "mov" else None)
            return fit(iv, dty) if iv is not None and dty else iv
        if base == "cvt":
            if not dty:
                return None
            iv = self.operand(st, args[0], sty) if sty else None
            return fit(iv, dty)
        if base in ("shfl",):
            return self.operand(st, args[0], dty) if args else None
        if base == "elect":
            return (0, 31)
        if not dty:
            return None
        xs = [self.operand(st, a, sty) for a in args]
        full = type_range(*dty)
        r: Interval | None = None
        if base in ("add", "sub", "mul", "mad", "min", "max", "neg", "abs") and any(x is None for x in xs[:3]):
            return None
        if base == "add" and len(xs) == 2:
            r = (xs[0][0] + xs[1][0], xs[0][1] + xs[1][1])
        elif base == "sub" and len(xs) == 2:
            r = (xs[0][0] - xs[1][1], xs[0][1] - xs[1][0])
        elif base == "mul" and len(xs) == 2:
            if "hi" in parts:
                return None
            r = _mul_iv(xs[0], xs[1])
        elif base == "mad" and len(xs) == 3:
            if "hi" in parts:
                return None
            p = _mul_iv(xs[0], xs[1])
            r = (p[0] + xs[2][0], p[1] + xs[2][1])
        elif base == "neg" and len(xs) == 1:
            r = (-xs[0][1], -xs[0][0])
        elif base == "abs" and len(xs) == 1:
            lo, hi = xs[0]
            r = (0 if lo <= 0 <= hi else min(abs(lo), abs(hi)), max(abs(lo), abs(hi)))
        elif base == "min" and len(xs) == 2:
            r = (min(xs[0][0], xs[1][0]), min(xs[0][1], xs[1][1]))
        elif base == "max" and len(xs) == 2:
            r = (max(xs[0][0], xs[1][0]), max(xs[0][1], xs[1][1]))
        elif base == "shl" and len(xs) == 2:
            sh = self.operand(st, args[1], ("u", 32))
            if xs[0] is None or sh is None or sh[0] != sh[1] or sh[0] >= dty[1]:
                return None
            r = (xs[0][0] << sh[0], xs[0][1] << sh[0])
        elif base == "shr" and len(xs) == 2:
            sh = self.operand(st, args[1], ("u", 32))
            if xs[0] is None or sh is None:
                return None
            if sh[0] == sh[1]:
                s = min(sh[0], dty[1] - 1) if dty[0] == "s" else sh[0]
                r = (xs[0][0] >> s, xs[0][1] >> s)
            elif xs[0][0] >= 0:
                r = (xs[0][0] >> sh[1], xs[0][1] >> sh[0])
            else:
                return None
        elif base == "and" and len(xs) == 2:
            a, b = xs
            for x, y in ((a, b), (b, a)):  # x & low-bit mask that covers x: x itself
                if x is not None and y is not None and y[0] == y[1] and x[0] >= 0 and y[0] >= 0 and \
                        y[0] & (y[0] + 1) == 0 and x[1] <= y[0]:
                    return x
            cands = []
            for x in (a, b):
                if x is not None and x[0] >= 0:
                    cands.append(x[1])
            if not cands:
                return None
            r = (0, min(cands))
        elif base in ("or", "xor") and len(xs) == 2:
            a, b = xs
            if a is None or b is None or a[0] < 0 or b[0] < 0:
                return None
            for x, y in ((a, b), (b, a)):  # a constant whose bits lie above x's: a sum
                if y[0] == y[1] and y[0] & _bits_cover(x[1]) == 0:
                    return fit((x[0] + y[0], x[1] + y[0]), dty)
            top = _bits_cover(max(a[1], b[1]))
            r = (max(a[0], b[0]) if base == "or" else 0, top)
        elif base == "not":
            return None
        elif base in ("div", "rem") and len(xs) == 2:
            a, b = xs
            if a is None or b is None or b[0] <= 0:
                return None
            if base == "div":
                c = [_tdiv(x, y) for x in a for y in b]
                r = (min(c), max(c))
            else:
                m = b[1] - 1
                r = (0, min(m, a[1])) if a[0] >= 0 else (-m, m)
        elif base in ("popc", "clz"):
            return (0, 64)
        elif base == "bfe" and len(args) == 3:
            ln = self.operand(st, args[2], ("u", 32))
            if ln and ln[0] == ln[1] and dty[0] != "s" and ln[0] < 64:
                return (0, (1 << ln[0]) - 1)
            return None
        else:
            return None
        if r[0] < full[0] or r[1] > full[1]:
            return fit(r, dty)
        return r

    def _setp(self, st, inst: Inst, parts: list[str]) -> Interval:
        cmp_ = parts[1] if len(parts) > 1 else ""
        ty = next((int_type(p) for p in parts[2:] if int_type(p)), None)
        if ty is None or len(inst.args) < 3 or len(parts) > 3:  # floats, or setp.cmp.bool.type: no refinement
            return (0, 1)
        a = self.operand(st, inst.args[1], ty)
        b = self.operand(st, inst.args[2], ty)
        if a is None or b is None:
            return (0, 1)
        return _decide(cmp_, a, b)

    # -- refinement on a branch edge --
    def refine(self, st: dict, setp: Inst, truth: bool) -> dict | None:
        """st where setp's comparison has the given truth; None where it cannot."""
        parts = setp.op.split(".")
        cmp_ = parts[1]
        ty = next((int_type(p) for p in parts[2:] if int_type(p)), None)
        if ty is None or len(setp.args) < 3 or len(parts) > 3:
            return st
        if not truth:
            cmp_ = _NEGATE.get(cmp_, "")
            if not cmp_:
                return st
        cmp_ = _UNSIGNED.get(cmp_, cmp_)
        a_txt, b_txt = setp.args[1].strip(), setp.args[2].strip()
        a = self.operand(st, a_txt, ty) or type_range(*ty)
        b = self.operand(st, b_txt, ty) or type_range(*ty)
        na, nb = a, b
        if cmp_ == "lt":
            na, nb = (a[0], min(a[1], b[1] - 1)), (max(b[0], a[0] + 1), b[1])
        elif cmp_ == "le":
            na, nb = (a[0], min(a[1], b[1])), (max(b[0], a[0]), b[1])
        elif cmp_ == "gt":
            na, nb = (max(a[0], b[0] + 1), a[1]), (b[0], min(b[1], a[1] - 1))
        elif cmp_ == "ge":
            na, nb = (max(a[0], b[0]), a[1]), (b[0], min(b[1], a[1]))
        elif cmp_ == "eq":
            lo, hi = max(a[0], b[0]), min(a[1], b[1])
            na = nb = (lo, hi)
        elif cmp_ == "ne":
            if b[0] == b[1]:
                if a[0] == b[0]:
                    na = (a[0] + 1, a[1])
                elif a[1] == b[0]:
                    na = (a[0], a[1] - 1)
            if a[0] == a[1]:
                if b[0] == a[0]:
                    nb = (b[0] + 1, b[1])
                elif b[1] == a[0]:
                    nb = (b[0], b[1] - 1)
        if na[0] > na[1] or nb[0] > nb[1]:
            return None  # the edge cannot be taken
        out = dict(st)
        for txt, old, new in ((a_txt, a, na), (b_txt, b, nb)):
            if (txt.startswith("%") or "#s" in txt) and new != old:
                cur = st.get(txt)
                if cur is not None and (cur[0] < type_range(*ty)[0] or cur[1] > type_range(*ty)[1]):
                    continue  # stored under another signedness: leave it
                out[txt] = new
        return out


_NEGATE = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq", "lo": "hs", "ls": "hi",
           "hi": "ls", "hs": "lo"}
_UNSIGNED = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}


def _decide(cmp_: str, a: Interval, b: Interval) -> Interval:
    cmp_ = _UNSIGNED.get(cmp_, cmp_)
    if cmp_ == "lt":
        return (1, 1) if a[1] < b[0] else (0, 0) if a[0] >= b[1] else (0, 1)
    if cmp_ == "le":
        return (1, 1) if a[1] <= b[0] else (0, 0) if a[0] > b[1] else (0, 1)
    if cmp_ == "gt":
        return (1, 1) if a[0] > b[1] else (0, 0) if a[1] <= b[0] else (0, 1)
    if cmp_ == "ge":
        return (1, 1) if a[0] >= b[1] else (0, 0) if a[1] < b[0] else (0, 1)
    if cmp_ == "eq":
        if a[0] == a[1] == b[0] == b[1]:
            return (1, 1)
        return (0, 0) if a[1] < b[0] or b[1] < a[0] else (0, 1)
    if cmp_ == "ne":
        if a[0] == a[1] == b[0] == b[1]:
            return (0, 0)
        return (1, 1) if a[1] < b[0] or b[1] < a[0] else (0, 1)
    return (0, 1)


def _join(a: dict | None, b: dict) -> dict:
    if a is None:
        return dict(b)
    out = {}
    for r in a.keys() & b.keys():
        x, y = a[r], b[r]
        if x == y:
            out[r] = x
        elif isinstance(x, int):  # a bit mask
            out[r] = x | y
        else:
            out[r] = (x[0] if x[0] < y[0] else y[0], x[1] if x[1] > y[1] else y[1])
    return out


def _widen(old: dict, new: dict, thresholds: list[int], full: bool) -> dict:
    import bisect
    out = {}
    for r, x in new.items():
        o = old.get(r)
        if o is None:
            continue
        if x == o or isinstance(x, int):  # masks: a lattice of finite height
            out[r] = x
            continue
        if full:
            continue
        lo, hi = x
        if lo < o[0]:
            i = bisect.bisect_right(thresholds, lo) - 1
            if i < 0:
                continue
            lo = thresholds[i]
        if hi > o[1]:
            i = bisect.bisect_left(thresholds, hi)
            if i >= len(thresholds):
                continue
            hi = thresholds[i]
        out[r] = (lo, hi)
    return out


def _edges(func: Function):
    """block -> [(successor, predicate register or None, truth when taken)]."""
    out: dict[str, list[tuple[str, str | None, bool]]] = {}
    n = len(func.blocks)
    for bi, b in enumerate(func.blocks):
        last = b.insts[-1] if b.insts else None
        nxt = func.blocks[bi + 1].label if bi + 1 < n else None
        es: list[tuple[str, str | None, bool]] = []
        if last is not None and last.kind == "branch":
            for t in last.targets:
                es.append((t, last.pred, not last.pred_neg))
            if last.pred is not None and nxt:
                es.append((nxt, last.pred, last.pred_neg))
        elif last is not None and last.kind == "ret" and last.pred is None:
            pass
        elif nxt:
            es.append((nxt, None, True))
        labels = {x.label for x in func.blocks}
        out[b.label] = [e for e in es if e[0] in labels]
    return out


_MEMO: dict[tuple, ValueInfo] = {}


def analyze_values(func: Function, consts: dict[tuple[str, int], int] | None = None,
                   special: dict[str, Interval] | None = None) -> ValueInfo:
    """Intervals of the PTX function's integer registers under the given parameter constants
    ((param, byte offset) -> value) and special-register ranges (defaults: SPECIAL_RANGES and the
    function's .maxntid). Memoized per (function, constants, ranges)."""
    key = (id(func), tuple(sorted((consts or {}).items())), tuple(sorted((special or {}).items())))
    if key not in _MEMO:
        _MEMO[key] = _analyze_values(func, consts, special)
    return _MEMO[key]


def _analyze_values(func: Function, consts: dict[tuple[str, int], int] | None,
                    special: dict[str, Interval] | None) -> ValueInfo:
    sp = dict(SPECIAL_RANGES)
    nt = func.ntid or (1024, 1024, 64)
    for i, axis in enumerate("xyz"):
        sp[f"%tid.{axis}"] = (0, nt[i] - 1)
        sp[f"%ntid.{axis}"] = (1, nt[i])
    if special:
        sp.update(special)
    ev = _Eval(func, consts or {}, sp)
    edges = _edges(func)
    blocks = {b.label: b for b in func.blocks}
    order = [b.label for b in func.blocks]
    index = {lab: i for i, lab in enumerate(order)}
    entry_state: dict[str, dict | None] = {lab: None for lab in order}
    entry_state[order[0]] = {}
    visits = {lab: 0 for lab in order}
    work = {order[0]}
    feasible: dict[str, set[str]] = {lab: set() for lab in order}
    ndefs: dict[str, int] = {}
    for b in func.blocks:
        for inst in b.insts:
            for d in inst.dsts:
                ndefs[d] = ndefs.get(d, 0) + 1
    single_defs = {d: (inst, b.label) for b in func.blocks for inst in b.insts for d in inst.dsts[:1]
                   if ndefs[d] == 1}
    single_defs["#entry"] = func.blocks[0].label

    def run_block(lab: str, record: ValueInfo | None) -> tuple[dict, dict]:
        st = dict(entry_state[lab])
        setp_of: dict[str, Inst] = {}
        for inst in blocks[lab].insts:
            if inst.pred is not None:
                p = st.get(inst.pred)
                if p is not None and p[0] == p[1] and bool(p[0]) == inst.pred_neg:
                    if record is not None:
                        record.never_runs.add(id(inst))
                    continue  # never runs
            if record is not None:
                if inst.kind in ("load", "store", "atomic", "copy"):
                    here = _refined(ev, st, inst.addr[:1] + inst.dst_addr[:1], single_defs)
                    record.addr[id(inst)] = _address(here, inst.addr, inst.offset)
                    if inst.kind == "copy":
                        record.dst_addr[id(inst)] = _address(here, inst.dst_addr, inst.dst_offset)
                        record.first_reg[id(inst)] = (st.get(inst.addr[0]) if inst.addr else None,
                                                      st.get(inst.dst_addr[0]) if inst.dst_addr else None)
                if inst.op.startswith("wgmma.mma_async"):
                    record.desc[id(inst)] = [st.get(r) for r in inst.ignored_srcs]
                    if len(inst.args) > 3:
                        record.wgmma_scale_d[id(inst)] = ev.operand(st, inst.args[3], None)
                if inst.op.startswith("shfl") and len(inst.args) > 2:
                    record.shfl_lane[id(inst)] = ev.operand(st, inst.args[2], None)
                if inst.op.split(".")[0] in ("add", "sub", "and") and not inst.fp:
                    record.operands[id(inst)] = [ev.operand(st, x, None) for x in inst.args[1:]]
            ev.transfer(st, inst, setp_of)
            for d in inst.dsts:
                if setp_of:
                    for k in [k for k, s in setp_of.items() if k != "#sym" and (d in s.args[1:3] or k == d)]:
                        setp_of.pop(k, None)
            if inst.op.startswith("setp") and inst.dsts and inst.pred is None and "|" not in inst.args[0]:
                setp_of[inst.dsts[0]] = inst
        return st, setp_of

    while work:
        lab = min(work, key=lambda x: index[x])
        work.discard(lab)
        st, setp_of = run_block(lab, None)
        for succ, pred, truth in edges[lab]:
            s2 = st
            if pred is not None:
                pv = st.get(pred)
                if pv is not None and pv[0] == pv[1] and bool(pv[0]) != truth:
                    continue  # infeasible edge
                if pred in setp_of:
                    s2 = ev.refine(st, setp_of[pred], truth)
                    if s2 is None:
                        continue
            feasible[lab].add(succ)
            old = entry_state[succ]
            new = _join(old, s2)
            if old is not None and index[succ] <= index[lab]:  # a back edge: widen
                visits[succ] += 1
                if visits[succ] > _WIDEN_AFTER:
                    new = _widen(old, new, ev.thresholds, visits[succ] > _WIDEN_FULL)
            if new != old:
                entry_state[succ] = new
                work.add(succ)
    reachable = {lab for lab in order if entry_state[lab] is not None}
    info = ValueInfo({lab: [s for s, _, _ in edges[lab] if s in feasible[lab]] for lab in order}, reachable)
    # One pass more to record, per instruction, its guard's constancy and its address intervals.
    for lab in order:
        if lab in reachable:
            run_block(lab, info)
    return info


_REEVAL_OPS = ("add", "sub", "shl", "mul", "mad", "cvt", "cvta", "mov", "and", "or", "xor", "shr", "selp")


def _refined(ev: _Eval, st: dict, regs: list[str], single_defs: dict, depth: int = 6) -> dict:
    """st with each address register re-derived from its defining expression (registers defined
    once, through integer arithmetic, up to `depth` levels) under the intervals at this point: a
    branch refines the thread index the address was computed from earlier, not the address
    itself. The result is intersected with what st already holds (both are sound)."""
    out = st
    for r in regs:
        iv = _reeval(ev, st, r, single_defs, depth, {})
        if iv is not None:
            cur = st.get(r)
            new = iv if cur is None else (max(iv[0], cur[0]), min(iv[1], cur[1]))
            if new[0] <= new[1] and new != cur:
                if out is st:
                    out = dict(st)
                out[r] = new
    return out


def _reeval(ev: _Eval, st: dict, r: str, single_defs: dict, depth: int, memo: dict) -> Interval | None:
    """r's interval recomputed from its definition. Sound only where the operands' current values
    are the ones r was computed from: operands defined once in r's own block (run together with
    it) or in the entry block (run once); any other register operand counts as unknown."""
    if r in memo:
        return memo[r]
    inst, blk = single_defs.get(r, (None, None))
    cur = st.get(r)
    if depth == 0 or inst is None or inst.op.split(".")[0] not in _REEVAL_OPS or inst.pred is not None or \
            inst.kind not in ("arith", "move") or len(inst.dsts) != 1:
        memo[r] = cur
        return cur
    tmp = dict(st)
    for a in inst.args[1:]:
        a = a.strip()
        if not (a.startswith("%") or "#s" in a) or a.startswith("%tid") or a.startswith("%ctaid"):
            continue  # immediates, symbols, special registers (the same all along)
        a_def = single_defs.get(a)
        if a_def is not None and a_def[1] in (blk, single_defs["#entry"]):
            sub = _reeval(ev, st, a, single_defs, depth - 1, memo) if a_def[1] == blk else st.get(a)
            if sub is None:
                tmp.pop(a, None)
            else:
                tmp[a] = sub
        else:
            tmp.pop(a, None)
            tmp.pop(("#m", a), None)
    ev.transfer(tmp, inst)
    got = tmp.get(r)
    if got is not None and cur is not None:
        got = (max(got[0], cur[0]), min(got[1], cur[1])) if max(got[0], cur[0]) <= min(got[1], cur[1]) else cur
    memo[r] = got if got is not None else cur
    return memo[r]


def _address(st: dict, regs: list[str], offset: int) -> Interval | None:
    if not regs:
        return (offset, offset)
    if len(regs) != 1:
        return None
    iv = st.get(regs[0])
    if iv is None:
        return None
    return (iv[0] + offset, iv[1] + offset)
