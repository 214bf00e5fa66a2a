# The instructions of dag.py's symbolic execution of LLVM IR: compile_instruction turns one line
# of a function body into a closure (env, ctx) -> None | the next block's label | ("ret", value),
# by a table of opcode -> compiler (calls: dag_calls.py; conversions: dag_convert.py). Integers
# wrap at their width; floating-point operations are DAG nodes, folded only on two constants;
# a branch, address or lane index on a computed value raises Unsupported.
from __future__ import annotations

import re

from ..domains.dag_values import (BV, Agg, Unsupported, _band, _bits, _bnot, _bor, _bv_op, _bxor, _fold, _from_bits,
                                  _to_s, _to_u, _wrap, node)
from ..frontend.llvm import LlvmModule
from ..frontend.llvm_types import field_offsets, split_top, split_typed, type_size
from .dag_calls import compile_call
from .dag_convert import compile_conversion
from .dag_state import getter, is_ptr, is_vec, load, shape_of, store, width

_FLAGS = re.compile(r"^(nuw|nsw|exact|inbounds|fast|nnan|ninf|nsz|contract|afn|reassoc|arcp|disjoint) ")


def compile_instruction(ln: str, module: LlvmModule):
    """One instruction as a closure (env, ctx) -> None | next label | ("ret", value)."""
    m = re.match(r"^(%[\w.$-]+) = (.*)$", ln)
    dst, rest = (m.group(1), m.group(2)) if m else (None, ln)
    rest = re.sub(r"^(tail|musttail|notail) ", "", rest)
    op = rest.split()[0]
    body = rest[len(op):].strip()
    while True:
        fm = _FLAGS.match(body)
        if not fm:
            break
        body = body[fm.end():]
    return _COMPILERS.get(op, _unknown)(op, dst, rest, body, ln, module)


def _unknown(op, dst, rest, body, ln, module):
    def unknown(env, ctx):
        raise Unsupported(f"instruction {op}: {ln[:80]}")
    return unknown


# ---- control flow ----

def _br(op, dst, rest, body, ln, module):
    c = re.match(r"^br i1 ([^,]+), label (%[\w.$-]+), label (%[\w.$-]+)", rest)
    if c:
        cond, t, f = getter(c.group(1), "i1"), c.group(2), c.group(3)

        def branch(env, ctx):
            v = cond(env)
            if type(v) is not int:
                raise Unsupported(f"branch on a computed value: {ln[:80]}")
            return t if v else f
        return branch
    target = re.match(r"^br label (%[\w.$-]+)", rest).group(1)
    return lambda env, ctx: target


def _switch(op, dst, rest, body, ln, module):
    sm = re.match(r"^switch (\S+) ([^,]+), label (%[\w.$-]+) \[(.*)\]", rest)
    ty, gv, default = sm.group(1), getter(sm.group(2), sm.group(1)), sm.group(3)
    w = width(ty)
    cases = {_to_u(int(v), w): lab for v, lab in re.findall(r"i\d+ (-?\d+), label (%[\w.$-]+)", sm.group(4))}

    def switch(env, ctx):
        v = gv(env)
        if type(v) is not int:
            raise Unsupported(f"switch on a computed value: {ln[:80]}")
        return cases.get(_to_u(v, w), default)
    return switch


def _ret(op, dst, rest, body, ln, module):
    rm = re.match(r"^ret (\S.*?) (\S+)$", rest)
    if rest.strip() == "ret void" or not rm:
        return lambda env, ctx: ("ret", None)
    gr = getter(rm.group(2), rm.group(1))
    return lambda env, ctx: ("ret", gr(env))


def _abort(op, dst, rest, body, ln, module):
    def abort(env, ctx):
        raise Unsupported("reached an abort path")
    return abort


# ---- arithmetic ----

_FP = {"fadd": "add", "fsub": "sub", "fmul": "mul", "fdiv": "div", "frem": "rem"}
_INT_OPS = ("add", "sub", "mul", "and", "or", "xor", "shl", "lshr", "ashr", "sdiv", "udiv", "srem", "urem")
_ICMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "slt": lambda a, b: a < b, "sle": lambda a, b: a <= b,
         "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b, "ult": lambda a, b: a < b, "ule": lambda a, b: a <= b,
         "ugt": lambda a, b: a > b, "uge": lambda a, b: a >= b}


def _binary(op, dst, rest, body, ln, module):
    first, b = split_top(body)
    ty, a = split_typed(first)
    ga, gb = getter(a, ty), getter(b, ty)
    if op in _FP:
        return _float(op, dst, ty, ga, gb)
    f = _int_op(op, width(ty))

    def integer(env, ctx):
        x, y = ga(env), gb(env)
        env[dst] = tuple(f(p, q) for p, q in zip(x, y)) if is_vec(x) else f(x, y)
    return integer


def _float(op: str, dst, ty: str, ga, gb):
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
        env[dst] = tuple(fp1(p, q) for p, q in zip(x, y)) if is_vec(x) else fp1(x, y)
    return fp


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


def _int_op(op: str, w: int):
    f = _int_fn(op, w)

    def one(x, y):
        if type(x) is int and type(y) is int:
            return f(x, y)
        if is_ptr(x) and type(y) is int and op in ("add", "sub") and w == 64:
            return ("ptr", x[1], x[2] + (y if op == "add" else -y))
        if is_ptr(x) and is_ptr(y) and op == "sub" and x[1] == y[1]:
            return x[2] - y[2]
        if is_ptr(x) or is_ptr(y) or x is None or y is None:
            raise Unsupported(f"integer {op} on a pointer")
        return _bv_op(op, w, x, y)
    return one


def _fneg(op, dst, rest, body, ln, module):
    ty, a = split_typed(body)
    ga = getter(a, ty)

    def neg(env, ctx):
        x = ga(env)
        env[dst] = tuple(node("neg", p) for p in x) if is_vec(x) else node("neg", x)
    return neg


def _icmp(op, dst, rest, body, ln, module):
    cc, rest2 = body.split(" ", 1)
    first, b = split_top(rest2)
    ty, a = split_typed(first)
    ga, gb, f, w = getter(a, ty), getter(b, ty), _ICMP[cc], width(ty)
    signed = cc[0] == "s"

    def cmp1(x, y):
        if type(x) is int and type(y) is int:
            return int(f(_to_s(x, w), _to_s(y, w)) if signed else f(_to_u(x, w), _to_u(y, w)))
        if is_ptr(x) or is_ptr(y) or x is None or y is None:
            return _pointer_compare(cc, f, x, y, ln)
        a, b = _bits(x, w), _bits(y, w)
        if cc in ("eq", "ne"):
            eq = 1
            for p, q in zip(a, b):
                eq = _band(eq, _bnot(_bxor(p, q)))
            return _from_bits((eq if cc == "eq" else _bnot(eq),))
        return BV((node("icmp", cc, w, a, b),))

    def icmp(env, ctx):
        x, y = ga(env), gb(env)
        env[dst] = tuple(cmp1(p, q) for p, q in zip(x, y)) if is_vec(x) else cmp1(x, y)
    return icmp


def _pointer_compare(cc: str, f, x, y, ln: str) -> int:
    kx = ("null", 0) if x is None else (x[1], x[2]) if is_ptr(x) else None
    ky = ("null", 0) if y is None else (y[1], y[2]) if is_ptr(y) else None
    if kx is None or ky is None:
        raise Unsupported(f"comparison of a pointer with a computed value: {ln[:80]}")
    if cc in ("eq", "ne"):
        return int(f(kx, ky))
    if kx[0] != ky[0]:
        raise Unsupported(f"ordered comparison of pointers into different objects: {ln[:80]}")
    return int(f(kx[1], ky[1]))


def _fcmp(op, dst, rest, body, ln, module):
    cc, rest2 = body.split(" ", 1)
    first, b = split_top(rest2)
    ty, a = split_typed(first)
    ga, gb = getter(a, ty), getter(b, ty)

    def fcmp(env, ctx):
        x, y = ga(env), gb(env)
        env[dst] = tuple(node("fcmp", cc, p, q) for p, q in zip(x, y)) if is_vec(x) else node("fcmp", cc, x, y)
    return fcmp


def _conversion(op, dst, rest, body, ln, module):
    left, _, to = body.rpartition(" to ") if " to " in body else (body, "", "")
    sty, val = left.strip().rsplit(" ", 1)
    return compile_conversion(op, dst, getter(val, sty), sty, to.strip(), ln)


def _select(op, dst, rest, body, ln, module):
    parts = [split_typed(x) for x in split_top(body)]
    gc = getter(parts[0][1], parts[0][0])
    ga, gb = getter(parts[1][1], parts[1][0]), getter(parts[2][1], parts[2][0])

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
        if is_vec(c):
            env[dst] = tuple(sel1(p, q, r) for p, q, r in zip(c, a, b))
        else:
            env[dst] = sel1(c, a, b)
    return select


# ---- memory and addresses ----

def _gep(op, dst, rest, body, ln, module):
    parts = split_top(body)
    cur_ty = parts[0]
    gp = getter(parts[1].rsplit(" ", 1)[1], "ptr")
    terms = []  # (getter, scale, index bits) per variable index; constant offset folded
    const = 0
    for k, idx in enumerate(parts[2:]):
        ity, iv = idx.rsplit(" ", 1)
        gi = getter(iv, ity)
        if k == 0:
            terms.append((gi, type_size(cur_ty, module.types), width(ity)))
            continue
        t = module.types.get(cur_ty, cur_ty)
        am = re.match(r"^\[(\d+) x (.+)\]$", t)
        if am:
            cur_ty = am.group(2)
            terms.append((gi, type_size(cur_ty, module.types), width(ity)))
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
        elif not is_ptr(p):
            raise Unsupported(f"address from a computed value: {ln[:80]}")
        else:
            env[dst] = ("ptr", p[1], p[2] + off)
    return gep


def _load(op, dst, rest, body, ln, module):
    parts = split_top(re.sub(r"^volatile ", "", body))
    ty, ptr = parts[0], parts[1].rsplit(" ", 1)[1]
    gp, ty = getter(ptr, "ptr"), ty.strip()
    shape = shape_of(ty, module)

    def load_(env, ctx):
        env[dst] = load(shape, gp(env), ctx)
    return load_


def _store(op, dst, rest, body, ln, module):
    parts = split_top(re.sub(r"^volatile ", "", body))
    ty, val = split_typed(parts[0])
    gp, gv, ty = getter(parts[1].rsplit(" ", 1)[1], "ptr"), getter(val, ty), ty.strip()
    shape = shape_of(ty, module)

    def store_(env, ctx):
        store(shape, gp(env), gv(env), ctx)
    return store_


def _alloca(op, dst, rest, body, ln, module):
    return lambda env, ctx: env.__setitem__(dst, ("ptr", f"{dst}#{env['#frame']}", 0))


# ---- aggregates and vectors ----

def _extractvalue(op, dst, rest, body, ln, module):
    parts = split_top(body)
    ga = getter(*reversed(split_typed(parts[0])))
    idx = [int(x) for x in parts[1:]]

    def extract(env, ctx):
        v = ga(env)
        for i in idx:
            v = v[i]
        env[dst] = v
    return extract


def _insertvalue(op, dst, rest, body, ln, module):
    parts = split_top(body)
    ga = getter(*reversed(split_typed(parts[0])))
    gb = getter(*reversed(split_typed(parts[1])))
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


def _shufflevector(op, dst, rest, body, ln, module):
    parts = split_top(body)
    t1, a = split_typed(parts[0])
    t2, b = split_typed(parts[1])
    ga, gb = getter(a, t1), getter(b, t2)
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


def _extractelement(op, dst, rest, body, ln, module):
    parts = split_top(body)
    t, a = split_typed(parts[0])
    it, iv = split_typed(parts[1])
    ga, gi = getter(a, t), getter(iv, it)

    def extract_el(env, ctx):
        i = gi(env)
        if type(i) is not int:
            raise Unsupported(f"lane from a computed value: {ln[:80]}")
        env[dst] = ga(env)[_to_u(i, width(it))]
    return extract_el


def _insertelement(op, dst, rest, body, ln, module):
    parts = split_top(body)
    t, a = split_typed(parts[0])
    et, b = split_typed(parts[1])
    it, iv = split_typed(parts[2])
    ga, gb, gi = getter(a, t), getter(b, et), getter(iv, it)

    def insert_el(env, ctx):
        i = gi(env)
        if type(i) is not int:
            raise Unsupported(f"lane from a computed value: {ln[:80]}")
        v = list(ga(env))
        v[_to_u(i, width(it))] = gb(env)
        env[dst] = tuple(v)
    return insert_el


def _call(op, dst, rest, body, ln, module):
    return compile_call(dst, body, ln)


_CONVERSIONS = ("zext", "sext", "trunc", "bitcast", "ptrtoint", "inttoptr", "addrspacecast", "freeze", "sitofp",
                "uitofp", "fptosi", "fptoui", "fpext", "fptrunc")
# opcode -> compiler(op, dst, rest (after "%dst = "), body (after the opcode and its flags), line, module)
_COMPILERS = {"br": _br, "switch": _switch, "ret": _ret, "unreachable": _abort, "resume": _abort,
              **{op: _binary for op in tuple(_FP) + _INT_OPS}, "fneg": _fneg, "icmp": _icmp, "fcmp": _fcmp,
              **{op: _conversion for op in _CONVERSIONS}, "select": _select, "getelementptr": _gep, "load": _load,
              "store": _store, "extractvalue": _extractvalue, "insertvalue": _insertvalue, "call": _call,
              "invoke": _call, "shufflevector": _shufflevector, "extractelement": _extractelement,
              "insertelement": _insertelement, "alloca": _alloca}
