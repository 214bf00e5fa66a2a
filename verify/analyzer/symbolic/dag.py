# Symbolic execution of the CPU kernels' LLVM IR (the issue's direction (b), on the compiled
# code): pointers, addresses and the integers that steer control flow are concrete; every value
# computed from the kernel's input memory is a node of a hash-consed operation DAG whose leaves
# are the input elements read (tensor, byte offset, type). Running a function for given shapes
# gives, for every output element it stores, the exact operation DAG (which operations, on which
# logical operands, in which order and grouping, the weight decoders' integer operations
# included): two functions evaluate an element alike iff the DAGs are the same node. Used to
# compare the CPU matmul's micro-kernels dot_block<R, C> (microkernels.py) and its one-row and
# tiled paths (rowkernels.py).
# Semantics: integers have LLVM's two's-complement wrap-around at their width; a load must read
# whole elements exactly as stored, or memory never written (a leaf), or a constant global; calls
# to functions defined in the given modules are executed, indirect ones through constant tables
# of function pointers; callees declared pure are uninterpreted functions of their operands (and
# may only read memory the run has not written). Supported: the scalar and vector instructions
# clang -O3 emits for these kernels. Anything else (a branch or address on a symbolic value, an
# unknown instruction or intrinsic, a partial overlap of stores and loads) raises Unsupported,
# naming it: the comparison is then not proven. The values themselves (nodes, integer bits,
# constants) are dag_values.py's; equality up to the AVX-512 decoders' table lookups is
# dag_tables.py's.
from __future__ import annotations

import re
import struct

from ..domains.dag_values import (BV, N, Agg, Unsupported, _BYTE_BITS, _INT_BYTES, _COMMUTATIVE,  # noqa: F401
                        _bits, _bnot, _band, _bor, _bxor, _bv_op, _const_of, _fconst, _fold, _from_bits, _to_s,
                        _to_u, _wrap, node, reset)
from ..domains.dag_tables import same, perm_equal  # noqa: F401
from ..frontend.llvm import balanced, split_top


_TYPE_SIZES = {"float": 4, "double": 8, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "i1": 1, "half": 2, "bfloat": 2}
_FLOATS = ("float", "double", "half", "bfloat")


def type_size(t: str, types: dict[str, str]) -> int:
    t = t.strip()
    if t.endswith("*") or t == "ptr":
        return 8
    if t in _TYPE_SIZES:
        return _TYPE_SIZES[t]
    m = re.match(r"^<(\d+) x (.+)>$", t)
    if m:
        return int(m.group(1)) * type_size(m.group(2), types)
    m = re.match(r"^\[(\d+) x (.+)\]$", t)
    if m:
        return int(m.group(1)) * type_size(m.group(2), types)
    if t in types:
        return type_size(types[t], types)
    m = re.match(r"^<?\{(.*)\}>?$", t)
    if m:
        fields = split_top(m.group(1))
        if not fields:
            return 0
        last = field_offsets(t, types)[-1] + type_size(fields[-1], types)
        a = 1 if t.startswith("<{") else type_align(t, types)
        return (last + a - 1) // a * a
    raise Unsupported(f"size of type {t}")


def type_align(t: str, types: dict[str, str]) -> int:
    """The ABI alignment of a type (x86-64: natural for scalars, the element's for arrays, the
    widest field's for structs)."""
    t = t.strip()
    if t.endswith("*") or t == "ptr":
        return 8
    if t in _TYPE_SIZES:
        return _TYPE_SIZES[t]
    m = re.match(r"^<(\d+) x (.+)>$", t)
    if m:
        return type_size(t, types)
    m = re.match(r"^\[(\d+) x (.+)\]$", t)
    if m:
        return type_align(m.group(2), types)
    if t in types:
        return type_align(types[t], types)
    if t.startswith("<{"):
        return 1
    m = re.match(r"^\{(.*)\}$", t)
    if m:
        return max([type_align(x, types) for x in split_top(m.group(1))] or [1])
    raise Unsupported(f"alignment of type {t}")


def field_offsets(t: str, types: dict[str, str]) -> list[int]:
    """Byte offsets of a struct type's fields (each at its alignment; packed: none)."""
    t = types.get(t.strip(), t.strip())
    packed = t.startswith("<{")
    fields = split_top(t[2:-2] if packed else t[1:-1])
    out, off = [], 0
    for f in fields:
        if not packed:
            a = type_align(f, types)
            off = (off + a - 1) // a * a
        out.append(off)
        off += type_size(f, types)
    return out


def _width(t: str) -> int:
    """Bits of an integer (or integer vector element) type; 64 for pointers."""
    t = t.strip()
    m = re.match(r"^<\d+ x (.+)>$", t)
    if m:
        t = m.group(1).strip()
    m = re.match(r"^i(\d+)$", t)
    if m:
        return int(m.group(1))
    return 64


class Module:
    """The functions (as raw lines), named types and constant globals of one .ll file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.funcs: dict[str, tuple[list[str], list[str]]] = {}
        self.types: dict[str, str] = {}
        self.globals: dict[str, str] = {}  # @name -> "type initializer" of a constant
        self._flat: dict[str, dict[int, tuple[int, object]]] = {}
        lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
        i = 0
        while i < len(lines):
            ln = lines[i]
            tm = re.match(r"^(%[\w.\"\\:()\-<> ]+?) = type (.*)$", ln)
            if tm:
                self.types[tm.group(1)] = tm.group(2).strip()
            gm = re.match(r"^(@[\w.$-]+) = .*?\bconstant (.*?)(?:, align \d+)?$", ln)
            if gm:
                self.globals[gm.group(1)] = gm.group(2)
            m = re.match(r"^define .*?@([\w.$\"-]+)\(", ln)
            if m and ln.endswith("{"):
                params = [re.search(r"(%[\w.$-]+)\s*$", p.strip()).group(1)
                          for p in split_top(balanced(ln, m.end() - 1)) if p.strip()]
                body = []
                i += 1
                while lines[i] != "}":
                    s = lines[i].split(";")[0].rstrip() if not lines[i].strip().startswith(";") else ""
                    if lines[i].lstrip().startswith("to label") and body:
                        body[-1] += " " + lines[i].strip()
                    elif body and body[-1].lstrip().startswith("switch") and not body[-1].rstrip().endswith("]"):
                        body[-1] += " " + s.strip()  # a switch's case list, one case a line
                    elif s.strip():
                        body.append(s)
                    i += 1
                self.funcs[m.group(1)] = (params, body)
            i += 1

    def global_element(self, name: str, off: int, size: int):
        """The constant at byte `off` of global `name` (an element of `size` bytes), or raises."""
        if name not in self._flat:
            if name not in self.globals:
                raise Unsupported(f"load from {name}, not a constant global of the module")
            flat: dict[int, tuple[int, object]] = {}
            ty, init = _split_typed(self.globals[name])
            self._flatten(ty, init, 0, flat)
            self._flat[name] = flat
        got = self._flat[name].get(off)
        if got is None or got[0] != size:
            raise Unsupported(f"load of {size} bytes at {name}+{off}: not an element of its initializer")
        return got[1]

    def _flatten(self, ty: str, init: str, base: int, out: dict) -> None:
        ty, init = ty.strip(), init.strip()
        t = self.types.get(ty, ty)
        if init == "zeroinitializer":
            out[base] = (type_size(ty, self.types), 0)  # only whole-element reads of it succeed
            return
        if ty.endswith("*") or ty == "ptr":
            if init == "null":
                out[base] = (8, None)
            elif init.startswith("@"):
                out[base] = (8, ("ptr", init, 0))
            else:
                raise Unsupported(f"initializer {init[:40]}")
            return
        if re.match(r"^i\d+$", ty):
            out[base] = (type_size(ty, self.types), int(init))
            return
        am = re.match(r"^\[(\d+) x (.+)\]$", t)
        sm = re.match(r"^<?\{(.*)\}>?$", t)
        if am and init.startswith("["):
            et = am.group(2)
            step = type_size(et, self.types)
            for j, item in enumerate(split_top(init[1:-1])):
                ity, ival = _split_typed(item)
                self._flatten(ity, ival, base + j * step, out)
            return
        if sm and init.startswith("{"):
            for off, item in zip(field_offsets(t, self.types), split_top(init[1:-1])):
                ity, ival = _split_typed(item)
                self._flatten(ity, ival, base + off, out)
            return
        raise Unsupported(f"constant of type {ty[:40]}")


def _split_typed(s: str) -> tuple[str, str]:
    """'TYPE VALUE' -> (TYPE, VALUE): the value is an aggregate in [] or {} at the end, or the
    last token."""
    s = s.strip()
    if s and s[-1] in "]}>":
        close, opening = s[-1], {"]": "[", "}": "{", ">": "<"}[s[-1]]
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += {close: 1, opening: -1}.get(s[i], 0)
            if depth == 0:
                return s[:i].strip(), s[i:]
        raise Unsupported(f"initializer {s[:40]}")
    head, _, tok = s.rpartition(" ")
    return head.strip(), tok


class _Ctx:
    """One run: the modules whose functions calls execute, pure callees, memory and budget."""

    def __init__(self, modules: list[Module], pure: str, max_steps: int) -> None:
        self.modules = modules
        self.pure = re.compile(pure) if pure else None
        self.memory: dict[tuple, tuple] = {}  # (base, byte offset) -> (value, size)
        self.written: dict[tuple, int] = {}  # (base, byte) -> offset of the element holding it
        self.written_bases: set[str] = set()
        self.steps = 0
        self.max_steps = max_steps
        self.frames = 0

    def find(self, name: str) -> Module | None:
        for m in self.modules:
            if name in m.funcs:
                return m
        return None

    def owner(self, base: str) -> Module | None:
        for m in self.modules:
            if base in m.globals:
                return m
        return None


def run(module: Module, name: str, args: list, max_steps: int = 20_000_000, memory: dict | None = None,
        modules: list[Module] | None = None, pure: str = "") -> dict[tuple, object]:
    """Executes function `name` with args (ints, ("ptr", base, byte offset), None for null) and
    returns the memory it wrote: (base, byte offset) -> value (a DAG node, or an int, or a
    pointer). memory: initial contents, (base, offset) -> (value, size in bytes) (pointer arrays).
    modules: further modules whose functions a call may execute; pure: regex of callees treated
    as uninterpreted functions."""
    ctx = _Ctx([module] + list(modules or []), pure, max_steps)
    for (base, off), (v, size) in (memory or {}).items():
        ctx.memory[(base, off)] = (v, size)
        for b in range(off, off + size):
            ctx.written[(base, b)] = off
        ctx.written_bases.add(base)
    _call(ctx, module, name, args)
    init = set(memory or {})
    return {k: v for k, (v, _) in ctx.memory.items() if k not in init or (memory or {})[k][0] is not v}


def _call(ctx: _Ctx, module: Module, name: str, args: list):
    params, order, blocks = _compiled(module, name)
    if len(args) != len(params):
        raise Unsupported(f"call of {name} with {len(args)} arguments")
    env: dict[str, object] = dict(zip(params, args))
    ctx.frames += 1
    env["#frame"] = ctx.frames
    cur, prev = order[0], None
    while True:
        phis, body, fall = blocks[cur]
        if phis:
            env.update({d: incoming[prev](env) for d, incoming in phis})
        nxt = None
        for f in body:
            res = f(env, ctx)
            if res is not None:
                if type(res) is tuple and res[0] == "ret":
                    return res[1]
                nxt = res
                break
        ctx.steps += len(body)
        if ctx.steps > ctx.max_steps:
            raise Unsupported("step budget exceeded")
        prev, cur = cur, (nxt or fall)


_COMPILED: dict[tuple[int, str], tuple] = {}


def _compiled(module: Module, name: str):
    """The function's blocks, each instruction parsed once into a closure: label -> (phis
    [(dst, {pred: getter})], [closure], fall-through label)."""
    key = (id(module), name)
    if key in _COMPILED:
        return _COMPILED[key]
    params, body = module.funcs[name]
    entry = f"%{len(params)}" if all(re.match(r"^%\d+$", p) for p in params) else "%entry"  # LLVM numbers it
    raw: dict[str, list[str]] = {entry: []}
    order = [entry]
    for ln in body:
        lm = re.match(r"^([\w.$-]+):", ln)
        if lm:
            order.append("%" + lm.group(1))
            raw[order[-1]] = []
        else:
            raw[order[-1]].append(ln.strip())
    if not raw[entry] and len(order) > 1:
        del raw[entry]
        order = order[1:]
    blocks = {}
    for i, lab in enumerate(order):
        phis, closures = [], []
        for ln in raw[lab]:
            m = re.match(r"^(%[\w.$-]+) = phi (.+?) (\[.*)$", ln)
            if m:
                incoming = {plab: _getter(val.strip(), m.group(2))
                            for val, plab in re.findall(r"\[\s*([^\[\]]+?),\s*(%[\w.$-]+)\s*\]", m.group(3))}
                phis.append((m.group(1), incoming))
            else:
                try:
                    closures.append(_compile(ln, module))
                except (AttributeError, ValueError, IndexError, KeyError, Unsupported) as e:
                    closures.append(_fails(f"cannot read {ln[:80]} ({type(e).__name__})"))
        blocks[lab] = (phis, closures, order[i + 1] if i + 1 < len(order) else None)
    _COMPILED[key] = (params, order, blocks)
    return _COMPILED[key]


def _fails(why: str):
    def fail(env, ctx):
        raise Unsupported(why)
    return fail


def _getter(tok: str, ty: str):
    """env -> the operand's value (constants computed once)."""
    tok = tok.strip()
    if tok.startswith("%"):
        def get(env, tok=tok):
            if tok not in env:
                raise Unsupported(f"use of undefined {tok}")
            return env[tok]
        return get
    if tok.startswith("<") and "%" in tok:  # a vector of operands
        et = re.match(r"^<\d+ x (.+)>$", ty.strip()).group(1)
        gs = [_getter(x.strip().split(" ", 1)[1], et) for x in split_top(tok[1:-1])]
        return lambda env: tuple(g(env) for g in gs)
    v = _value(tok, ty, {})
    return lambda env: v


def _value(tok: str, ty: str, env: dict):
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
            z = _fconst("0.0") if m.group(2) in _FLOATS else 0
            return tuple(z for _ in range(int(m.group(1))))
        return _fconst("0.0") if ty.strip() in _FLOATS else 0
    if tok.startswith("<"):
        inner = tok[1:-1]
        et = re.match(r"^<\d+ x (.+)>$", ty.strip()).group(1)
        return tuple(_value(x.strip().split(" ", 1)[1], et, env) for x in split_top(inner))
    if ty.strip() in _FLOATS:
        return _fconst(tok)
    if re.match(r"^-?\d+$", tok):
        return int(tok)
    if tok.startswith("@"):
        return ("ptr", tok, 0)
    raise Unsupported(f"operand {tok}")


def _is_ptr(v) -> bool:
    return type(v) is tuple and len(v) == 3 and v[0] == "ptr"


def _vec(x) -> bool:
    return type(x) is tuple and not (x and x[0] == "ptr")


_FP = {"fadd": "add", "fsub": "sub", "fmul": "mul", "fdiv": "div", "frem": "rem"}


def _int_fn(op: str, w: int):
    """The concrete w-bit integer operation; None where it is undefined (division by zero)."""
    mask = (1 << w) - 1
    if op == "add":
        return lambda a, b: _wrap(a + b, w)
    if op == "sub":
        return lambda a, b: _wrap(a - b, w)
    if op == "mul":
        return lambda a, b: _wrap(a * b, w)
    if op == "and":
        return lambda a, b: _wrap(a & b, w)
    if op == "or":
        return lambda a, b: _wrap(a | b, w)
    if op == "xor":
        return lambda a, b: _wrap(a ^ b, w)
    if op == "shl":
        return lambda a, b: _wrap((a << _to_u(b, w)) & mask, w)
    if op == "lshr":
        return lambda a, b: _to_u(a, w) >> _to_u(b, w)
    if op == "ashr":
        return lambda a, b: _to_s(a, w) >> _to_u(b, w)

    def div(a, b, signed, rem):
        x, y = (_to_s(a, w), _to_s(b, w)) if signed else (_to_u(a, w), _to_u(b, w))
        if y == 0:
            raise Unsupported("integer division by zero")
        q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
        return _wrap(x - q * y if rem else q, w)
    return {"sdiv": lambda a, b: div(a, b, True, False), "udiv": lambda a, b: div(a, b, False, False),
            "srem": lambda a, b: div(a, b, True, True), "urem": lambda a, b: div(a, b, False, True)}[op]


_INT_OPS = ("add", "sub", "mul", "and", "or", "xor", "shl", "lshr", "ashr", "sdiv", "udiv", "srem", "urem")
_ICMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "slt": lambda a, b: a < b, "sle": lambda a, b: a <= b,
         "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b, "ult": lambda a, b: a < b, "ule": lambda a, b: a <= b,
         "ugt": lambda a, b: a > b, "uge": lambda a, b: a >= b}


def _int_op(op: str, w: int):
    f = _int_fn(op, w)

    def one(x, y):
        if type(x) is int and type(y) is int:
            return f(x, y)
        if _is_ptr(x) and type(y) is int and op in ("add", "sub") and w == 64:
            return ("ptr", x[1], x[2] + (y if op == "add" else -y))
        if _is_ptr(x) and _is_ptr(y) and op == "sub" and x[1] == y[1]:
            return x[2] - y[2]
        if _is_ptr(x) or _is_ptr(y) or x is None or y is None:
            raise Unsupported(f"integer {op} on a pointer")
        return _bv_op(op, w, x, y)
    return one


def _compile(ln: str, module: Module):
    """One instruction as a closure (env, ctx) -> None | next label | ("ret", value)."""
    m = re.match(r"^(%[\w.$-]+) = (.*)$", ln)
    dst, rest = (m.group(1), m.group(2)) if m else (None, ln)
    rest = re.sub(r"^(tail|musttail|notail) ", "", rest)
    op = rest.split()[0]
    if op == "br":
        c = re.match(r"^br i1 ([^,]+), label (%[\w.$-]+), label (%[\w.$-]+)", rest)
        if c:
            cond, t, f = _getter(c.group(1), "i1"), c.group(2), c.group(3)

            def branch(env, ctx):
                v = cond(env)
                if type(v) is not int:
                    raise Unsupported(f"branch on a computed value: {ln[:80]}")
                return t if v else f
            return branch
        target = re.match(r"^br label (%[\w.$-]+)", rest).group(1)
        return lambda env, ctx: target
    if op == "switch":
        sm = re.match(r"^switch (\S+) ([^,]+), label (%[\w.$-]+) \[(.*)\]", rest)
        ty, gv, default = sm.group(1), _getter(sm.group(2), sm.group(1)), sm.group(3)
        w = _width(ty)
        cases = {_to_u(int(v), w): lab for v, lab in re.findall(r"i\d+ (-?\d+), label (%[\w.$-]+)", sm.group(4))}

        def switch(env, ctx):
            v = gv(env)
            if type(v) is not int:
                raise Unsupported(f"switch on a computed value: {ln[:80]}")
            return cases.get(_to_u(v, w), default)
        return switch
    if op == "ret":
        rm = re.match(r"^ret (\S.*?) (\S+)$", rest)
        if rest.strip() == "ret void" or not rm:
            return lambda env, ctx: ("ret", None)
        gr = _getter(rm.group(2), rm.group(1))
        return lambda env, ctx: ("ret", gr(env))
    if op in ("unreachable", "resume"):
        def abort(env, ctx):
            raise Unsupported("reached an abort path")
        return abort
    body = rest[len(op):].strip()
    while True:
        fm = re.match(r"^(nuw|nsw|exact|inbounds|fast|nnan|ninf|nsz|contract|afn|reassoc|arcp|disjoint) ", body)
        if not fm:
            break
        body = body[fm.end():]
    if op in _FP or op in _INT_OPS:
        first, b = split_top(body)
        ty, a = _split_typed(first)
        ga, gb = _getter(a, ty), _getter(b, ty)
        if op in _FP:
            name = _FP[op]
            et = ty.strip()
            et = et[et.index(" x ") + 3:-1] if et.startswith("<") else et
            fold = name in ("add", "sub", "mul") and et in ("float", "double")

            def fp1(p, q):
                if fold and p.key[0] == "const" and q.key[0] == "const":
                    c = _fold(name, p, q, et == "float")
                    if c is not None:
                        return c
                return node(name, p, q)

            def fp(env, ctx):
                x, y = ga(env), gb(env)
                env[dst] = tuple(fp1(p, q) for p, q in zip(x, y)) if _vec(x) else fp1(x, y)
            return fp
        f = _int_op(op, _width(ty))

        def integer(env, ctx):
            x, y = ga(env), gb(env)
            env[dst] = tuple(f(p, q) for p, q in zip(x, y)) if _vec(x) else f(x, y)
        return integer
    if op == "fneg":
        ty, a = _split_typed(body)
        ga = _getter(a, ty)

        def neg(env, ctx):
            x = ga(env)
            env[dst] = tuple(node("neg", p) for p in x) if _vec(x) else node("neg", x)
        return neg
    if op == "icmp":
        cc, rest2 = body.split(" ", 1)
        first, b = split_top(rest2)
        ty, a = _split_typed(first)
        ga, gb, f, w = _getter(a, ty), _getter(b, ty), _ICMP[cc], _width(ty)
        signed = cc[0] == "s"

        def cmp1(x, y):
            if type(x) is int and type(y) is int:
                return int(f(_to_s(x, w), _to_s(y, w)) if signed else f(_to_u(x, w), _to_u(y, w)))
            if _is_ptr(x) or _is_ptr(y) or x is None or y is None:
                kx = ("null", 0) if x is None else (x[1], x[2]) if _is_ptr(x) else None
                ky = ("null", 0) if y is None else (y[1], y[2]) if _is_ptr(y) else None
                if kx is None or ky is None:
                    raise Unsupported(f"comparison of a pointer with a computed value: {ln[:80]}")
                if cc in ("eq", "ne"):
                    return int(f(kx, ky))
                if kx[0] != ky[0]:
                    raise Unsupported(f"ordered comparison of pointers into different objects: {ln[:80]}")
                return int(f(kx[1], ky[1]))
            a, b = _bits(x, w), _bits(y, w)
            if cc in ("eq", "ne"):
                eq = 1
                for p, q in zip(a, b):
                    eq = _band(eq, _bnot(_bxor(p, q)))
                return _from_bits((eq if cc == "eq" else _bnot(eq),))
            return BV((node("icmp", cc, w, a, b),))

        def icmp(env, ctx):
            x, y = ga(env), gb(env)
            env[dst] = tuple(cmp1(p, q) for p, q in zip(x, y)) if _vec(x) else cmp1(x, y)
        return icmp
    if op == "fcmp":
        cc, rest2 = body.split(" ", 1)
        first, b = split_top(rest2)
        ty, a = _split_typed(first)
        ga, gb = _getter(a, ty), _getter(b, ty)

        def fcmp(env, ctx):
            x, y = ga(env), gb(env)
            env[dst] = tuple(node("fcmp", cc, p, q) for p, q in zip(x, y)) if _vec(x) else node("fcmp", cc, x, y)
        return fcmp
    if op in ("zext", "sext", "trunc", "bitcast", "ptrtoint", "inttoptr", "addrspacecast", "freeze",
              "sitofp", "uitofp", "fptosi", "fptoui", "fpext", "fptrunc"):
        left, _, to = body.rpartition(" to ") if " to " in body else (body, "", "")
        sty, val = left.strip().rsplit(" ", 1)
        to = to.strip()
        ga = _getter(val, sty)
        return _conversion(op, dst, ga, sty, to, ln)
    if op == "select":
        parts = [_split_typed(x) for x in split_top(body)]
        gc = _getter(parts[0][1], parts[0][0])
        ga, gb = _getter(parts[1][1], parts[1][0]), _getter(parts[2][1], parts[2][0])

        def sel1(c, a, b):
            if type(c) is int:
                return a if c else b
            if a is b:
                return a
            c = _bits(c, 1)[0]
            if (type(a) is int or type(a) is BV) and (type(b) is int or type(b) is BV):
                w = len(a) if type(a) is BV else len(b)
                return _from_bits(tuple(_bor(_band(c, p), _band(_bnot(c), q))
                                        for p, q in zip(_bits(a, w), _bits(b, w))))
            return node("select", c, a, b)

        def select(env, ctx):
            c, a, b = gc(env), ga(env), gb(env)
            if _vec(c):
                env[dst] = tuple(sel1(p, q, r) for p, q, r in zip(c, a, b))
            else:
                env[dst] = sel1(c, a, b)
        return select
    if op == "getelementptr":
        parts = split_top(body)
        cur_ty = parts[0]
        gp = _getter(parts[1].rsplit(" ", 1)[1], "ptr")
        terms = []  # (getter, scale, index bits) per variable index; constant offset folded
        const = 0
        for k, idx in enumerate(parts[2:]):
            ity, iv = idx.rsplit(" ", 1)
            gi = _getter(iv, ity)
            if k == 0:
                terms.append((gi, type_size(cur_ty, module.types), _width(ity)))
                continue
            t = module.types.get(cur_ty, cur_ty)
            am = re.match(r"^\[(\d+) x (.+)\]$", t)
            if am:
                cur_ty = am.group(2)
                terms.append((gi, type_size(cur_ty, module.types), _width(ity)))
                continue
            sm = re.match(r"^<?\{(.*)\}>?$", t)
            if sm:
                fields = split_top(sm.group(1))
                i = gi({})
                const += field_offsets(t, module.types)[i]
                cur_ty = fields[i]
                continue
            raise Unsupported(f"gep into {t}")

        def gep(env, ctx):
            off = const
            for g, sc, w in terms:
                i = g(env)
                if type(i) is not int:
                    raise Unsupported(f"address from a computed value: {ln[:80]}")
                off += _to_s(i, w) * sc
            p = gp(env)
            if p is None:
                env[dst] = ("ptr", "null", off)
            elif not _is_ptr(p):
                raise Unsupported(f"address from a computed value: {ln[:80]}")
            else:
                env[dst] = ("ptr", p[1], p[2] + off)
        return gep
    if op == "load":
        parts = split_top(re.sub(r"^volatile ", "", body))
        ty, ptr = parts[0], parts[1].rsplit(" ", 1)[1]
        gp, ty = _getter(ptr, "ptr"), ty.strip()
        shape = _shape(ty, module)

        def load(env, ctx):
            env[dst] = _load(shape, gp(env), ctx)
        return load
    if op == "store":
        parts = split_top(re.sub(r"^volatile ", "", body))
        ty, val = _split_typed(parts[0])
        gp, gv, ty = _getter(parts[1].rsplit(" ", 1)[1], "ptr"), _getter(val, ty), ty.strip()
        shape = _shape(ty, module)

        def store(env, ctx):
            _store(shape, gp(env), gv(env), ctx)
        return store
    if op == "extractvalue" or op == "insertvalue":
        parts = split_top(body)
        ga = _getter(*reversed(_split_typed(parts[0])))
        if op == "extractvalue":
            idx = [int(x) for x in parts[1:]]

            def extract(env, ctx):
                v = ga(env)
                for i in idx:
                    v = v[i]
                env[dst] = v
            return extract
        gb = _getter(*reversed(_split_typed(parts[1])))
        idx = [int(x) for x in parts[2:]]
        if len(idx) != 1:
            raise Unsupported("nested insertvalue")
        n = len(split_top(re.match(r"^\{(.*)\}", module.types.get(parts[0].rsplit(" ", 1)[0].strip(),
                                                                      parts[0].rsplit(" ", 1)[0].strip())).group(1)))

        def insert(env, ctx):
            v = ga(env)
            v = list(v) if isinstance(v, Agg) else [node("undef")] * n
            v[idx[0]] = gb(env)
            env[dst] = Agg(v)
        return insert
    if op == "call" or op == "invoke":
        return _compile_call(dst, body, ln, module)
    if op == "shufflevector":
        parts = split_top(body)
        t1, a = _split_typed(parts[0])
        t2, b = _split_typed(parts[1])
        ga, gb = _getter(a, t1), _getter(b, t2)
        mask_txt = parts[2]
        if "zeroinitializer" in mask_txt:
            idx = [0] * int(re.match(r"<(\d+)", mask_txt).group(1))
        else:
            idx = [int(t) if t not in ("undef", "poison") else -1
                   for t in re.findall(r"i32 (-?\d+|undef|poison)", mask_txt)]
        undef = node("undef")

        def shuffle(env, ctx):
            both = ga(env) + gb(env)
            env[dst] = tuple(both[i] if i >= 0 else undef for i in idx)
        return shuffle
    if op == "extractelement":
        parts = split_top(body)
        t, a = _split_typed(parts[0])
        it, iv = _split_typed(parts[1])
        ga, gi = _getter(a, t), _getter(iv, it)

        def extract_el(env, ctx):
            i = gi(env)
            if type(i) is not int:
                raise Unsupported(f"lane from a computed value: {ln[:80]}")
            env[dst] = ga(env)[_to_u(i, _width(it))]
        return extract_el
    if op == "insertelement":
        parts = split_top(body)
        t, a = _split_typed(parts[0])
        et, b = _split_typed(parts[1])
        it, iv = _split_typed(parts[2])
        ga, gb, gi = _getter(a, t), _getter(b, et), _getter(iv, it)

        def insert_el(env, ctx):
            i = gi(env)
            if type(i) is not int:
                raise Unsupported(f"lane from a computed value: {ln[:80]}")
            v = list(ga(env))
            v[_to_u(i, _width(it))] = gb(env)
            env[dst] = tuple(v)
        return insert_el
    if op == "alloca":
        return lambda env, ctx: env.__setitem__(dst, ("ptr", f"{dst}#{env['#frame']}", 0))

    def unknown(env, ctx):
        raise Unsupported(f"instruction {op}: {ln[:80]}")
    return unknown


def _conversion(op: str, dst: str, ga, sty: str, to: str, ln: str):
    sw, tw = _width(sty), _width(to)
    slanes = re.match(r"^<(\d+) x (.+)>$", sty.strip())
    tlanes = re.match(r"^<(\d+) x (.+)>$", to)
    tel = (tlanes.group(2) if tlanes else to).strip()
    sel = (slanes.group(2) if slanes else sty).strip()
    if op in ("ptrtoint", "inttoptr", "addrspacecast", "freeze") or \
            (op == "bitcast" and (slanes.group(1) if slanes else "1") == (tlanes.group(1) if tlanes else "1")):
        # the same bits (a pointer stays a pointer; a lane keeps its node)
        def same(env, ctx):
            env[dst] = ga(env)
        return same
    if op == "bitcast":
        n_out = int(tlanes.group(1)) if tlanes else 1
        n_in = int(slanes.group(1)) if slanes else 1
        in_bits = (sw if not sel.startswith(_FLOATS) else {"float": 32, "double": 64}.get(sel, 16))
        out_bits = in_bits * n_in // n_out

        def repack(env, ctx):
            v = ga(env)
            lanes = v if _vec(v) else (v,)
            bits: tuple = ()
            for x in lanes:
                if _is_ptr(x) or x is None:
                    raise Unsupported("bitcast of a pointer vector")
                bits += _bits(x, in_bits)
            out = []
            for j in range(n_out):
                chunk = bits[out_bits * j:out_bits * (j + 1)]
                if tel.startswith(_FLOATS):
                    c0 = chunk[0]
                    f = c0.key[2] if isinstance(c0, N) and c0.key[0] == "bit" and c0.key[1] == 0 else None
                    if f is not None and all(isinstance(b, N) and b.key[0] == "bit" and b.key[1] == i and b.key[2] is f
                                             for i, b in enumerate(chunk)):
                        out.append(f)  # the bits of one float: that float
                    else:
                        out.append(BV(chunk))  # an integer's bits read as a float
                else:
                    out.append(_from_bits(chunk))
            env[dst] = tuple(out) if tlanes else out[0]
        return repack
    if op in ("zext", "sext", "trunc"):
        def one(x):
            if type(x) is int:
                if op == "zext":
                    return _to_u(x, sw)
                if op == "sext":
                    return _to_s(x, sw)
                return _to_u(x, tw)
            if _is_ptr(x) or x is None:
                raise Unsupported(f"{op} of a pointer")
            a = _bits(x, sw)
            if op == "trunc":
                return _from_bits(a[:tw])
            return _from_bits(a + ((a[-1] if op == "sext" else 0),) * (tw - sw))
    elif op in ("sitofp", "uitofp"):  # by the integer's value, whatever its width
        def one(x):
            if _is_ptr(x) or x is None:
                raise Unsupported(f"{op} of a pointer")
            a = _bits(x, sw)
            if all(type(b) is int for b in a) and tel in ("float", "double"):  # a known integer: its value
                v = sum(b << j for j, b in enumerate(a))
                if op == "sitofp" and a[-1]:
                    v -= 1 << len(a)
                c = _const_of(float(v), tel == "float") if abs(v) < (1 << 53) else None
                if c is not None:
                    return c
            if op == "uitofp" or a[-1] == 0:  # the value of the bits up to the highest not known 0
                while a and a[-1] == 0:
                    a = a[:-1]
                return node("uitofp", tel, a)
            while len(a) > 1 and a[-1] is a[-2]:  # the value of the bits without sign copies
                a = a[:-1]
            return node("sitofp", tel, a)
    else:  # float -> int and float <-> float conversions
        def one(x):
            if _is_ptr(x) or x is None:
                raise Unsupported(f"{op} of a pointer")
            return node(op, sel, tel, x)

    def conv(env, ctx):
        v = ga(env)
        env[dst] = tuple(one(x) for x in v) if _vec(v) else one(v)
    return conv


def _compile_call(dst, body: str, ln: str, module: Module):
    cm = re.search(r"(@[\w.$-]+|%[\w.$-]+)\((.*)\)", body)
    if not cm:
        raise Unsupported(f"call form: {ln[:80]}")
    callee, argtxt = cm.group(1), cm.group(2)
    ret_ty = body[:cm.start()].strip()
    ret_ty = re.sub(r"^(fastcc|noundef|zeroext|signext|nonnull|\s)+", "", ret_ty).strip()
    gs = []
    for a in split_top(argtxt):
        a = a.strip()
        if a.startswith("metadata"):
            continue
        ty, val = _split_typed(a)
        gs.append(_getter(val, ty.split(" noundef")[0]))
    name = callee[1:]
    if callee.startswith("%"):  # indirect: a function pointer loaded from a constant table
        gf = _getter(callee, "ptr")

        def indirect(env, ctx):
            f = gf(env)
            if not _is_ptr(f) or f[2] != 0 or ctx.find(f[1][1:]) is None:
                raise Unsupported(f"indirect call of {f!r:.60}")
            r = _call(ctx, ctx.find(f[1][1:]), f[1][1:], [g(env) for g in gs])
            if dst:
                env[dst] = r
        return indirect
    if name.startswith("llvm.fma."):
        def fma(env, ctx):
            a, b, c = (g(env) for g in gs)
            env[dst] = tuple(node("fma", *xs) for xs in zip(a, b, c)) if _vec(a) else node("fma", a, b, c)
        return fma
    if name.startswith("llvm.fmuladd."):  # fused or not at the compiler's choice: its own operation
        def fmuladd(env, ctx):
            a, b, c = (g(env) for g in gs)
            env[dst] = tuple(node("fmuladd", *xs) for xs in zip(a, b, c)) if _vec(a) else node("fmuladd", a, b, c)
        return fmuladd
    if name.startswith(("llvm.prefetch", "llvm.lifetime", "llvm.assume", "llvm.experimental.noalias")):
        return lambda env, ctx: None
    if name.startswith(("llvm.smin", "llvm.smax", "llvm.umin", "llvm.umax")):
        w = _width(ret_ty)
        signed = name.startswith(("llvm.smin", "llvm.smax"))
        pick = min if "min" in name else max

        def mm1(x, y):
            if type(x) is int and type(y) is int:
                return pick(x, y, key=lambda v: _to_s(v, w) if signed else _to_u(v, w))
            n = node(name.split(".")[1], w, _bits(x, w), _bits(y, w))
            return BV(tuple(node("bit", j, n) for j in range(w)))

        def minmax(env, ctx):
            x, y = gs[0](env), gs[1](env)
            env[dst] = tuple(mm1(p, q) for p, q in zip(x, y)) if _vec(x) else mm1(x, y)
        return minmax
    if name.startswith("llvm.x86.avx512.vpermi2var.ps"):  # lane j: (idx & 8 ? hi : lo)[idx & 7] (8 lanes)
        lanes = int(re.match(r"^<(\d+) x", ret_ty).group(1))
        sel = lanes.bit_length() - 1

        def permute(env, ctx):
            lo, idx, hi = (g(env) for g in gs)
            table = tuple(lo) + tuple(hi)
            out = []
            for j in range(lanes):
                bits = _bits(idx[j], 32)[:sel + 1]
                if all(type(b) is int for b in bits):
                    out.append(table[sum(b << i for i, b in enumerate(bits))])
                else:
                    out.append(node("perm", bits, table))
            env[dst] = tuple(out)
        return permute
    if name.startswith("llvm.memset"):
        def memset(env, ctx):
            p, v, n = gs[0](env), gs[1](env), gs[2](env)
            if not _is_ptr(p) or type(n) is not int:
                raise Unsupported(f"memset of a computed size: {ln[:80]}")
            for j in range(n):
                _store((1, "i8", 1, False), ("ptr", p[1], p[2] + j), v, ctx)
        return memset

    def call(env, ctx):
        args = [g(env) for g in gs]
        target = ctx.find(name)
        if target is not None:
            r = _call(ctx, target, name, args)
            if dst:
                env[dst] = r
            return
        if ctx.pure is not None and ctx.pure.search(name):
            ops = []
            for a in args:
                if _is_ptr(a):
                    if a[1] in ctx.written_bases:
                        raise Unsupported(f"pure {name[:40]} reads memory this run wrote")
                    ops.append(node("addr", a[1], a[2]))
                elif a is None:
                    ops.append(None)
                else:
                    ops.append(a)
            n = node("call", name, *ops)
            lm = re.match(r"^<(\d+) x", ret_ty)
            env[dst] = tuple(node("lane", j, n) for j in range(int(lm.group(1)))) if lm else n
            return
        raise Unsupported(f"call to {name}")
    return call


def _shape(ty: str, module: Module) -> tuple:
    """(lanes, element type, element size, vector?) of a loaded or stored type."""
    m = re.match(r"^<(\d+) x (.+)>$", ty)
    if m:
        return (int(m.group(1)), m.group(2).strip(), type_size(m.group(2), module.types), True)
    return (1, ty, type_size(ty, module.types), False)


def _load(shape: tuple, p, ctx: _Ctx):
    n, et, size, is_vec = shape
    if not _is_ptr(p):
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
    return tuple(vals) if is_vec else vals[0]


def _assemble(ctx: _Ctx, base: str, o: int, size: int, et: str):
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


def _store(shape: tuple, p, v, ctx: _Ctx) -> None:
    n, et, size, is_vec = shape
    if not _is_ptr(p):
        raise Unsupported(f"store through {p!r:.60}")
    base, off = p[1], p[2]
    if base.startswith("@"):
        raise Unsupported(f"store to global {base}")
    vals = v if is_vec else (v,)
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


def canonical(v, rename) -> N:
    """The DAG with its leaves renamed by rename(base, byte offset) -> logical name (iterative,
    memoized per node so a shared subgraph is renamed once). Input leaves keep their type; the
    addresses a pure call reads from are renamed the same way."""
    memo: dict[N, N] = {}
    stack = [(v, False)]
    while stack:
        x, ready = stack.pop()
        if not isinstance(x, N) or x in memo:
            continue
        k = x.key
        if k[0] in ("in", "addr"):
            memo[x] = node(k[0], *rename(k[1], k[2]), *k[3:])
            continue
        if ready:
            args = [_renamed(a, memo) for a in k[1:]]
            build = _COMMUTATIVE.get(k[0])
            memo[x] = build(*args) if build else node(k[0], *args)  # operand order by the new nodes
            continue
        stack.append((x, True))
        for a in k[1:]:
            for y in (a if isinstance(a, tuple) else (a,)):
                if isinstance(y, N) and y not in memo:
                    stack.append((y, False))
    return memo.get(v, v)


def _renamed(a, memo):
    if isinstance(a, N):
        return memo[a]
    if isinstance(a, tuple):
        return type(a)(memo[y] if isinstance(y, N) else y for y in a)
    return a


def first_difference(a, b, depth: int = 0) -> str:
    """Where two DAGs part: the first pair of differing subterms on a common path (for reports)."""
    while isinstance(a, N) and isinstance(b, N) and a is not b:
        ka, kb = a.key, b.key
        if ka[0] != kb[0] or len(ka) != len(kb):
            break
        diffs = [(x, y) for x, y in zip(ka[1:], kb[1:]) if x is not y and x != y]
        if not diffs:
            break
        x, y = diffs[0]
        if isinstance(x, tuple) and isinstance(y, tuple) and len(x) == len(y):
            inner = [(p, q) for p, q in zip(x, y) if p is not q and p != q]
            if not inner:
                break
            x, y = inner[0]
        a, b = x, y
        depth += 1
    return f"at depth {depth}: {_show(a)} vs {_show(b)}"


def _show(v, d: int = 3) -> str:
    if not isinstance(v, N):
        return repr(v)[:60]
    if d == 0:
        return f"{v.key[0]}(..)"
    return f"{v.key[0]}(" + ", ".join(_show(x, d - 1) if isinstance(x, N) else
                                      ("(" + ", ".join(_show(y, d - 1) for y in x[:4]) + ")" if type(x) is tuple
                                       else repr(x)) for x in v.key[1:]) + ")"

