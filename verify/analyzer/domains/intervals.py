# The integer interval domain of the value analysis (values.py): PTX integer types and their
# ranges, two's complement wrapping, immediates, comparisons decided on intervals, and the join
# and widening of analysis states (register -> interval, or -> known-bits mask for masks).
from __future__ import annotations

import re

Interval = tuple[int, int]
_INT_TYPE = re.compile(r"^(s|u|b)(8|16|32|64)$")
_IMM = re.compile(r"^(-?)(0[xX][0-9a-fA-F]+|\d+)U?$")

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


_IMM_CACHE: dict[str, int | None] = {}


def parse_imm(text: str) -> int | None:
    """The integer an operand's text is, or None (a register, a symbol, a float)."""
    try:
        return _IMM_CACHE[text]
    except KeyError:
        pass
    m = _IMM.match(text.strip())
    v = None
    if m:
        v = int(m.group(2), 0)
        v = -v if m.group(1) else v
    _IMM_CACHE[text] = v
    return v


def mul_iv(a: Interval, b: Interval) -> Interval:
    c = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return (min(c), max(c))


def tdiv(x: int, y: int) -> int:
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y > 0) else -q


def bits_cover(hi: int) -> int:
    return (1 << max(hi, 0).bit_length()) - 1


NEGATE = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq", "lo": "hs", "ls": "hi",
           "hi": "ls", "hs": "lo"}
UNSIGNED = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}


def decide(cmp_: str, a: Interval, b: Interval) -> Interval:
    cmp_ = UNSIGNED.get(cmp_, cmp_)
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


def join(a: dict | None, b: dict) -> dict:
    """The states' join: a register both hold gets the hull of its intervals (the union of its
    masks); a register one of them lacks (any value) is dropped. Only the entries that differ are
    visited (the symmetric difference of the items, in C): two states at a join mostly agree."""
    if a is None:
        return dict(b)
    out = dict(a)
    for r in {r for r, _ in a.items() ^ b.items()}:
        y = b.get(r)
        if y is None or r not in a:
            out.pop(r, None)
            continue
        x = a[r]
        if isinstance(x, int):  # a bit mask
            out[r] = x | y
        else:
            out[r] = (x[0] if x[0] < y[0] else y[0], x[1] if x[1] > y[1] else y[1])
    return out


def widen(old: dict, new: dict, thresholds: list[int], full: bool) -> dict:
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
