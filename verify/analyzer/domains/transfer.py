# The transfer functions of the value analysis (values.py): how each PTX instruction changes the
# intervals of the integer and predicate registers it writes, and how a branch's comparison
# refines its operands on the edge it guards. Sound in the sense of values.py.
from __future__ import annotations

import re

from ..frontend.kir import Function, Inst
from .intervals import NEGATE, UNSIGNED, Interval, bits_cover, decide, fit, int_type, parse_imm, type_range
from .transfer_ops import INTEGER, NEEDS_ALL


class PtxEval:
    def __init__(self, func: Function, consts: dict[tuple[str, int], int], special: dict[str, Interval]):
        self.func = func
        self.consts = consts
        self.special = special
        self.thresholds = self._constants()
        self._decoded: dict[int, tuple] = {}  # id(inst) -> (opcode parts, base, integer types, destinations)

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
        if inst.kind in ("branch", "ret", "barrier", "store"):
            return
        decoded = self._decoded.get(id(inst))
        if decoded is None:  # the opcode's parts, integer types and destinations: read once
            parts = inst.op.split(".")
            decoded = self._decoded[id(inst)] = (
                parts, parts[0], [int_type(p) for p in parts[1:] if int_type(p)],
                [d.strip() for d in inst.args[0].split("|")] if inst.args else [])
        parts, base, tys, dst_names = decoded
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
                res = (0, min(xv[1], bits_cover(xv[1]) & notm))
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
            return bits_cover(iv[1]) if iv is not None and iv[0] >= 0 else None
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
        """The interval of the integer or predicate value inst computes (None: any value)."""
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
        if base in ("and", "or", "xor", "not") and "pred" in parts:
            return self._predicate(st, base, args)
        special = _SPECIAL.get(base)
        if special is not None:
            return special(self, st, inst, base, parts, args, dty, sty, setp_of)
        if not dty:
            return None
        xs = [self.operand(st, a, sty) for a in args]
        if base in NEEDS_ALL and any(x is None for x in xs[:3]):
            return None
        op = INTEGER.get(base)
        return op(self, st, args, xs, parts, dty) if op is not None else None

    def _predicate(self, st, base: str, args: list[str]) -> Interval:
        """and, or, xor, not of predicates (0 or 1)."""
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

    def _select(self, st, inst, base, parts, args, dty, sty, setp_of) -> Interval | None:
        """selp / slct: the side the predicate picks, or both sides' hull (each refined by the
        predicate's comparison where it is a setp of the block: x == 11 ? 0 : x)."""
        if len(args) < 3:
            return None
        p = self.operand(st, args[2], None)
        a, b = self.operand(st, args[0], sty), self.operand(st, args[1], sty)
        if p == (1, 1):
            return a
        if p == (0, 0):
            return b
        setp = (setp_of or {}).get(args[2].strip())
        if setp is not None:
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

    def _move(self, st, inst, base, parts, args, dty, sty, setp_of) -> Interval | None:
        """mov / cvta: the operand, or a pack {lo, hi} of two non-negative halves."""
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

    def _convert(self, st, inst, base, parts, args, dty, sty, setp_of) -> Interval | None:
        if not dty:
            return None
        iv = self.operand(st, args[0], sty) if sty else None
        return fit(iv, dty)

    def _shuffle(self, st, inst, base, parts, args, dty, sty, setp_of) -> Interval | None:
        return self.operand(st, args[0], dty) if args else None

    def _setp_value(self, st, inst, base, parts, args, dty, sty, setp_of) -> Interval:
        return self._setp(st, inst, parts)

    def _setp(self, st, inst: Inst, parts: list[str]) -> Interval:
        cmp_ = parts[1] if len(parts) > 1 else ""
        ty = next((int_type(p) for p in parts[2:] if int_type(p)), None)
        if ty is None or len(inst.args) < 3 or len(parts) > 3:  # floats, or setp.cmp.bool.type: no refinement
            return (0, 1)
        a = self.operand(st, inst.args[1], ty)
        b = self.operand(st, inst.args[2], ty)
        if a is None or b is None:
            return (0, 1)
        return decide(cmp_, a, b)

    # -- refinement on a branch edge --
    def refine(self, st: dict, setp: Inst, truth: bool) -> dict | None:
        """st where setp's comparison has the given truth; None where it cannot."""
        parts = setp.op.split(".")
        cmp_ = parts[1]
        ty = next((int_type(p) for p in parts[2:] if int_type(p)), None)
        if ty is None or len(setp.args) < 3 or len(parts) > 3:
            return st
        if not truth:
            cmp_ = NEGATE.get(cmp_, "")
            if not cmp_:
                return st
        cmp_ = UNSIGNED.get(cmp_, cmp_)
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


# base opcode -> PtxEval method for the operations that are not integer arithmetic on intervals
_SPECIAL = {"setp": PtxEval._setp_value, "selp": PtxEval._select, "slct": PtxEval._select, "mov": PtxEval._move,
            "cvta": PtxEval._move, "cvt": PtxEval._convert, "shfl": PtxEval._shuffle,
            "elect": lambda ev, st, inst, base, parts, args, dty, sty, setp_of: (0, 31)}
