# The values of dag.py's symbolic execution: hash-consed DAG nodes (floating-point operations on
# input leaves), integers computed from input bytes kept bit by bit (BV: each bit 0, 1 or a
# boolean formula over input bits, built with constants folded, so that equal integer
# computations written differently by the compiler give equal bits), and floating-point
# constants by their value (folded exactly as IEEE round-to-nearest computes them).
from __future__ import annotations

import re
import struct


class N:
    """A DAG node: (operation, operands...) where operands are nodes or constants. Hash-consed:
    equal keys give the same object, so equality is identity and hashing is O(arity)."""

    __slots__ = ("key",)

    def __init__(self, key: tuple) -> None:
        self.key = key

    def __repr__(self) -> str:
        return f"N{self.key[:2]}"


_NODES: dict[tuple, N] = {}


def node(*key) -> N:
    """The unique node for an operation and its operands (hash-consing)."""
    n = _NODES.get(key)
    if n is None:
        n = _NODES[key] = N(key)
    return n


class Unsupported(Exception):
    pass


def reset() -> None:
    """Forgets the DAG nodes of earlier runs (memory), keeping the constants the compiled
    instructions hold: nodes made before and after a reset must not be compared."""
    keep = {k: v for k, v in _NODES.items() if k[0] in ("const", "undef")}
    _NODES.clear()
    _NODES.update(keep)
    _BYTE_BITS.clear()
    _BV_MEMO.clear()


class Agg(tuple):
    """A first-class aggregate (a struct returned by value): its fields."""


class BV(tuple):
    """A symbolic integer as its bits, least significant first: each 0, 1 or a boolean node over
    the bits of input leaves. Bitwise operations, shifts by constants, additions, extensions and
    truncations build the bits directly, folding constants, so that two instruction sequences
    that compute the same integer the same way bit by bit (a shift before or after a widening,
    a mask before or after a shift) give the same bits: the weight decoders compute their codes
    with such different but equal sequences on the two paths."""


def _bnot(a):
    if type(a) is int:
        return 1 - a
    if a.key[0] == "~":
        return a.key[1]
    return node("~", a)


def _band(a, b):
    if type(a) is int:
        return b if a else 0
    if type(b) is int:
        return a if b else 0
    if a is b:
        return a
    return node("&", a, b) if id(a) < id(b) else node("&", b, a)


def _bor(a, b):
    if type(a) is int:
        return 1 if a else b
    if type(b) is int:
        return 1 if b else a
    if a is b:
        return a
    return node("|", a, b) if id(a) < id(b) else node("|", b, a)


def _bxor(a, b):
    if type(a) is int:
        return _bnot(b) if a else b
    if type(b) is int:
        return _bnot(a) if b else a
    if a is b:
        return 0
    return node("^", a, b) if id(a) < id(b) else node("^", b, a)


def _bits(x, w: int) -> tuple:
    """x (an int, a BV of width w, or an opaque node) as w bits."""
    if type(x) is int:
        v = x & ((1 << w) - 1)
        return tuple((v >> j) & 1 for j in range(w))
    if type(x) is BV:
        if len(x) != w:
            raise Unsupported(f"a {len(x)}-bit value used as i{w}")
        return x
    if isinstance(x, N):
        return tuple(node("bit", j, x) for j in range(w))
    raise Unsupported(f"integer operation on {x!r:.60}")


def _from_bits(bits) -> object:
    """An int if every bit is known, else the BV."""
    if all(type(b) is int for b in bits):
        return sum(b << j for j, b in enumerate(bits))
    return BV(bits)


def _add_bits(a: tuple, b: tuple, carry) -> tuple:
    """Ripple-carry sum of two bit tuples (the carry out dropped)."""
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        if type(x) is int and type(y) is int and type(carry) is not int and \
                all(type(p) is int for p in a[i:]) and all(type(q) is int for q in b[i:]):
            # the high bits: constants plus a symbolic carry c; each sum bit is c or ~c, and the
            # carry stays c until two equal bits make it that constant
            nc = _bnot(carry)
            for p, q in zip(a[i:], b[i:]):
                if type(carry) is int:
                    t = p + q + carry
                    out.append(t & 1)
                    carry = t >> 1
                elif p == q:
                    out.append(carry)
                    carry = p
                else:
                    out.append(nc)
            return tuple(out)
        if type(y) is int:
            if type(x) is int and type(carry) is int:
                t = x + y + carry
                out.append(t & 1)
                carry = t >> 1
            elif y:
                out.append(_bnot(_bxor(x, carry)))
                carry = _bor(x, carry)
            else:
                out.append(_bxor(x, carry))
                carry = _band(x, carry)
            continue
        t = _bxor(x, y)
        out.append(_bxor(t, carry))
        carry = _bor(_band(x, y), _band(carry, t))
    return tuple(out)


_BV_MEMO: dict[tuple, object] = {}


def _bv_op(op: str, w: int, x, y):
    """The w-bit integer operation op on operands at least one of which is symbolic (memoized:
    the paths compared decode the same weights with the same operations)."""
    key = (op, w, x, y)
    got = _BV_MEMO.get(key)
    if got is None:
        got = _BV_MEMO[key] = _bv_op_new(op, w, x, y)
    return got


def _bv_op_new(op: str, w: int, x, y):
    a = _bits(x, w)
    if op in ("shl", "lshr", "ashr") and type(y) is int:
        n = _to_u(y, w)
        if n >= w:
            raise Unsupported(f"{op} by {n} of an i{w} (poison)")
        if op == "shl":
            return _from_bits((0,) * n + a[:w - n])
        fill = a[-1] if op == "ashr" else 0
        return _from_bits(a[n:] + (fill,) * n)
    if type(y) is int and op in ("and", "or"):
        c = _to_u(y, w)
        if op == "and":
            return _from_bits(tuple(p if (c >> j) & 1 else 0 for j, p in enumerate(a)))
        return _from_bits(tuple(1 if (c >> j) & 1 else p for j, p in enumerate(a)))
    b = _bits(y, w)
    if op == "and":
        return _from_bits(tuple(_band(p, q) for p, q in zip(a, b)))
    if op == "or":
        return _from_bits(tuple(_bor(p, q) for p, q in zip(a, b)))
    if op == "xor":
        return _from_bits(tuple(_bxor(p, q) for p, q in zip(a, b)))
    if op == "add":
        return _from_bits(_add_bits(a, b, 0))
    if op == "sub":
        return _from_bits(_add_bits(a, tuple(_bnot(q) for q in b), 1))
    if op == "mul" and type(y) is int:
        acc = (0,) * w
        for j in range(w):
            if (_to_u(y, w) >> j) & 1:
                acc = _add_bits(acc, (0,) * j + a[:w - j], 0)
        return _from_bits(acc)
    n = node("i." + op, w, a, b)  # not bit-blasted: an uninterpreted function of the bits
    return BV(tuple(node("bit", j, n) for j in range(w)))


def _to_u(v: int, w: int) -> int:
    return v & ((1 << w) - 1)


def _to_s(v: int, w: int) -> int:
    v &= (1 << w) - 1
    return v - (1 << w) if v >> (w - 1) else v


def _wrap(v: int, w: int) -> int:
    """v if it is a valid w-bit pattern read signed or unsigned, else its w-bit pattern."""
    if -(1 << (w - 1)) <= v < (1 << w):
        return v
    return v & ((1 << w) - 1)


def _fconst(tok: str) -> N:
    """A floating-point constant by its value as the bits of a double (LLVM prints float and
    double constants as decimal or as the hex of the double; half and bfloat as 0xH/0xR): equal
    values, +0.0 and -0.0 apart, give one node."""
    if re.match(r"^0x[0-9A-Fa-f]+$", tok):
        return node("const", int(tok, 16))
    if tok.startswith("0x"):
        return node("const", tok)
    return node("const", struct.unpack("<Q", struct.pack("<d", float(tok)))[0])


def _double(c: N):
    return struct.unpack("<d", struct.pack("<Q", c.key[1]))[0] if type(c.key[1]) is int else None


def _const_of(v: float, single: bool) -> N | None:
    """The constant node of v (rounded to f32 if single: round to nearest even); None if not finite."""
    try:
        if single:
            v = struct.unpack("<f", struct.pack("<f", v))[0]
    except OverflowError:
        return None
    if v != v or v in (float("inf"), float("-inf")):
        return None
    return node("const", struct.unpack("<Q", struct.pack("<d", v))[0])


def _fold(name: str, p: N, q: N, single: bool) -> N | None:
    """p op q of two constants as IEEE round-to-nearest computes it (exact in double, then one
    rounding to f32, which for +, -, * equals the f32 operation); None where not folded."""
    a, b = _double(p), _double(q)
    if a is None or b is None:
        return None
    return _const_of(a + b if name == "add" else a - b if name == "sub" else a * b, single)


def _fold_exact(name: str, p: N, q: N) -> N | None:
    """p op q where the exact result is an f32 value (so f32 and f64 arithmetic both give it, the
    operation's type unknown); None otherwise."""
    a, b = _double(p), _double(q)
    if a is None or b is None:
        return None
    r = a + b if name == "add" else a - b if name == "sub" else a * b
    if name != "mul" and (r - a != (b if name == "add" else -b) or r - (b if name == "add" else -b) != a):
        return None  # the double sum was rounded
    c = _const_of(r, True)
    return c if c is not None and _double(c) == r else None


_INT_BYTES = {"i8": 1, "i16": 2, "i32": 4, "i64": 8}
_BYTE_BITS: dict[tuple, tuple] = {}  # (base, byte) -> the bits of that input byte


_COMMUTATIVE = {"&": _band, "|": _bor, "^": _bxor, "~": _bnot}
