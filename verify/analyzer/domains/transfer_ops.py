# The interval transfer functions of the PTX integer operations (transfer.py's table): base opcode
# -> f(ev, st, args, xs, parts, dty) giving an interval that contains every result of the operation
# on values of its operand intervals xs (of the source type), wrapped to the whole type range where
# the result can overflow; None where any value is possible.
from __future__ import annotations

from .intervals import Interval, bits_cover, fit, mul_iv, tdiv, type_range

# operations that need every operand's interval
NEEDS_ALL = ("add", "sub", "mul", "mad", "min", "max", "neg", "abs")


def _wrap(r: Interval, dty: tuple[str, int]) -> Interval | None:
    full = type_range(*dty)
    if r[0] < full[0] or r[1] > full[1]:
        return fit(r, dty)
    return r


def _add(ev, st, args, xs, parts, dty):
    return _wrap((xs[0][0] + xs[1][0], xs[0][1] + xs[1][1]), dty) if len(xs) == 2 else None


def _sub(ev, st, args, xs, parts, dty):
    return _wrap((xs[0][0] - xs[1][1], xs[0][1] - xs[1][0]), dty) if len(xs) == 2 else None


def _mul(ev, st, args, xs, parts, dty):
    if len(xs) != 2 or "hi" in parts:
        return None
    return _wrap(mul_iv(xs[0], xs[1]), dty)


def _mad(ev, st, args, xs, parts, dty):
    if len(xs) != 3 or "hi" in parts:
        return None
    p = mul_iv(xs[0], xs[1])
    return _wrap((p[0] + xs[2][0], p[1] + xs[2][1]), dty)


def _neg(ev, st, args, xs, parts, dty):
    return _wrap((-xs[0][1], -xs[0][0]), dty) if len(xs) == 1 else None


def _abs(ev, st, args, xs, parts, dty):
    if len(xs) != 1:
        return None
    lo, hi = xs[0]
    return _wrap((0 if lo <= 0 <= hi else min(abs(lo), abs(hi)), max(abs(lo), abs(hi))), dty)


def _min(ev, st, args, xs, parts, dty):
    return _wrap((min(xs[0][0], xs[1][0]), min(xs[0][1], xs[1][1])), dty) if len(xs) == 2 else None


def _max(ev, st, args, xs, parts, dty):
    return _wrap((max(xs[0][0], xs[1][0]), max(xs[0][1], xs[1][1])), dty) if len(xs) == 2 else None


def _shl(ev, st, args, xs, parts, dty):
    if len(xs) != 2:
        return None
    sh = ev.operand(st, args[1], ("u", 32))
    if xs[0] is None or sh is None or sh[0] != sh[1] or sh[0] >= dty[1]:
        return None
    return _wrap((xs[0][0] << sh[0], xs[0][1] << sh[0]), dty)


def _shr(ev, st, args, xs, parts, dty):
    if len(xs) != 2:
        return None
    sh = ev.operand(st, args[1], ("u", 32))
    if xs[0] is None or sh is None:
        return None
    if sh[0] == sh[1]:
        s = min(sh[0], dty[1] - 1) if dty[0] == "s" else sh[0]
        return _wrap((xs[0][0] >> s, xs[0][1] >> s), dty)
    if xs[0][0] >= 0:
        return _wrap((xs[0][0] >> sh[1], xs[0][1] >> sh[0]), dty)
    return None


def _and(ev, st, args, xs, parts, dty):
    if len(xs) != 2:
        return None
    a, b = xs
    for x, y in ((a, b), (b, a)):  # x & low-bit mask that covers x: x itself
        if x is not None and y is not None and y[0] == y[1] and x[0] >= 0 and y[0] >= 0 and \
                y[0] & (y[0] + 1) == 0 and x[1] <= y[0]:
            return x
    cands = [x[1] for x in (a, b) if x is not None and x[0] >= 0]
    if not cands:
        return None
    return _wrap((0, min(cands)), dty)


def _or_xor(base: str):
    def f(ev, st, args, xs, parts, dty):
        if len(xs) != 2:
            return None
        a, b = xs
        if a is None or b is None or a[0] < 0 or b[0] < 0:
            return None
        for x, y in ((a, b), (b, a)):  # a constant whose bits lie above x's: a sum
            if y[0] == y[1] and y[0] & bits_cover(x[1]) == 0:
                return fit((x[0] + y[0], x[1] + y[0]), dty)
        top = bits_cover(max(a[1], b[1]))
        return _wrap((max(a[0], b[0]) if base == "or" else 0, top), dty)
    return f


def _div(ev, st, args, xs, parts, dty):
    if len(xs) != 2:
        return None
    a, b = xs
    if a is None or b is None or b[0] <= 0:
        return None
    c = [tdiv(x, y) for x in a for y in b]
    return _wrap((min(c), max(c)), dty)


def _rem(ev, st, args, xs, parts, dty):
    if len(xs) != 2:
        return None
    a, b = xs
    if a is None or b is None or b[0] <= 0:
        return None
    m = b[1] - 1
    return _wrap((0, min(m, a[1])) if a[0] >= 0 else (-m, m), dty)


def _count(ev, st, args, xs, parts, dty):
    return (0, 64)  # popc, clz


def _bfe(ev, st, args, xs, parts, dty):
    if len(args) != 3:
        return None
    ln = ev.operand(st, args[2], ("u", 32))
    if ln and ln[0] == ln[1] and dty[0] != "s" and ln[0] < 64:
        return (0, (1 << ln[0]) - 1)
    return None


# base opcode -> transfer function; an integer operation not listed (not, bfi, prmt ...): None
INTEGER = {"add": _add, "sub": _sub, "mul": _mul, "mad": _mad, "neg": _neg, "abs": _abs, "min": _min, "max": _max,
           "shl": _shl, "shr": _shr, "and": _and, "or": _or_xor("or"), "xor": _or_xor("xor"), "div": _div,
           "rem": _rem, "popc": _count, "clz": _count, "bfe": _bfe}
