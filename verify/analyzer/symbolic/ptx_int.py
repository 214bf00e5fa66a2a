# Integer and predicate instructions of the PTX symbolic execution (ptx_ops.py's table): expression
# templates over a, b, c (the operands as unsigned bit patterns of the instruction's type),
# compiled into a comprehension over whole thread lists per instruction; moves; predicate logic
# (concrete, or over predicate nodes); and.b32 of memory bytes with a byte mask.
from __future__ import annotations

import re

from ..domains.ptx_dag import Bytes, ExecError, register_of
from ..frontend.kir import Inst
from .ptx_program import Const, Program, dst, getter, operand


def _type_of(op: str) -> tuple[str, int]:
    for part in reversed(op.split(".")):
        m = re.match(r"^([bsu])(8|16|32|64)$", part)
        if m:
            return m.group(1), int(m.group(2))
        if part == "pred":
            return "b", 1
    raise ExecError(f"{op}: no integer type")


def _sx(name: str, w: int) -> str:
    """The signed value of the w-bit pattern `name`."""
    return f"({name} - {1 << w} if {name} >> {w - 1} else {name})"


def int_template(op: str) -> tuple[str, int]:
    """(expression over a, b, c, number of sources) of an integer/predicate instruction."""
    parts = op.split(".")
    base = parts[0]
    if base == "setp":
        cmp = parts[1]
        kind, w = _type_of(op)
        if len(parts) != 3:
            raise ExecError(f"{op} not modelled")
        signed = kind == "s"
        a, b = (_sx("a", w), _sx("b", w)) if signed else ("a", "b")
        sym = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "lo": "<", "ls": "<=",
               "hi": ">", "hs": ">="}.get(cmp)
        if sym is None or (cmp in ("lo", "ls", "hi", "hs") and signed):
            raise ExecError(f"{op} not modelled")
        if kind == "b" and cmp not in ("eq", "ne"):
            raise ExecError(f"{op} not modelled")
        if cmp in ("eq", "ne"):  # `| 0`: an operand that is not an int raises instead of comparing unequal
            return f"int((a | 0) {sym} (b | 0))", 2
        return f"int({a} {sym} {b})", 2
    if base == "selp":
        return "a if c | 0 else b", 3
    kind, w = _type_of(op)
    mask = (1 << w) - 1
    sa, sb = _sx("a", w), _sx("b", w)
    if base in ("add", "sub"):
        if len(parts) != 2:
            raise ExecError(f"{op} not modelled (saturation or carry)")
        return f"(a {'+' if base == 'add' else '-'} b) & {mask}", 2
    if base == "mul" and parts[1] == "lo":
        return f"(a * b) & {mask}", 2
    if base == "mul" and parts[1] == "wide":
        if kind == "s":
            return f"({sa} * {sb}) & {(1 << 2 * w) - 1}", 2
        return f"(a * b) & {(1 << 2 * w) - 1}", 2
    if base == "mad" and parts[1] == "lo":
        return f"(a * b + c) & {mask}", 3
    if base in ("div", "rem"):
        if kind == "s":
            q = f"(abs({sa}) // abs({sb}) * (1 if ({sa} < 0) == ({sb} < 0) else -1))"
            return (f"{q} & {mask}" if base == "div" else f"({sa} - {sb} * {q}) & {mask}"), 2
        return (f"(a // b) & {mask}" if base == "div" else f"(a % b) & {mask}"), 2
    if base in ("min", "max"):
        f = "min" if base == "min" else "max"
        return (f"{f}({sa}, {sb}) & {mask}" if kind == "s" else f"{f}(a, b)"), 2
    if base in ("and", "or", "xor"):
        return f"a {'&' if base == 'and' else '|' if base == 'or' else '^'} b", 2
    if base == "not":
        return f"a ^ {mask}", 1
    if base == "neg":
        return f"(-a) & {mask}", 1
    if base == "shl":
        return f"(a << min(b, {w})) & {mask}", 2
    if base == "shr":
        if kind == "s":
            return f"({sa} >> min(b, {w})) & {mask}", 2
        return f"a >> min(b, {w})", 2
    if base == "bfi":  # bfi f, a, b, pos, len: b with bits [pos, pos + len) from a's low bits
        return (f"(b & ~(((1 << min(d & 255, {w})) - 1) << (c & 255)) | ((a & ((1 << min(d & 255, {w})) - 1)) "
                f"<< (c & 255))) & {mask} if (c & 255) < {w} else b"), 4
    raise ExecError(f"{op} not modelled")


def cvt_template(op: str) -> str:
    """cvt.dst.src between integer types: truncation or sign/zero extension."""
    parts = op.split(".")
    if len(parts) != 3 or any(p.startswith(("f", "bf")) for p in parts[1:]):
        raise ExecError(f"{op} not modelled")
    (dk, dw), (sk, sw) = [(re.match(r"^([bsu])(\d+)$", p).group(1), int(re.match(r"^([bsu])(\d+)$", p).group(2)))
                          for p in parts[1:]]
    if sk == "s" and dw > sw:
        return f"{_sx('a', sw)} & {(1 << dw) - 1}"
    return f"a & {(1 << min(dw, sw)) - 1}"


_COMPILED: dict[tuple, tuple] = {}


def _comprehension(expr: str, names: tuple[str, ...], lists: tuple[bool, ...]):
    """(full, part): full(*operands) -> the list over every thread; part(D, T, *operands) writes the
    threads T of D. Operands that are lists are iterated; the others are scalars."""
    key = (expr, names, lists)
    got = _COMPILED.get(key)
    if got:
        return got
    args = ", ".join(f"o{i}" for i in range(len(names)))
    zipped = [f"o{i}" for i, is_list in enumerate(lists) if is_list]
    loopvars = [names[i] for i, is_list in enumerate(lists) if is_list]
    scal = "".join(f"{names[i]} = o{i}; " for i, is_list in enumerate(lists) if not is_list)
    if zipped:
        full_src = (f"def full({args}):\n {scal}\n return [{expr} for {', '.join(loopvars)}"
                    f"{',' if len(loopvars) == 1 else ''} in zip({', '.join(zipped)})]")
    else:
        full_src = f"def full({args}, _n):\n {scal}\n return [{expr}] * _n"
    loads = "; ".join(f"{names[i]} = o{i}[t]" for i, is_list in enumerate(lists) if is_list) or "pass"
    part_src = f"def part(D, T, {args}):\n {scal}\n for t in T:\n  {loads}\n  D[t] = {expr}"
    env: dict = {}
    exec(full_src, env)
    exec(part_src, env)
    got = _COMPILED[key] = (env["full"], env["part"])
    return got


def arith(prog: Program, inst: Inst, expr: str, nsrc: int):
    """An instruction computing one register from nsrc operands by expr."""
    args = inst.args
    if len(args) != nsrc + 1 or "|" in args[0]:
        raise ExecError(f"{inst.op} with {len(args)} operands not modelled")
    d = dst(prog, args[0])
    srcs = [operand(prog, a) for a in args[1:]]
    if any(s[0] == "c" and type(s[1]) is not int for s in srcs):
        raise ExecError(f"{inst.op}: a floating-point immediate in integer arithmetic")
    if any(s[0] == "c" for s in srcs):  # an immediate as the bits of the operation's (source) type
        mask = (1 << _type_of(inst.op)[1]) - 1
        srcs = [("c", s[1] & mask) if s[0] == "c" else s for s in srcs]
    names = ("a", "b", "c", "d")[:nsrc]
    if "min(b, " in expr and srcs[1][0] == "c":  # a shift by an immediate: clamp it once
        w = int(re.search(r"min\(b, (\d+)\)", expr).group(1))
        expr = expr.replace(f"min(b, {w})", str(min(srcs[1][1], w)))
    getters = [getter(s) for s in srcs]
    compiled: dict[tuple, tuple] = {}

    def run(cta, tids):
        ops = [g(cta) for g in getters]
        kinds = tuple(type(o) is not Const for o in ops)
        fp = compiled.get(kinds)
        if fp is None:
            fp = compiled[kinds] = _comprehension(expr, names, kinds)
        vals = [o if k else o.v for o, k in zip(ops, kinds)]
        if len(tids) == cta.n:
            cta.regs[d] = fp[0](*vals) if any(kinds) else fp[0](*vals, cta.n)
        else:
            fp[1](cta.dst(d), tids, *vals)
    return run


def move(prog: Program, inst: Inst):
    """mov / cvta.to.global (global addresses are their generic ones here) of one register."""
    if inst.op.startswith("cvta") and inst.op not in ("cvta.to.global.u64", "cvta.local.u64"):
        raise ExecError(f"{inst.op} not modelled")
    if len(inst.args) != 2 or inst.args[0].startswith("{") or inst.args[1].startswith("{"):
        raise ExecError(f"{inst.op} {', '.join(inst.args)} not modelled (packing)")
    d = dst(prog, inst.args[0])
    src = operand(prog, inst.args[1])
    if src[0] == "c":
        if type(src[1]) is not int:
            raise ExecError(f"{inst.op}: a floating-point immediate in an integer move")
        src = ("c", src[1] & ((1 << _type_of(inst.op)[1]) - 1))
    g = getter(src)

    def run(cta, tids):  # a register never written moves as undefined (None), an error where used
        v = g(cta)
        if len(tids) == cta.n:
            cta.regs[d] = [v.v] * cta.n if type(v) is Const else None if v is None else list(v)
        else:
            D = cta.dst(d)
            for t in tids:
                D[t] = None if v is None else v[t]
    return run


def logic(prog: Program, inst: Inst):
    """and / or / xor / not .pred: the integer operation where every operand is 0 or 1, else over
    predicate nodes (Dag.both, either, negate)."""
    base = inst.op.split(".")[0]
    nsrc = 1 if base == "not" else 2
    fast = arith(prog, inst, *int_template(inst.op))
    d = dst(prog, inst.args[0])
    srcs = [operand(prog, a) for a in inst.args[1:]]
    getters = [getter(o) for o in srcs]
    if len(srcs) != nsrc:
        raise ExecError(f"{inst.op} not modelled")

    def run(cta, tids):
        ops = [g(cta) for g in getters]
        if all(type(o) is Const or all(type(o[t]) is int for t in tids) for o in ops):
            fast(cta, tids)
            return
        dag = cta.dag
        D = cta.dst(d)
        for t in tids:
            xs = [o[t] for o in ops]
            if base == "not":
                D[t] = dag.negate(xs[0])
            elif base == "and":
                D[t] = dag.both(xs)
            elif base == "or":
                D[t] = dag.either(xs)
            else:
                D[t] = dag.either([dag.both([xs[0], dag.negate(xs[1])]), dag.both([dag.negate(xs[0]), xs[1]])])
    return run


def mask_bytes(prog: Program, inst: Inst):
    """and.b32: on integers as ever; a register of memory bytes (Bytes) and a concrete mask whose bytes
    are each 0x00 or 0xff keeps or zeroes each byte (the decode kernel's masked V fragments)."""
    fast = arith(prog, inst, "a & b", 2)
    d = dst(prog, inst.args[0])
    getters = [getter(operand(prog, a)) for a in inst.args[1:]]

    def run(cta, tids):
        A, B = [g(cta) for g in getters]
        if all(type(A[t]) is int and type(B[t]) is int for t in tids):
            fast(cta, tids)
            return
        D = cta.dst(d)
        for t in tids:
            a, b = A[t], B[t]
            if type(a) is int and type(b) is int:
                D[t] = a & b
                continue
            if type(a) is int:
                a, b = b, a
            if type(a) is not Bytes or type(b) is not int or len(a.entries) != 4:
                raise TypeError(f"and.b32 of {a!r:.30} and {b!r:.30}")
            mask = [(b >> 8 * i) & 0xFF for i in range(4)]
            if any(m not in (0, 0xFF) for m in mask):
                raise TypeError(f"and.b32 of memory bytes with the mask {b:#x} (not whole bytes)")
            entries = tuple(e if m else 0 for e, m in zip(a.entries, mask))
            D[t] = register_of(*entries, cta.dag)
    return run
