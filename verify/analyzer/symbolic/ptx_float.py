# Floating-point instructions of the PTX symbolic execution (ptx_ops.py's table): f32 moves,
# additions, subtractions and products (Dag.f32_op, folded on two constants), the bf16x2 rounding,
# selections (a select node where the predicate is a node), and the operations kept as nodes of
# their operands (max/min as sets, fma, ex2.approx, div.rn, the f64 operations of divide_row, and
# the comparisons, whose results are predicate nodes).
from __future__ import annotations

from ..domains.ptx_dag import Bytes, ExecError, Node
from ..frontend.kir import Inst
from .ptx_int import move
from .ptx_program import Const, Program, dst, getter, operand


def is_float(op: str) -> bool:
    return any(p in ("f32", "f64", "f16", "bf16", "bf16x2", "f16x2") for p in op.split(".")[1:])


def floating(prog: Program, inst: Inst):
    """f32 moves, additions, subtractions, products, selections, and the bf16x2 rounding."""
    op, args = inst.op, inst.args
    parts = op.split(".")
    base = parts[0]
    if op == "cvt.rn.bf16x2.f32":
        d, a, b = dst(prog, args[0]), getter(operand(prog, args[1])), getter(operand(prog, args[2]))

        def cvt2(cta, tids):  # the upper half from a, the lower from b
            A, B, D = a(cta), b(cta), cta.dst(d)
            dag = cta.dag
            for t in tids:
                D[t] = Bytes(dag.bf16_round(B[t]).bytes + dag.bf16_round(A[t]).bytes)
        return cvt2
    if base == "mov" and op == "mov.f32" and len(args) == 2:
        d, src = dst(prog, args[0]), operand(prog, args[1])
        if src[0] == "c":
            if type(src[1]) is not tuple:
                raise ExecError(f"{op} of an integer immediate")

            def const(cta, tids):
                c = cta.dag.const(src[1][1], 4)
                if len(tids) == cta.n:
                    cta.regs[d] = [c] * cta.n
                else:
                    D = cta.dst(d)
                    for t in tids:
                        D[t] = c
            return const
        return move(prog, inst)
    if base == "selp" and op == "selp.f32":
        return _select(prog, inst)
    if op in _FLOAT_OPS:
        return _float_op(prog, inst, *_FLOAT_OPS[op])
    if base == "setp" and len(parts) == 3 and parts[2] == "f32":
        return _float_op(prog, inst, "setp." + parts[1], 0, 2)
    if base in ("add", "sub", "mul") and parts[-1] == "f32" and all(p in ("rn", "f32") for p in parts[1:]):
        d = dst(prog, args[0])
        srcs = [operand(prog, x) for x in args[1:]]
        if len(srcs) != 2:
            raise ExecError(f"{op} not modelled")
        if any(s[0] == "c" and type(s[1]) is not tuple for s in srcs):
            raise ExecError(f"{op}: an integer immediate")
        g = [getter(s) for s in srcs]
        consts = [s[1][1] if s[0] == "c" else None for s in srcs]

        def f32op(cta, tids):
            dag = cta.dag
            A, B = [x(cta) for x in g]
            if consts[0] is not None:
                A = Const(dag.const(consts[0], 4))
            if consts[1] is not None:
                B = Const(dag.const(consts[1], 4))
            D = cta.dst(d)
            for t in tids:
                D[t] = dag.f32_op(base, A[t], B[t])
        return f32op
    raise ExecError(f"{op} not modelled")


# Floating-point operations kept as nodes of their operands: opcode -> (node name, width, operands).
_FLOAT_OPS = {"max.f32": ("max.f32", 4, 2), "min.f32": ("min.f32", 4, 2), "abs.f32": ("abs.f32", 4, 1),
              "neg.f32": ("neg.f32", 4, 1), "ex2.approx.ftz.f32": ("ex2.approx.ftz.f32", 4, 1),
              "fma.rn.f32": ("fma.rn.f32", 4, 3), "div.rn.f32": ("div.rn.f32", 4, 2),
              "cvt.f64.f32": ("cvt.f64.f32", 8, 1), "rcp.rn.f64": ("rcp.rn.f64", 8, 1),
              "mul.rn.f64": ("mul.rn.f64", 8, 2), "cvt.rn.f32.f64": ("cvt.rn.f32.f64", 4, 1)}


def _float_op(prog: Program, inst: Inst, name: str, width: int, nsrc: int):
    """One node per thread: name(operands); setp.<cmp>.f32 gives a predicate (Dag.compare), max and min
    a set (Dag.maximum)."""
    args = inst.args
    if len(args) != nsrc + 1 or "|" in args[0]:
        raise ExecError(f"{inst.op} with {len(args)} operands not modelled")
    d = dst(prog, args[0])
    srcs = [operand(prog, a) for a in args[1:]]
    src_width = 8 if inst.op.split(".")[-1] == "f64" else 4
    for o in srcs:
        if o[0] == "c" and (type(o[1]) is not tuple or {"f32": 4, "f64": 8}[o[1][0]] != src_width):
            raise ExecError(f"{inst.op}: an immediate of another type")
    getters = [getter(o) for o in srcs]
    consts = [o[1][1] if o[0] == "c" else None for o in srcs]
    if name.startswith("setp."):
        cmp = name[5:]

        def make(dag, a, b):
            return dag.compare(cmp, a, b)
    elif name in ("max.f32", "min.f32"):
        def make(dag, a, b):
            return dag.maximum(name, a, b)
    else:
        def make(dag, *xs):
            return dag.op(name, width, *xs)

    def run(cta, tids):
        dag = cta.dag
        ops = [Const(dag.const(c, src_width)) if c is not None else g(cta) for g, c in zip(getters, consts)]
        D = cta.dst(d)
        for t in tids:
            xs = [o[t] for o in ops]
            for x in xs:
                if type(x) is not Node or x.width != src_width:
                    raise TypeError(f"an operand that is not a {8 * src_width}-bit floating-point value: {x!r:.40}")
            D[t] = make(dag, *xs)
    return run


def _select(prog: Program, inst: Inst):
    """selp.f32 d, a, b, c: a where c, else b; where c is a predicate node, the node select(c, a, b)."""
    args = inst.args
    if len(args) != 4:
        raise ExecError(f"{inst.op} not modelled")
    d = dst(prog, args[0])
    srcs = [operand(prog, a) for a in args[1:]]
    if any(o[0] == "c" and type(o[1]) is not tuple for o in srcs[:2]):
        raise ExecError(f"{inst.op}: an integer immediate")
    getters = [getter(o) for o in srcs]
    consts = [o[1][1] if o[0] == "c" else None for o in srcs[:2]] + [None]

    def run(cta, tids):
        dag = cta.dag
        A, B, C = [Const(dag.const(c, 4)) if c is not None else g(cta) for g, c in zip(getters, consts)]
        D = cta.dst(d)
        for t in tids:
            c = C[t]
            D[t] = (A[t] if c else B[t]) if type(c) is int else dag.select(c, A[t], B[t])
    return run
