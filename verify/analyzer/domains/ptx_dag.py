# The values of the PTX symbolic execution (symbolic/ptx_exec.py): floating-point values are nodes of
# a hash-consed DAG (Dag) whose leaves are input elements (tensor, row, column) and constants by
# their bits; operations on constants are folded only where IEEE round-to-nearest gives the folded
# bits (both operands constant); x + 0.0 is never x (x may be -0.0). Predicates are concrete ints
# but for comparisons of floating-point values, which are nodes too (and / or as sets). Memory
# holds bytes: each an int (a concrete byte) or (node, i), byte i of a node's value; a 32-bit
# register read from memory holds its four byte entries (Bytes) until an instruction takes them
# apart as two bf16 halves (mma.sync) or stores them back. Three normalisations make equal what
# cannot differ in a bit (attention_chains.py states them as assumptions): max/min of a set,
# commutative add/mul/fma products (Dag(commutative=True)), and divide_row's quotient (_quotient).
from __future__ import annotations

import struct

M32 = 0xFFFFFFFF
MMA_OP = "mma.m16n8k16.f32.bf16"  # the operation of an mma.sync element's node


class ExecError(Exception):
    """A kernel the executor refuses: an instruction it does not model, or a run outside its model."""


class Node:
    """A DAG node: key = (operation, operands...), width = bytes of its value. Hash-consed by Dag:
    equal keys give the same object, so equal DAGs are the same node."""

    __slots__ = ("key", "width")

    def __init__(self, key: tuple, width: int) -> None:
        self.key = key
        self.width = width

    @property
    def bytes(self) -> tuple:
        """Its value's byte entries in memory: (node, 0), (node, 1) ..."""
        return tuple((self, i) for i in range(self.width))

    def __repr__(self) -> str:
        return f"Node{self.key[:3]}"


class Dag:
    """The node table of one comparison: nodes made by one Dag are compared by identity."""

    def __init__(self, commutative: bool = False) -> None:
        # commutative: add.f32, mul.f32 and fma's product take their two operands in one order (IEEE
        # addition and multiplication are commutative: the same bits either way, NaN payloads aside)
        self.commutative = commutative
        self.table: dict[tuple, Node] = {}
        self.vecs: dict[tuple, Node] = {}  # operand tuple -> its vec node (the table's, looked up faster)
        self.int_halves: dict[int, tuple[Node, Node]] = {}  # a 32-bit integer's two bf16 constants

    def node(self, width: int, *key) -> Node:
        n = self.table.get(key)
        if n is None:
            n = self.table[key] = Node(key, width)
        return n

    def const(self, bits: int, width: int) -> Node:
        return self.node(width, "const", width, bits)

    def vec(self, items: tuple) -> Node:
        """An ordered operand list (the k16 row of A or column of B of a tensor-core step)."""
        v = self.vecs.get(items)
        if v is None:
            v = self.vecs[items] = self.node(0, "vec", *items)
        return v

    def mma(self, c: Node, a_row: Node, b_col: Node) -> Node:
        """One element of mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32: its accumulator, its A row and
        its B column, in that order (the hardware's order inside is a fixed function of these)."""
        return self.node(4, MMA_OP, c, a_row, b_col)

    def f32_op(self, op: str, a: Node, b: Node) -> Node:
        """a op b in f32 (add, sub, mul; round to nearest), folded only when both are constants."""
        if a.key[0] == "const" and b.key[0] == "const":
            x, y = _f32_value(a.key[2]), _f32_value(b.key[2])
            r = x + y if op == "add" else x - y if op == "sub" else x * y
            bits = _f32_bits(r)
            if bits is not None:
                return self.const(bits, 4)
        if self.commutative and op != "sub" and id(a) > id(b):
            a, b = b, a
        return self.node(4, op + ".f32", a, b)

    def bf16_round(self, a: Node) -> Node:
        """cvt.rn.bf16.f32: a rounded to bf16 (nearest even)."""
        return self.node(2, "cvt.rn.bf16.f32", a)

    def op(self, name: str, width: int, *args: Node) -> Node:
        """Any other deterministic floating-point operation (ex2.approx.ftz.f32, fma.rn.f32, div.rn.f32,
        the f64 operations ...): a node of its operands, folded only for neg and abs of a constant."""
        if len(args) == 1 and args[0].key[0] == "const" and name in ("neg.f32", "abs.f32"):
            bits = args[0].key[2]
            return self.const(bits ^ 0x80000000 if name == "neg.f32" else bits & 0x7FFFFFFF, 4)
        if self.commutative and name == "fma.rn.f32" and id(args[0]) > id(args[1]):
            args = (args[1], args[0], args[2])
        return self.node(width, name, *args)

    def maximum(self, name: str, a: Node, b: Node) -> Node:
        """max.f32 / min.f32 as the maximum (minimum) of a set: operands that are such nodes are
        flattened, so that any order and grouping of the same operands gives one node (the PTX
        operation ignores a NaN operand; the sign of a zero result is left open: see attention_chains.py)."""
        items = set()
        for x in (a, b):
            if x.key[0] == name:
                items.update(x.key[1])
            else:
                items.add(x)
        if len(items) == 1:
            return items.pop()
        return self.node(4, name, frozenset(items))

    # Predicates that depend on floating-point values: nodes of width 0 (a concrete predicate is the
    # int 0 or 1). Comparisons are kept as eq and lt, le over their operands; and / or as sets.

    def compare(self, cmp: str, a: Node, b: Node):
        """setp.<cmp>.f32 a, b: ordered eq, lt, le, gt, ge, ne; unordered neu, equ, ltu, leu, gtu, geu
        as the negation of an ordered one. Two constants fold."""
        if cmp in ("neu", "equ", "ltu", "leu", "gtu", "geu"):
            return self.negate(self.compare({"neu": "eq", "equ": "ne", "ltu": "ge", "leu": "gt", "gtu": "le",
                                             "geu": "lt"}[cmp], a, b))
        if cmp in ("gt", "ge"):
            a, b, cmp = b, a, "lt" if cmp == "gt" else "le"
        if cmp == "ne":
            return self.either([self.compare("lt", a, b), self.compare("lt", b, a)])
        if cmp not in ("eq", "lt", "le"):
            raise ExecError(f"setp.{cmp}.f32 not modelled")
        if a.key[0] == "const" and b.key[0] == "const":
            x, y = _f32_value(a.key[2]), _f32_value(b.key[2])
            return int(x == y if cmp == "eq" else x < y if cmp == "lt" else x <= y)
        return self.node(0, "setp." + cmp, a, b)

    def negate(self, p):
        if type(p) is int:
            return 1 - p
        if p.key[0] == "not":
            return p.key[1]
        return self.node(0, "not", p)

    def both(self, ps) -> int | Node:
        return self._junction("and", ps)

    def either(self, ps) -> int | Node:
        return self._junction("or", ps)

    def _junction(self, name: str, ps):
        unit = 1 if name == "and" else 0
        items = set()
        for p in ps:
            if type(p) is int:
                if p != unit:
                    return 1 - unit
                continue
            if p.key[0] == name:
                items.update(p.key[1])
            else:
                items.add(p)
        if not items:
            return unit
        if len(items) == 1:
            return items.pop()
        return self.node(0, name, frozenset(items))

    def select(self, c, a, b):
        """c ? a : b for a predicate c that is a node: values (a select node), or predicates (and / or)."""
        if a is b or (type(a) is int and a == b):
            return a
        if type(c) is int:
            return a if c else b
        if c.key[0] == "not":
            c, a, b = c.key[1], b, a
        if type(a) is int or type(b) is int or (a.width == 0 and b.width == 0):
            if type(a) is int:
                return self.either([c, b]) if a else self.both([self.negate(c), b])
            if type(b) is int:
                return self.either([self.negate(c), a]) if b else self.both([c, a])
            return self.either([self.both([c, a]), self.both([self.negate(c), b])])
        if not (isinstance(a, Node) and isinstance(b, Node)) or a.width != b.width:
            raise TypeError("a select of values of different kinds")
        return _quotient(c, a, b) or _quotient(self.negate(c), b, a) or self.node(a.width, "select", c, a, b)


FLT_MIN = 0x00800000  # the bits of the smallest normal f32


def _quotient(c, d: Node, q: Node) -> Node | None:
    """divide_row's quotient (src/kernels/cuda/attention/attention_mma_tile.cuh): c ? d : q is d where d = div.rn.f32(x, l),
    q = cvt.rn.f32.f64(mul.rn.f64(cvt.f64.f32(x), rcp.rn.f64(cvt.f64.f32(l)))) and c holds (as itself
    or one of the terms of its or) the term x != 0 and |q| < FLT_MIN: where c is false, that term is,
    so q is normal, infinite, NaN or from x = 0, and then q is div.rn's quotient (divide_row's theorem,
    an assumption of attention_chains.py). None where the pattern does not apply."""
    if type(c) is int or d.key[0] != "div.rn.f32" or q.key[0] != "cvt.rn.f32.f64":
        return None
    x, l = d.key[1], d.key[2]
    prod = q.key[1]
    if prod.key[0] != "mul.rn.f64" or prod.key[1].key != ("cvt.f64.f32", x):
        return None
    inv = prod.key[2]
    if inv.key[0] != "rcp.rn.f64" or inv.key[1].key != ("cvt.f64.f32", l):
        return None
    terms = c.key[1] if c.key[0] == "or" else (c,)
    for t in terms:
        if t.key[0] != "and" or len(t.key[1]) != 2:
            continue
        parts = {p.key: p for p in t.key[1]}
        nonzero = next((p for p in t.key[1] if p.key[0] == "not" and p.key[1].key[0] == "setp.eq" and
                        p.key[1].key[1] is x and p.key[1].key[2].key == ("const", 4, 0)), None)
        small = next((p for p in t.key[1] if p.key[0] == "setp.lt" and p.key[1].key == ("abs.f32", q) and
                      p.key[2].key == ("const", 4, FLT_MIN)), None)
        if nonzero is not None and small is not None and len(parts) == 2:
            return d
    return None


def _f32_value(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _f32_bits(v: float) -> int | None:
    """The f32 bits of v rounded to nearest (the double result of an f32 +, -, * of two f32 values
    rounds to the f32 result: 53 >= 2 * 24 + 2); None for NaN (payload) or overflow."""
    if v != v:
        return None
    try:
        return struct.unpack("<I", struct.pack("<f", v))[0]
    except OverflowError:
        return None


class Bytes:
    """A register holding bytes of memory that are not all concrete: entries little-endian, each an
    int or (node, i). Not an integer: arithmetic on it raises (TypeError, reported as ExecError).
    halves: its two bf16 values, once an instruction has read it so."""

    __slots__ = ("entries", "halves")

    def __init__(self, entries: tuple) -> None:
        self.entries = entries
        self.halves = None


def value_of_bytes(entries, kind: str, dag: Dag):
    """The register value of bytes read from memory: kind "int" (an int if every byte is concrete,
    else Bytes) or "f32" (a node: the node whose four bytes they are, or a constant)."""
    if kind == "int":
        for e in entries:
            if type(e) is not int:
                return Bytes(tuple(entries))
        return int.from_bytes(bytes(entries), "little")
    if all(type(e) is int for e in entries):
        return dag.const(int.from_bytes(bytes(entries), "little"), 4)
    n = entries[0][0] if type(entries[0]) is tuple else None
    if n is None or n.width != 4 or any(type(e) is not tuple or e != (n, i) for i, e in enumerate(entries)):
        raise TypeError("an f32 read from bytes of different values")
    return n


def bytes_of_value(v, size: int) -> list:
    """The byte entries a register value stores (size bytes)."""
    if type(v) is int:
        if size > 8:
            raise TypeError(f"an integer register stored as {size} bytes")
        return list(v.to_bytes(8, "little")[:size])
    if isinstance(v, Node):
        if v.width != size:
            raise TypeError(f"a {v.width}-byte value stored as {size} bytes")
        return list(v.bytes)
    if isinstance(v, Bytes):
        if len(v.entries) != size:
            raise TypeError(f"{len(v.entries)} register bytes stored as {size}")
        return list(v.entries)
    raise TypeError(f"storing {v!r:.40}")


def bf16_halves(v, dag: Dag) -> tuple[Node, Node]:
    """The two bf16 values a 32-bit register holds (low half first)."""
    if type(v) is Bytes:
        if v.halves is None:
            e = v.entries
            if len(e) != 4:
                raise TypeError(f"a bf16x2 operand of {len(e)} bytes")
            v.halves = (half(e[0], e[1], dag), half(e[2], e[3], dag))
        return v.halves
    if type(v) is int:
        got = dag.int_halves.get(v)
        if got is None:
            got = dag.int_halves[v] = (dag.const(v & 0xFFFF, 2), dag.const((v >> 16) & 0xFFFF, 2))
        return got
    raise TypeError(f"a bf16x2 operand that is not 32 bits of memory: {v!r:.40}")


def half(lo, hi, dag: Dag) -> Node:
    if type(lo) is int and type(hi) is int:
        return dag.const(lo | hi << 8, 2)
    if type(lo) is tuple and lo[1] == 0 and hi == (lo[0], 1) and lo[0].width == 2:
        return lo[0]
    raise TypeError("a bf16 half made of bytes of different values")


def register_of(e0, e1, e2, e3, dag: Dag):
    """A 32-bit register loaded from four byte entries: an int, or Bytes with its two bf16 halves
    worked out where the bytes are two bf16 values (what mma.sync will read them as)."""
    if type(e0) is int and type(e1) is int and type(e2) is int and type(e3) is int:
        return e0 | e1 << 8 | e2 << 16 | e3 << 24
    v = Bytes((e0, e1, e2, e3))
    try:
        v.halves = (half(e0, e1, dag), half(e2, e3, dag))
    except TypeError:
        pass  # not bf16 halves: an error if an instruction reads them so
    return v
