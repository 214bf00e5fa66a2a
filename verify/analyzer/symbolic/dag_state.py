# The machine state of dag.py's symbolic execution of LLVM IR: one run's context (the modules its
# calls execute, memory by (base, byte offset), the step budget), operand getters (a register of
# the environment, or a constant computed once), and memory's loads and stores. A pointer is
# ("ptr", base, byte offset); a load of memory never written is a leaf of the DAG (an input
# element); a load of a constant global reads its initializer (frontend/llvm.py); a load that
# meets stores of another size raises Unsupported.
from __future__ import annotations

import re
import struct

from ..domains.dag_values import BV, Unsupported, _BYTE_BITS, _INT_BYTES, _fconst, _to_u, node
from ..frontend.llvm import LlvmModule
from ..frontend.llvm_types import split_top, type_size

FLOATS = ("float", "double", "half", "bfloat")


def width(t: str) -> int:
    """Bits of an integer (or integer vector element) type; 64 for pointers."""
    t = t.strip()
    m = re.match(r"^<\d+ x (.+)>$", t)
    if m:
        t = m.group(1).strip()
    m = re.match(r"^i(\d+)$", t)
    if m:
        return int(m.group(1))
    return 64


class Ctx:
    """One run: the modules whose functions calls execute, pure callees, memory and budget.
    call(ctx, module, name, args) executes a function (dag.py's executor: the instructions'
    closures call through it, so that they need not import the executor)."""

    def __init__(self, modules: list[LlvmModule], pure: str, max_steps: int, call) -> None:
        self.modules = modules
        self.pure = re.compile(pure) if pure else None
        self.memory: dict[tuple, tuple] = {}  # (base, byte offset) -> (value, size)
        self.written: dict[tuple, int] = {}  # (base, byte) -> offset of the element holding it
        self.written_bases: set[str] = set()
        self.steps = 0
        self.max_steps = max_steps
        self.frames = 0
        self.call = call

    def find(self, name: str) -> LlvmModule | None:
        for m in self.modules:
            if name in m.funcs:
                return m
        return None

    def owner(self, base: str) -> LlvmModule | None:
        for m in self.modules:
            if base in m.globals:
                return m
        return None


def fails(why: str):
    """A closure that raises Unsupported(why) when run (an instruction the reader could not compile)."""

    def fail(env, ctx):
        raise Unsupported(why)
    return fail


def getter(tok: str, ty: str):
    """env -> the operand's value (constants computed once)."""
    tok = tok.strip()
    if tok.startswith("%"):
        def get(env, tok=tok):
            try:
                return env[tok]
            except KeyError:
                raise Unsupported(f"use of undefined {tok}") from None
        return get
    if tok.startswith("<") and "%" in tok:  # a vector of operands
        et = re.match(r"^<\d+ x (.+)>$", ty.strip()).group(1)
        gs = [getter(x.strip().split(" ", 1)[1], et) for x in split_top(tok[1:-1])]
        return lambda env: tuple(g(env) for g in gs)
    v = value(tok, ty, {})
    return lambda env: v


def value(tok: str, ty: str, env: dict):
    """The operand tok of type ty: a register of env, or a constant (ints, pointers to globals,
    floating-point constants as nodes, vectors as tuples)."""
    tok = tok.strip()
    if tok.startswith("%"):
        if tok not in env:
            raise Unsupported(f"use of undefined {tok}")
        return env[tok]
    if tok in ("true", "false"):
        return 1 if tok == "true" else 0
    if tok == "null":
        return None
    if tok in ("undef", "poison"):
        m = re.match(r"^<(\d+) x", ty.strip())
        return tuple(node("undef") for _ in range(int(m.group(1)))) if m else node("undef")
    if tok == "zeroinitializer":
        m = re.match(r"^<(\d+) x (\w+)>", ty.strip())
        if m:
            z = _fconst("0.0") if m.group(2) in FLOATS else 0
            return tuple(z for _ in range(int(m.group(1))))
        return _fconst("0.0") if ty.strip() in FLOATS else 0
    if tok.startswith("<"):
        inner = tok[1:-1]
        et = re.match(r"^<\d+ x (.+)>$", ty.strip()).group(1)
        return tuple(value(x.strip().split(" ", 1)[1], et, env) for x in split_top(inner))
    if ty.strip() in FLOATS:
        return _fconst(tok)
    if re.match(r"^-?\d+$", tok):
        return int(tok)
    if tok.startswith("@"):
        return ("ptr", tok, 0)
    raise Unsupported(f"operand {tok}")


def is_ptr(v) -> bool:
    return type(v) is tuple and len(v) == 3 and v[0] == "ptr"


def is_vec(x) -> bool:
    return type(x) is tuple and not (x and x[0] == "ptr")


def shape_of(ty: str, module: LlvmModule) -> tuple:
    """(lanes, element type, element size, vector?) of a loaded or stored type."""
    m = re.match(r"^<(\d+) x (.+)>$", ty)
    if m:
        return (int(m.group(1)), m.group(2).strip(), type_size(m.group(2), module.types), True)
    return (1, ty, type_size(ty, module.types), False)


def load(shape: tuple, p, ctx: Ctx):
    """The value (or vector) of shape at pointer p: as stored, a constant global's, or an input leaf."""
    n, et, size, vector = shape
    if not is_ptr(p):
        raise Unsupported(f"load through {p!r:.60}")
    base, off = p[1], p[2]
    vals = []
    for j in range(n):
        o = off + j * size
        got = ctx.memory.get((base, o))
        if got is not None and got[1] == size:
            vals.append(got[0])
            continue
        if base in ctx.written_bases and any((base, b) in ctx.written for b in range(o, o + size)):
            vals.append(_assemble(ctx, base, o, size, et))
            continue
        if base.startswith("@"):
            owner = ctx.owner(base)
            if owner is None:
                raise Unsupported(f"load from {base}, not a constant global")
            vals.append(owner.global_element(base, o, size))
            continue
        if et == "float":
            vals.append(node("in", base, o))
        elif et in _INT_BYTES:  # bit i: bit i % 8 of byte i / 8 (little-endian), whatever the width
            bits: tuple = ()
            for b in range(o, o + _INT_BYTES[et]):
                got = _BYTE_BITS.get((base, b))
                if got is None:
                    leaf = node("in", base, b, "i8")
                    got = _BYTE_BITS[(base, b)] = tuple(node("bit", i, leaf) for i in range(8))
                bits += got
            vals.append(BV(bits))
        else:
            vals.append(node("in", base, o, et))
    return tuple(vals) if vector else vals[0]


def _assemble(ctx: Ctx, base: str, o: int, size: int, et: str):
    """An element read across bytes that byte stores of constants wrote (a memset): its value."""
    bits = 0
    for b in range(o, o + size):
        got = ctx.memory.get((base, b))
        if got is None or got[1] != 1 or type(got[0]) is not int:
            raise Unsupported(f"load at {base}+{o} of {size} bytes overlaps stores of another size")
        bits |= _to_u(got[0], 8) << (8 * (b - o))
    if et == "float":
        return _fconst(repr(struct.unpack("<f", struct.pack("<I", bits))[0]))
    if et == "double":
        return node("const", bits)
    if et.startswith("i"):
        return bits
    raise Unsupported(f"load of {et} from bytes")


def store(shape: tuple, p, v, ctx: Ctx) -> None:
    """Writes v (a value, or a vector of them) at pointer p; an element it overlaps in part is lost."""
    n, et, size, vector = shape
    if not is_ptr(p):
        raise Unsupported(f"store through {p!r:.60}")
    base, off = p[1], p[2]
    if base.startswith("@"):
        raise Unsupported(f"store to global {base}")
    vals = v if vector else (v,)
    mem, written = ctx.memory, ctx.written
    ctx.written_bases.add(base)
    for j in range(n):
        o = off + j * size
        for b in range(o, o + size):
            prev = written.get((base, b))
            if prev is not None and prev != o:
                mem.pop((base, prev), None)  # partly overwritten: its other bytes read as Unsupported
            written[(base, b)] = o
        mem[(base, o)] = (vals[j], size)


