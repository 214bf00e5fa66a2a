# Symbolic execution of a PTX kernel, one CTA at a time (gemm_chains.py and attention_chains.py run
# grids of them). Integers and addresses are concrete (typed wrap-around); floating-point values are
# nodes of a hash-consed DAG (Dag) whose leaves are input elements (tensor, row, column) and
# constants by their bits. Operations on constants are folded only where IEEE round-to-nearest
# gives the folded bits (both operands constant); x + 0.0 is never x (x may be -0.0). Predicates
# are concrete but for comparisons of floating-point values, which are nodes too (run_cta says how
# a branch on one runs).
# Memory is by byte: each byte an int (a concrete byte) or (node, i), byte i of a node's value;
# a 32-bit register read from memory holds its four byte entries (Bytes) until an instruction
# takes them apart as two bf16 halves (mma.sync) or stores them back.
# Threads of a CTA run in groups that share a program counter; the group with the smallest one
# runs, up to its next branch, so that groups that diverged meet again and merge. bar.sync and
# warp-collective instructions (ldmatrix, mma.sync) wait until every thread they need stands at
# the same instruction; anything else (threads waiting at different barriers, a warp split at a
# collective, a barrier after some threads exited) is refused.
# Each thread has its own local memory (the entry's __local_depot); the parameter space holds each
# parameter's bytes (a struct by value, or several scalars and pointers).
# Modelled as: cp.async (and wgmma) at issue (commit_group and wait_group are no-ops), which assumes
# the kernel's barrier protocol (a stage is read only after the wait and the barrier that order
# it after its copy; racecheck tests that); membar and fences are no-ops (CTAs run one after
# another, so every earlier CTA's stores are visible); atom is executed in thread order.
# Every instruction not modelled raises ExecError naming its opcode and line: nothing is guessed.
# This file: values, memory and the running of a CTA; ptx_ops.py compiles the instructions.
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from itertools import repeat
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .ptx_ops import Program  # the instructions (ptx_ops.py imports this module)

M32 = 0xFFFFFFFF
PARAM_BASE = 1 << 48  # the parameter space's addresses (global buffers lie at k << 32, k < 2^16)
LOCAL_BASE = 1 << 47  # a thread's local memory (the entry's __local_depot), each thread its own
_MMA = "mma.m16n8k16.f32.bf16"  # the operation of an mma.sync element's node


class ExecError(Exception):
    """A kernel the executor refuses: an instruction it does not model, or a run outside its model."""


# ---------------------------------------------------------------------------------------------
# Values


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
        return self.node(4, _MMA, c, a_row, b_col)

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
    """divide_row's quotient (src/kernels/cuda/attention_mma.cu): c ? d : q is d where d = div.rn.f32(x, l),
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
            v.halves = (_half(e[0], e[1], dag), _half(e[2], e[3], dag))
        return v.halves
    if type(v) is int:
        got = dag.int_halves.get(v)
        if got is None:
            got = dag.int_halves[v] = (dag.const(v & 0xFFFF, 2), dag.const((v >> 16) & 0xFFFF, 2))
        return got
    raise TypeError(f"a bf16x2 operand that is not 32 bits of memory: {v!r:.40}")


def _half(lo, hi, dag: Dag) -> Node:
    if type(lo) is int and type(hi) is int:
        return dag.const(lo | hi << 8, 2)
    if type(lo) is tuple and lo[1] == 0 and hi == (lo[0], 1) and lo[0].width == 2:
        return lo[0]
    raise TypeError("a bf16 half made of bytes of different values")


# ---------------------------------------------------------------------------------------------
# Memory


class Buffer:
    """One global buffer: byte entries at [base, base + size), from `data` (an input's leaves), all
    zero, or unwritten (None: reading one is an error)."""

    def __init__(self, name: str, base: int, size: int, writable: bool = True, zero: bool = False,
                 data: list | None = None) -> None:
        self.name, self.base, self.size = name, base, size
        self.writable = writable
        self.data: list = data if data is not None else [0] * size if zero else [None] * size
        if len(self.data) != size:
            raise ExecError(f"{name}: {len(self.data)} bytes of data for {size}")

    def read(self, off: int, n: int) -> list:
        if off < 0 or off + n > self.size:
            raise ExecError(f"reads {self.name} bytes [{off}, {off + n}) outside its {self.size}")
        sl = self.data[off:off + n]
        if None in sl:
            raise ExecError(f"reads {self.name} bytes [{off}, {off + n}) that nothing wrote")
        return sl

    def write(self, off: int, entries: list) -> None:
        if not self.writable:
            raise ExecError(f"writes the input {self.name}")
        if off < 0 or off + len(entries) > self.size:
            raise ExecError(f"writes {self.name} bytes [{off}, {off + len(entries)}) outside its {self.size}")
        self.data[off:off + len(entries)] = entries


class GlobalMemory:
    """The kernel's global buffers, each at its own 2^32-aligned base address."""

    def __init__(self) -> None:
        self.buffers: dict[int, Buffer] = {}

    def add(self, name: str, size: int, **kw) -> Buffer:
        base = (len(self.buffers) + 1) << 32
        buf = self.buffers[base >> 32] = Buffer(name, base, size, **kw)
        return buf

    def at(self, addr: int) -> tuple[Buffer, int]:
        buf = self.buffers.get(addr >> 32)
        if buf is None:
            raise ExecError(f"global address {addr:#x} is in no buffer")
        return buf, addr - buf.base


# ---------------------------------------------------------------------------------------------
# Helpers the instructions share with the CTA


class _Const:
    """An operand that is the same for every thread: indexable and iterable like a register list."""

    __slots__ = ("v",)

    def __init__(self, v) -> None:
        self.v = v

    def __getitem__(self, _):
        return self.v

    def __iter__(self):
        return repeat(self.v)


def gm_read(gm: GlobalMemory, addr: int, n: int) -> list:
    buf, off = gm.at(addr)
    return buf.read(off, n)


# ---------------------------------------------------------------------------------------------
# Running a CTA


@dataclass
class Cta:
    """One CTA's state: registers (index -> value per thread), shared memory, and its place."""

    prog: Program
    n: int  # threads (blockDim.x; blockDim.y = z = 1)
    ctaid: tuple[int, int, int]
    nctaid: tuple[int, int, int]
    params: bytes | list[bytes]  # the parameter's bytes, or each parameter's
    gmem: GlobalMemory
    dag: Dag
    dynamic_smem: int
    regs: list = field(default_factory=list)
    smem: list = field(default_factory=list)
    smem_base: int = 1024
    sym_addr: dict[str, int] = field(default_factory=dict)
    decoded_rows: dict[int, tuple] = field(default_factory=dict)  # 16-byte shared row -> its 4 registers
    mma_operands: dict[tuple, tuple] = field(default_factory=dict)  # see _mma's operand()
    speculating: int = 0  # nesting of branches on predicate nodes being run both ways (no stores then)
    local: dict[int, list] = field(default_factory=dict)  # thread -> its local memory bytes

    def __post_init__(self) -> None:
        self.regs = [None] * len(self.prog.reg_index)
        at = 0
        externs = []  # every extern [] array is the dynamic shared memory
        for name, (align, size, _) in sorted(self.prog.shared.items(), key=lambda kv: kv[1][2]):
            if size < 0:
                externs.append((name, align))
                continue
            at = (at + align - 1) // align * align
            self.sym_addr[name] = self.smem_base + at
            at += size
        if externs:
            align = max(a for _, a in externs)
            at = (at + align - 1) // align * align
            for name, _ in externs:
                self.sym_addr[name] = self.smem_base + at
            at += self.dynamic_smem
        self.smem = [None] * at
        self._tid = list(range(self.n))
        self._lane = [t & 31 for t in range(self.n)]

    def dst(self, d: int) -> list:
        D = self.regs[d]
        if D is None:
            D = self.regs[d] = [None] * self.n
        return D

    def special(self, name: str):
        if name == "%tid.x":
            return self._tid
        if name == "%laneid":
            return self._lane
        if name in ("%tid.y", "%tid.z"):
            return _Const(0)
        if name in self.sym_addr:
            return _Const(self.sym_addr[name])
        if name in self.prog.param_symbols or name in self.prog.local:
            return _Const(self.symbol_address(name))
        if not name.startswith("%"):
            raise ExecError(f"symbol {name} not modelled")
        axis = "xyz".index(name[-1])
        if name.startswith("%ntid"):
            return _Const(self.n if axis == 0 else 1)
        if name.startswith("%ctaid"):
            return _Const(self.ctaid[axis])
        if name.startswith("%nctaid"):
            return _Const(self.nctaid[axis])
        raise ExecError(f"{name} not modelled")

    def symbol_address(self, sym: str) -> int:
        if sym in self.prog.param_symbols:  # the parameter space, read by ld.param only
            return PARAM_BASE + (self.prog.param_symbols.index(sym) << 20)
        if sym in self.prog.local:
            return LOCAL_BASE
        if sym in self.sym_addr:
            return self.sym_addr[sym]
        raise ExecError(f"symbol {sym} not modelled")

    def _local(self, addr: int, n: int, t: int) -> tuple[list, int]:
        mem = self.local.get(t)
        if mem is None:
            mem = self.local[t] = [None] * sum(self.prog.local.values())
        a = addr - LOCAL_BASE
        if t < 0 or a < 0 or a + n > len(mem) or addr % n:
            raise ExecError(f"local access [{addr:#x}, +{n}) outside the thread's local memory or unaligned")
        return mem, a

    def read(self, space: str, addr: int, n: int, t: int = -1) -> list:
        if space == "local":
            mem, a = self._local(addr, n, t)
            sl = mem[a:a + n]
            if None in sl:
                raise ExecError(f"reads local bytes [{addr:#x}, +{n}) that nothing wrote")
            return sl
        if space == "param":
            off = addr - PARAM_BASE
            params = [self.params] if type(self.params) is bytes else self.params
            i, off = off >> 20, off & ((1 << 20) - 1)
            if off < 0 or not 0 <= i < len(params) or off + n > len(params[i]):
                raise ExecError(f"ld.param outside the parameters ({len(params)})")
            return list(params[i][off:off + n])
        if space == "shared":
            a = addr - self.smem_base
            if a < 0 or a + n > len(self.smem) or addr % n:
                raise ExecError(f"shared access [{addr:#x}, +{n}) outside the CTA's shared memory or unaligned")
            sl = self.smem[a:a + n]
            if None in sl:
                raise ExecError(f"reads shared bytes [{addr:#x}, +{n}) that nothing wrote")
            return sl
        if space == "global":
            if addr % n:
                raise ExecError(f"global access [{addr:#x}, +{n}) unaligned")
            return gm_read(self.gmem, addr, n)
        raise ExecError(f"{space} memory not modelled")

    def write(self, space: str, addr: int, entries: list, t: int = -1) -> None:
        n = len(entries)
        if space == "local":
            mem, a = self._local(addr, n, t)
            mem[a:a + n] = entries
            return
        if self.speculating:
            raise ExecError(f"a {space} store under a branch on a floating-point value (not modelled)")
        if addr % n:
            raise ExecError(f"{space} store [{addr:#x}, +{n}) unaligned")
        if space == "shared":
            a = addr - self.smem_base
            if a < 0 or a + n > len(self.smem):
                raise ExecError(f"shared store [{addr:#x}, +{n}) outside the CTA's shared memory")
            self.smem[a:a + n] = entries
            for row in range(addr & ~15, addr + n, 16):
                self.decoded_rows.pop(row, None)
        elif space == "global":
            buf, off = self.gmem.at(addr)
            buf.write(off, entries)
        else:
            raise ExecError(f"stores to {space} memory not modelled")


@dataclass
class _Group:
    pc: int
    tids: list[int]
    waiting: bool = False


MAX_STEPS = 10_000_000  # group runs (each up to a branch) a CTA may take before it is refused


def run_cta(cta: Cta) -> None:
    """Runs every thread of the CTA to its exit. Errors: ExecError (what and where).
    A branch on a predicate node (a comparison of floating-point values) runs its threads both ways
    up to the branch's immediate post-dominator, one way after the other from the same registers and
    local memory, and there joins every register (and local byte) the two ways left different:
    select(predicate, taken, not taken) (Dag.select; a value that cannot be joined so raises where it
    is used). Shared and global stores, barriers, warp-collectives and exits on either way are refused."""
    groups = [_Group(0, list(range(cta.n)))]
    exited = 0
    steps = 0
    while groups:
        steps += 1
        if steps > MAX_STEPS:
            raise ExecError(f"the CTA runs past {MAX_STEPS} steps (at {cta.prog.line(groups[0].pc)})")
        groups = _merged(groups)
        runnable = [g for g in groups if not g.waiting]
        if runnable:
            g = min(runnable, key=lambda x: x.pc)
            groups.remove(g)
            out, gone = _run_group(cta, g)
            exited += gone
            groups += out
            continue
        _resolve_wait(cta, groups, exited)


def _merged(groups: list[_Group]) -> list[_Group]:
    by_pc: dict[int, _Group] = {}
    for g in groups:
        h = by_pc.get(g.pc)
        if h is None:
            by_pc[g.pc] = g
        else:
            h.tids = sorted(h.tids + g.tids)
            h.waiting = h.waiting and g.waiting
    return list(by_pc.values())


def _resolve_wait(cta: Cta, groups: list[_Group], exited: int) -> None:
    """Every group waits at a barrier or a collective: run a collective whose warps are all there,
    else pass a barrier every live thread stands at; anything else is refused."""
    prog = cta.prog
    for g in sorted(groups, key=lambda x: x.pc):
        kind, payload = prog.handlers[g.pc]
        if kind != "collective":
            continue
        warps = sorted({t >> 5 for t in g.tids})
        members = set(g.tids)
        if all(all((w << 5) + lane in members for lane in range(32)) for w in warps):
            try:
                for w in warps:
                    payload(cta, w << 5)
            except ExecError as e:
                raise ExecError(f"{prog.line(g.pc)}: {e}") from None
            except (TypeError, ValueError, IndexError, KeyError, AttributeError, OverflowError) as e:
                raise ExecError(f"{prog.line(g.pc)}: {type(e).__name__}: {e}") from None
            g.pc += 1
            g.waiting = False
            return
    if len(groups) == 1 and not exited and prog.handlers[groups[0].pc][0] == "bar":
        groups[0].pc += 1
        groups[0].waiting = False
        return
    where = "; ".join(f"{len(g.tids)} threads at {prog.line(g.pc)[:80]}" for g in groups)
    raise ExecError(f"threads do not meet at a barrier or collective ({exited} exited): {where}")


def _run_group(cta: Cta, g: _Group, stop: int = -1) -> tuple[list[_Group], int]:
    """Runs g up to its next branch, barrier or collective (or instruction `stop`): (the groups it
    becomes, threads exited)."""
    prog = cta.prog
    handlers = prog.handlers
    while True:
        if g.pc == stop:
            return [g], 0
        kind, payload = handlers[g.pc]
        if kind == "run":
            try:
                payload(cta, g.tids)
            except ExecError as e:
                raise ExecError(f"{prog.line(g.pc)}: {e}") from None
            except (TypeError, ValueError, IndexError, KeyError, ZeroDivisionError, AttributeError, OverflowError) as e:
                raise ExecError(f"{prog.line(g.pc)}: {type(e).__name__}: {e}") from None
            g.pc += 1
            continue
        if kind in ("bar", "collective"):
            g.waiting = True
            return [g], 0
        if kind == "ret":
            return [], len(g.tids)
        target, p, neg = payload
        dest = prog.labels[target]
        if p is None:
            g.pc = dest
            return [g], 0
        P = cta.regs[p]
        if P is None:
            raise ExecError(f"{prog.line(g.pc)}: branch on a predicate never written")
        taken, rest, both = [], [], []
        for t in g.tids:
            v = P[t]
            if type(v) is not int:
                if type(v) is not Node or v.width:
                    raise ExecError(f"{prog.line(g.pc)}: branch on a predicate that is no predicate ({v!r:.40})")
                both.append(t)
            elif bool(v) != neg:
                taken.append(t)
            else:
                rest.append(t)
        if both:
            out = [_Group(_both_ways(cta, g.pc, dest, both, P, neg), both)]
            return out + [_Group(pc, ts) for pc, ts in ((dest, taken), (g.pc + 1, rest)) if ts], 0
        if len(taken) == len(g.tids):
            g.pc = dest
            return [g], 0
        if not taken:
            g.pc += 1
            return [g], 0
        return [_Group(dest, taken), _Group(g.pc + 1, rest)], 0


class Unjoined:
    """A register the two ways of a branch on a predicate node left with values no select joins
    (memory bytes, integers): any use raises."""

    __slots__ = ()


_UNJOINED = Unjoined()


def _both_ways(cta: Cta, pc: int, dest: int, tids: list[int], P: list, neg: bool) -> int:
    """Runs tids from the branch at pc both ways to its join (see run_cta); returns the join."""
    from .ptx_ops import join_of
    join, written, preds = join_of(cta.prog, pc)
    regs = cta.regs
    saved = {r: None if regs[r] is None else list(regs[r]) for r in written}
    local = {t: list(cta.local[t]) for t in tids if t in cta.local}
    cta.speculating += 1
    try:
        _run_until(cta, [_Group(dest, list(tids))], join)
        taken = {r: None if regs[r] is None else [regs[r][t] for t in tids] for r in written}
        taken_local = {t: cta.local.get(t) for t in tids}
        for r in written:
            regs[r] = None if saved[r] is None else list(saved[r])
        for t in tids:
            if t in local:
                cta.local[t] = list(local[t])
            else:
                cta.local.pop(t, None)
        _run_until(cta, [_Group(pc + 1, list(tids))], join)
    finally:
        cta.speculating -= 1
    dag = cta.dag
    for t in tids:
        if taken_local[t] is not None or t in cta.local:
            c = dag.negate(P[t]) if neg else P[t]
            cta.local[t] = _join_bytes(dag, c, taken_local[t], cta.local.get(t))
    for r in written:
        A = taken[r]
        if A is None and regs[r] is None:
            continue
        D = cta.dst(r)
        for i, t in enumerate(tids):
            a, b = None if A is None else A[i], D[t]
            if a is b or a is None or b is None or (type(a) is int and type(b) is int and a == b) or \
                    (type(a) is Bytes and type(b) is Bytes and a.entries == b.entries):
                D[t] = a if a is b or (a is not None and b is not None) else None
                continue
            if (type(a) is int or type(b) is int) and r not in preds:
                D[t] = _UNJOINED
                continue
            try:
                D[t] = dag.select(dag.negate(P[t]) if neg else P[t], a, b)
            except (TypeError, AttributeError):
                D[t] = _UNJOINED
    return join


def _join_bytes(dag: Dag, c, a: list | None, b: list | None) -> list:
    """A thread's local memory after the two ways: bytes that differ, where they are whole values of
    one node on each way (an f32 stored on both), become the bytes of select(c, a, b); other differing
    bytes are unwritten (None: a read of them raises)."""
    if a is None or b is None:
        a, b = a or [None] * len(b), b or [None] * len(a)
    out = list(b)
    i = 0
    while i < len(a):
        x, y = a[i], b[i]
        if x is y or x == y:
            i += 1
            continue
        if type(x) is tuple and type(y) is tuple and x[1] == 0 and y[1] == 0 and x[0].width == y[0].width and \
                a[i:i + x[0].width] == list(x[0].bytes) and b[i:i + y[0].width] == list(y[0].bytes):
            try:
                out[i:i + x[0].width] = list(dag.select(c, x[0], y[0]).bytes)
                i += x[0].width
                continue
            except TypeError:
                pass
        out[i] = None
        i += 1
    return out


def _run_until(cta: Cta, groups: list[_Group], stop: int) -> None:
    """Runs the groups until all stand at instruction stop."""
    steps = 0
    while True:
        groups = _merged(groups)
        runnable = [g for g in groups if g.pc != stop]
        if not runnable:
            return
        steps += 1
        if steps > MAX_STEPS:
            raise ExecError(f"a branch on a floating-point value runs past {MAX_STEPS} steps")
        g = min(runnable, key=lambda x: x.pc)
        groups.remove(g)
        out, gone = _run_group(cta, g, stop)
        if gone or any(o.waiting for o in out):
            where = cta.prog.line(g.pc if gone else next(o.pc for o in out if o.waiting))
            raise ExecError(f"an exit, barrier or warp-collective under a branch on a floating-point value "
                            f"({where})")
        groups += out


def param_bytes(size: int, fields: dict[int, tuple[int, int]]) -> bytes:
    """A parameter struct of `size` bytes: offset -> (value, bytes), little-endian, the rest 0."""
    out = bytearray(size)
    for off, (v, n) in fields.items():
        out[off:off + n] = (v & ((1 << 8 * n) - 1)).to_bytes(n, "little")
    return bytes(out)
