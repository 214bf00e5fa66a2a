# The instructions of ptx_exec.py's symbolic execution: a PTX entry flattened into a Program, each
# instruction compiled once into a handler over the CTA's registers (integer and predicate
# operations as expression templates over whole thread lists, floating-point operations and their
# comparisons as DAG nodes, loads, stores, cp.async and atom over byte memory, ldmatrix, mma.sync,
# shfl.sync and wgmma once per warp with the PTX-ISA fragment layouts), and the joins of branches
# on predicate nodes (join_of). An opcode or operand form not modelled raises ExecError.
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..frontend.kir import Function, Inst, split_outside
from .ptx_exec import (M32, _MMA, Bytes, Dag, ExecError, Node, _Const, _half, bf16_halves, bytes_of_value, gm_read,
                      value_of_bytes)

# ---------------------------------------------------------------------------------------------
# Program: instructions compiled once per entry


@dataclass
class Program:
    """An entry ready to run: flat instructions, label -> index, compiled handlers."""

    func: Function
    insts: list[Inst]
    labels: dict[str, int]
    handlers: list  # per instruction: (kind, payload); kind run | branch | ret | bar | collective
    reg_index: dict[str, int]
    shared: dict[str, tuple[int, int, int]]  # symbol -> (align, size or -1 for extern [], order)
    param_symbols: list[str]  # the entry's parameters in order (Cta.params: their bytes)
    local: dict[str, int]  # the entry's local arrays (at most one, its __local_depot) -> bytes
    joins: dict[int, tuple[int, list[int], set[int]]] = field(default_factory=dict)  # branch -> join_of

    def line(self, pc: int) -> str:
        i = self.insts[pc]
        return f"line {i.line}: {i.text}"


_SPECIALS = ("%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ntid.z", "%ctaid.x", "%ctaid.y", "%ctaid.z",
             "%nctaid.x", "%nctaid.y", "%nctaid.z", "%laneid")


def shared_declarations(ptx_text: str) -> dict[str, tuple[int, int, int]]:
    """Every .shared symbol of a PTX file: name -> (alignment, bytes or -1 for an extern [], order)."""
    out = {}
    for m in re.finditer(r"\.shared\s+\.align\s+(\d+)\s+\.[a-z]+(\d+)\s+([\w$]+)(?:\[(\d*)\])?\s*;", ptx_text):
        align, bits, name, count = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4)
        size = -1 if count == "" else bits // 8 * (int(count) if count else 1)
        out[name] = (align, size, len(out))
    return out


def compile_program(func: Function, ptx_text: str) -> Program:
    """Flattens func and compiles each instruction. Errors: ExecError for an opcode not modelled."""
    insts, labels = [], {}
    for b in func.blocks:
        labels[b.label] = len(insts)
        insts.extend(b.insts)
    shared = {k: v for k, v in shared_declarations(ptx_text).items() if k in func.symbols}
    local = {m.group(1): int(m.group(2)) for m in re.finditer(r"\.local\s+\.align\s+\d+\s+\.b8\s+([\w$]+)\[(\d+)\]",
                                                                  ptx_text) if func.symbols.get(m.group(1)) == "local"}
    if len(local) > 1:
        raise ExecError(f"{func.name}: {len(local)} local arrays (one, the depot, is modelled)")
    prog = Program(func, insts, labels, [], {}, shared, list(func.params), local)
    for inst in insts:
        try:
            prog.handlers.append(_compile(prog, inst))
        except ExecError as e:
            raise ExecError(f"{e} (line {inst.line}: {inst.text})") from None
    return prog


def join_of(prog: Program, pc: int) -> tuple[int, list[int], set[int]]:
    """The branch at pc: (its join, the immediate post-dominator's first instruction; the registers
    the instructions between them write; those of them that are predicates). Errors: ExecError where
    the branch has no join before the exit."""
    got = prog.joins.get(pc)
    if got is not None:
        return got
    starts = sorted(set(prog.labels.values()))
    block_of = {}
    for i, st in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(prog.insts)
        for x in range(st, end):
            block_of[x] = i
    n = len(starts)
    succs: list[list[int]] = []
    for i, st in enumerate(starts):
        last = (starts[i + 1] if i + 1 < n else len(prog.insts)) - 1
        kind, payload = prog.handlers[last]
        if kind == "ret":
            succs.append([])
        elif kind == "branch":
            to = [block_of[prog.labels[payload[0]]]]
            succs.append(to + ([i + 1] if payload[1] is not None and i + 1 < n else []))
        else:
            succs.append([i + 1] if i + 1 < n else [])
    full = (1 << n) - 1
    pdom = [full] * n
    changed = True
    while changed:
        changed = False
        for i in range(n - 1, -1, -1):
            acc = full if succs[i] else 0
            for j in succs[i]:
                acc &= pdom[j]
            new = acc | (1 << i)
            if new != pdom[i]:
                pdom[i], changed = new, True
    b = block_of[pc]
    strict = pdom[b] & ~(1 << b)
    ipdom = next((j for j in range(n) if strict >> j & 1 and pdom[j] == strict), None)
    if ipdom is None:
        raise ExecError(f"{prog.line(pc)}: a branch on a floating-point value with no join before the exit")
    region, todo = set(), [j for j in succs[b] if j != ipdom]
    while todo:
        j = todo.pop()
        if j in region:
            continue
        region.add(j)
        todo += [k for k in succs[j] if k != ipdom]
    written: set[int] = set()
    for j in region:
        end = starts[j + 1] if j + 1 < n else len(prog.insts)
        for x in range(starts[j], end):
            written.update(prog.reg_index[r] for r in prog.insts[x].dsts if r in prog.reg_index)
    types = prog.func.reg_types
    names = {i: r for r, i in prog.reg_index.items()}
    preds = {r for r in written if (types.get(names[r]) or types.get(re.sub(r"\d+$", "", names[r]))) == "pred"}
    got = prog.joins[pc] = (starts[ipdom], sorted(written), preds)
    return got


# ---------------------------------------------------------------------------------------------
# Operands


def _reg(prog: Program, name: str) -> int:
    i = prog.reg_index.get(name)
    if i is None:
        i = prog.reg_index[name] = len(prog.reg_index)
    return i


def _imm(tok: str) -> int | None:
    m = re.match(r"^(-?)(0[xX][0-9a-fA-F]+|\d+)U?$", tok)
    if not m:
        return None
    v = int(m.group(2), 0)
    return -v if m.group(1) else v


def _operand(prog: Program, tok: str) -> tuple:
    """("r", index) a register; ("c", value) an immediate (int, or ("f32", bits)); ("s", name) a
    special register or a symbol's address."""
    tok = tok.strip()
    if tok in _SPECIALS:
        return ("s", tok)
    if tok.startswith("%"):
        if re.match(r"^%(warpid|smid|clock|clock64|globaltimer|nsmid|gridid|lanemask)", tok):
            raise ExecError(f"reads {tok}, scheduling state the executor does not model")
        return ("r", _reg(prog, tok))
    m = re.match(r"^0[fF]([0-9a-fA-F]{8})$", tok)
    if m:
        return ("c", ("f32", int(m.group(1), 16)))
    m = re.match(r"^0[dD]([0-9a-fA-F]{16})$", tok)
    if m:
        return ("c", ("f64", int(m.group(1), 16)))
    v = _imm(tok)
    if v is not None:
        return ("c", v)
    if re.match(r"^[A-Za-z_$][\w$#]*$", tok):
        if "#" in tok:
            return ("r", _reg(prog, tok))  # an inline-asm scope's register (renamed by ptx.py)
        return ("s", tok)
    raise ExecError(f"operand {tok!r} not modelled")


def _vector(prog: Program, tok: str) -> list[tuple]:
    tok = tok.strip()
    if not tok.startswith("{"):
        return [_operand(prog, tok)]
    return [_operand(prog, t) for t in split_outside(tok[1:-1], "{[", "}]")]


def _address(prog: Program, tok: str) -> tuple:
    """[reg+off] -> ("r", index, off); [symbol+off] -> ("s", symbol, off)."""
    inner = tok.strip()[1:-1].strip()
    m = re.match(r"^([%\w$#.]+)\s*(?:\+\s*(-?\d+))?$", inner)
    if not m:
        raise ExecError(f"address {tok!r} not modelled")
    base, off = m.group(1), int(m.group(2) or 0)
    if base.startswith("%") or "#" in base:
        return ("r", _reg(prog, base), off)
    return ("s", base, off)




# ---------------------------------------------------------------------------------------------
# Integer and predicate operations: expression templates over a, b, c (the operands as unsigned
# bit patterns of the instruction's type), compiled into a comprehension per instruction.

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


def _int_template(op: str) -> tuple[str, int]:
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


def _cvt_template(op: str) -> str:
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


# ---------------------------------------------------------------------------------------------
# Compiling one instruction


def _compile(prog: Program, inst: Inst):
    op = inst.op
    base = op.split(".")[0]
    if inst.pred is not None and base not in ("bra",):
        pred = _reg(prog, inst.pred)
    else:
        pred = None
    if base == "bra":
        if len(inst.targets) != 1 or inst.targets[0] not in prog.labels:
            raise ExecError(f"branch to {inst.targets} not modelled")
        p = None if inst.pred is None else _reg(prog, inst.pred)
        return ("branch", (inst.targets[0], p, inst.pred_neg))
    if base in ("ret", "exit"):
        if inst.pred is not None:
            raise ExecError(f"predicated {op} not modelled")
        return ("ret", None)
    if base == "bar" or base == "barrier":
        if op not in ("bar.sync", "barrier.sync", "bar.sync.aligned", "barrier.sync.aligned") or \
                inst.args != ["0"] or pred is not None:
            raise ExecError(f"{op} {', '.join(inst.args)} not modelled (only bar.sync 0)")
        return ("bar", None)
    if op in ("membar.gl", "membar.cta", "fence.acq_rel.gpu", "fence.sc.gpu", "fence.proxy.async.shared::cta",
              "wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned") or \
            op in ("cp.async.commit_group", "cp.async.wait_all") or op.startswith("cp.async.wait_group"):
        return ("run", lambda cta, tids: None)  # wgmma and cp.async run at issue: their waits are no-ops
    if op.startswith(("ldmatrix", "mma", "wgmma")) and pred is not None:
        raise ExecError(f"a predicated warp-collective {op} not modelled")
    if op.startswith("shfl") and pred is not None:
        raise ExecError(f"a predicated warp-collective {op} not modelled")
    if op.startswith("ldmatrix.sync.aligned.m8n8."):
        return ("collective", _ldmatrix(prog, inst))
    if op.startswith("mma.sync.aligned."):
        return ("collective", _mma(prog, inst))
    if op.startswith("shfl.sync."):
        return ("collective", _shfl(prog, inst))
    if op.startswith("wgmma.mma_async."):
        return ("collective", _wgmma(prog, inst))
    if op.startswith("cp.async.cg.shared.global") or op.startswith("cp.async.ca.shared.global"):
        h = _cp_async(prog, inst)
    elif base in ("ld", "st"):
        h = _load_store(prog, inst)
    elif base == "atom":
        h = _atom(prog, inst)
    elif base in ("add", "sub", "mul", "fma", "mov", "cvt", "selp", "max", "min", "abs", "neg", "ex2", "div", "rcp",
                  "setp") and _is_float(op):
        h = _float(prog, inst)
    elif base in ("mov", "cvta"):
        h = _move(prog, inst)
    elif base in ("and", "or", "xor", "not") and op.endswith(".pred"):
        h = _logic(prog, inst)
    elif op == "and.b32":
        h = _mask_bytes(prog, inst)
    elif base == "cvt":
        h = _arith(prog, inst, _cvt_template(op), 1)
    else:
        expr, nsrc = _int_template(op)
        h = _arith(prog, inst, expr, nsrc)
    if pred is None:
        return ("run", h)
    neg = inst.pred_neg

    def guarded(cta, tids):
        P = cta.regs[pred]
        h(cta, [t for t in tids if bool(P[t]) != neg])
    return ("run", guarded)


def _is_float(op: str) -> bool:
    return any(p in ("f32", "f64", "f16", "bf16", "bf16x2", "f16x2") for p in op.split(".")[1:])


def _getter(op: tuple):
    """cta -> a per-thread list or a _Const."""
    kind, v = op
    if kind == "r":
        return lambda cta: cta.regs[v]
    if kind == "c":
        c = _Const(v)
        return lambda cta: c
    return lambda cta: cta.special(v)


def _dst(prog: Program, tok: str) -> int:
    o = _operand(prog, tok)
    if o[0] != "r":
        raise ExecError(f"destination {tok} is not a register")
    return o[1]


def _arith(prog: Program, inst: Inst, expr: str, nsrc: int):
    """An instruction computing one register from nsrc operands by expr."""
    args = inst.args
    if len(args) != nsrc + 1 or "|" in args[0]:
        raise ExecError(f"{inst.op} with {len(args)} operands not modelled")
    d = _dst(prog, args[0])
    srcs = [_operand(prog, a) for a in args[1:]]
    if any(s[0] == "c" and type(s[1]) is not int for s in srcs):
        raise ExecError(f"{inst.op}: a floating-point immediate in integer arithmetic")
    if any(s[0] == "c" for s in srcs):  # an immediate as the bits of the operation's (source) type
        mask = (1 << _type_of(inst.op)[1]) - 1
        srcs = [("c", s[1] & mask) if s[0] == "c" else s for s in srcs]
    names = ("a", "b", "c", "d")[:nsrc]
    if "min(b, " in expr and srcs[1][0] == "c":  # a shift by an immediate: clamp it once
        w = int(re.search(r"min\(b, (\d+)\)", expr).group(1))
        expr = expr.replace(f"min(b, {w})", str(min(srcs[1][1], w)))
    getters = [_getter(s) for s in srcs]
    compiled: dict[tuple, tuple] = {}

    def run(cta, tids):
        ops = [g(cta) for g in getters]
        kinds = tuple(type(o) is not _Const for o in ops)
        fp = compiled.get(kinds)
        if fp is None:
            fp = compiled[kinds] = _comprehension(expr, names, kinds)
        vals = [o if k else o.v for o, k in zip(ops, kinds)]
        if len(tids) == cta.n:
            cta.regs[d] = fp[0](*vals) if any(kinds) else fp[0](*vals, cta.n)
        else:
            fp[1](cta.dst(d), tids, *vals)
    return run


def _move(prog: Program, inst: Inst):
    """mov / cvta.to.global (global addresses are their generic ones here) of one register."""
    if inst.op.startswith("cvta") and inst.op not in ("cvta.to.global.u64", "cvta.local.u64"):
        raise ExecError(f"{inst.op} not modelled")
    if len(inst.args) != 2 or inst.args[0].startswith("{") or inst.args[1].startswith("{"):
        raise ExecError(f"{inst.op} {', '.join(inst.args)} not modelled (packing)")
    d = _dst(prog, inst.args[0])
    src = _operand(prog, inst.args[1])
    if src[0] == "c":
        if type(src[1]) is not int:
            raise ExecError(f"{inst.op}: a floating-point immediate in an integer move")
        src = ("c", src[1] & ((1 << _type_of(inst.op)[1]) - 1))
    g = _getter(src)

    def run(cta, tids):  # a register never written moves as undefined (None), an error where used
        v = g(cta)
        if len(tids) == cta.n:
            cta.regs[d] = [v.v] * cta.n if type(v) is _Const else None if v is None else list(v)
        else:
            D = cta.dst(d)
            for t in tids:
                D[t] = None if v is None else v[t]
    return run


def _float(prog: Program, inst: Inst):
    """f32 moves, additions, subtractions, products, selections, and the bf16x2 rounding."""
    op, args = inst.op, inst.args
    parts = op.split(".")
    base = parts[0]
    if op == "cvt.rn.bf16x2.f32":
        d, a, b = _dst(prog, args[0]), _getter(_operand(prog, args[1])), _getter(_operand(prog, args[2]))

        def cvt2(cta, tids):  # the upper half from a, the lower from b
            A, B, D = a(cta), b(cta), cta.dst(d)
            dag = cta.dag
            for t in tids:
                D[t] = Bytes(dag.bf16_round(B[t]).bytes + dag.bf16_round(A[t]).bytes)
        return cvt2
    if base == "mov" and op == "mov.f32" and len(args) == 2:
        d, src = _dst(prog, args[0]), _operand(prog, args[1])
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
        return _move(prog, inst)
    if base == "selp" and op == "selp.f32":
        return _select(prog, inst)
    if op in _FLOAT_OPS:
        return _float_op(prog, inst, *_FLOAT_OPS[op])
    if base == "setp" and len(parts) == 3 and parts[2] == "f32":
        return _float_op(prog, inst, "setp." + parts[1], 0, 2)
    if base in ("add", "sub", "mul") and parts[-1] == "f32" and all(p in ("rn", "f32") for p in parts[1:]):
        d = _dst(prog, args[0])
        srcs = [_operand(prog, x) for x in args[1:]]
        if len(srcs) != 2:
            raise ExecError(f"{op} not modelled")
        if any(s[0] == "c" and type(s[1]) is not tuple for s in srcs):
            raise ExecError(f"{op}: an integer immediate")
        g = [_getter(s) for s in srcs]
        consts = [s[1][1] if s[0] == "c" else None for s in srcs]

        def f32op(cta, tids):
            dag = cta.dag
            A, B = [x(cta) for x in g]
            if consts[0] is not None:
                A = _Const(dag.const(consts[0], 4))
            if consts[1] is not None:
                B = _Const(dag.const(consts[1], 4))
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
    d = _dst(prog, args[0])
    srcs = [_operand(prog, a) for a in args[1:]]
    src_width = 8 if inst.op.split(".")[-1] == "f64" else 4
    for o in srcs:
        if o[0] == "c" and (type(o[1]) is not tuple or {"f32": 4, "f64": 8}[o[1][0]] != src_width):
            raise ExecError(f"{inst.op}: an immediate of another type")
    getters = [_getter(o) for o in srcs]
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
        ops = [_Const(dag.const(c, src_width)) if c is not None else g(cta) for g, c in zip(getters, consts)]
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
    d = _dst(prog, args[0])
    srcs = [_operand(prog, a) for a in args[1:]]
    if any(o[0] == "c" and type(o[1]) is not tuple for o in srcs[:2]):
        raise ExecError(f"{inst.op}: an integer immediate")
    getters = [_getter(o) for o in srcs]
    consts = [o[1][1] if o[0] == "c" else None for o in srcs[:2]] + [None]

    def run(cta, tids):
        dag = cta.dag
        A, B, C = [_Const(dag.const(c, 4)) if c is not None else g(cta) for g, c in zip(getters, consts)]
        D = cta.dst(d)
        for t in tids:
            c = C[t]
            D[t] = (A[t] if c else B[t]) if type(c) is int else dag.select(c, A[t], B[t])
    return run


def _logic(prog: Program, inst: Inst):
    """and / or / xor / not .pred: the integer operation where every operand is 0 or 1, else over
    predicate nodes (Dag.both, either, negate)."""
    base = inst.op.split(".")[0]
    nsrc = 1 if base == "not" else 2
    fast = _arith(prog, inst, *_int_template(inst.op))
    d = _dst(prog, inst.args[0])
    srcs = [_operand(prog, a) for a in inst.args[1:]]
    getters = [_getter(o) for o in srcs]
    if len(srcs) != nsrc:
        raise ExecError(f"{inst.op} not modelled")

    def run(cta, tids):
        ops = [g(cta) for g in getters]
        if all(type(o) is _Const or all(type(o[t]) is int for t in tids) for o in ops):
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


def _mask_bytes(prog: Program, inst: Inst):
    """and.b32: on integers as ever; a register of memory bytes (Bytes) and a concrete mask whose bytes
    are each 0x00 or 0xff keeps or zeroes each byte (the decode kernel's masked V fragments)."""
    fast = _arith(prog, inst, "a & b", 2)
    d = _dst(prog, inst.args[0])
    getters = [_getter(_operand(prog, a)) for a in inst.args[1:]]

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
            D[t] = _register_of(*entries, cta.dag)
    return run


# ---------------------------------------------------------------------------------------------
# Memory instructions

_ELEM = {"u8": 1, "s8": 1, "b8": 1, "u16": 2, "s16": 2, "b16": 2, "u32": 4, "s32": 4, "b32": 4, "f32": 4,
         "u64": 8, "s64": 8, "b64": 8}


def _access(op: str) -> tuple[str, int, int]:
    """(space, element bytes, vector count) of ld/st."""
    parts = op.split(".")
    space = next((p for p in parts[1:] if p in ("global", "shared", "param", "local", "const")), "")
    if not space:
        raise ExecError(f"{op}: a generic address space is not modelled")
    vec = next((int(p[1:]) for p in parts if re.match(r"^v[248]$", p)), 1)
    ty = parts[-1]
    if ty not in _ELEM:
        raise ExecError(f"{op} not modelled")
    allowed = {"ld", "st", "global", "shared", "param", "local", "cg", "ca", "cs", "cv", "wb", "wt", "nc", "lu",
               "v2", "v4", ty}
    if any(p not in allowed for p in parts):
        raise ExecError(f"{op} not modelled")
    return space, _ELEM[ty], vec


def _address_getter(prog: Program, tok: str):
    """cta -> per-thread address list (or _Const) of a memory operand."""
    a = _address(prog, tok)
    if a[0] == "r":
        idx, off = a[1], a[2]
        if off == 0:
            return lambda cta: cta.regs[idx]
        return lambda cta: [None if v is None else v + off for v in cta.regs[idx]]
    sym, off = a[1], a[2]
    return lambda cta: _Const(cta.symbol_address(sym) + off)


def _load_store(prog: Program, inst: Inst):
    op, args = inst.op, inst.args
    space, elem, vec = _access(op)
    is_load = op.startswith("ld.")
    kind = "f32" if op.endswith(".f32") else "int"
    if is_load:
        dsts = [_dst(prog, t) for t in
                (split_outside(args[0].strip()[1:-1], "{[", "}]") if args[0].startswith("{") else [args[0]])]
        addr = _address_getter(prog, args[1])
        if len(dsts) != vec:
            raise ExecError(f"{op}: {len(dsts)} destinations")

        def load(cta, tids):
            A = addr(cta)
            for t in tids:
                entries = cta.read(space, A[t], elem * vec, t)
                for j, d in enumerate(dsts):
                    cta.dst(d)[t] = value_of_bytes(entries[j * elem:(j + 1) * elem], kind, cta.dag)
        return load
    addr = _address_getter(prog, args[0])
    srcs = [_getter(s) for s in _vector(prog, args[1])]
    if len(srcs) != vec:
        raise ExecError(f"{op}: {len(srcs)} sources")

    def store(cta, tids):
        A = addr(cta)
        S = [g(cta) for g in srcs]
        for t in tids:
            entries = []
            for s in S:
                entries += bytes_of_value(s[t], elem)
            cta.write(space, A[t], entries, t)
    return store


def _cp_async(prog: Program, inst: Inst):
    """cp.async.{ca,cg}.shared.global [dst], [src], size{, src_size}: src_size bytes copied, the rest
    of size zero-filled; executed at issue."""
    args = inst.args
    if len(args) not in (3, 4) or inst.op not in ("cp.async.cg.shared.global", "cp.async.ca.shared.global"):
        raise ExecError(f"{inst.op} {', '.join(args)} not modelled")
    dst, src = _address_getter(prog, args[0]), _address_getter(prog, args[1])
    size = _imm(args[2])
    if size not in (4, 8, 16):
        raise ExecError(f"cp.async of {args[2]} bytes not modelled")
    src_size = _getter(_operand(prog, args[3])) if len(args) == 4 else (lambda cta: _Const(size))

    def copy(cta, tids):
        D, S, N = dst(cta), src(cta), src_size(cta)
        gm = cta.gmem
        smem = cta.smem
        base = cta.smem_base
        for t in tids:
            n = N[t]
            if n > size:
                raise ExecError(f"cp.async src-size {n} > {size}")
            if n and S[t] % size:
                raise ExecError(f"cp.async from global address {S[t]:#x}, not {size}-byte aligned")
            if cta.speculating:
                raise ExecError("cp.async under a branch on a floating-point value (not modelled)")
            entries = gm_read(gm, S[t], n) + [0] * (size - n) if n else [0] * size
            a = D[t] - base
            if a < 0 or a + size > len(smem) or D[t] % size:
                raise ExecError(f"cp.async to shared address {D[t]:#x} outside the CTA's shared memory or unaligned")
            smem[a:a + size] = entries
            cta.decoded_rows.pop(D[t] & ~15, None)
    return copy




def _atom(prog: Program, inst: Inst):
    if inst.op != "atom.global.add.u32" or len(inst.args) != 3:
        raise ExecError(f"{inst.op} not modelled")
    d = _dst(prog, inst.args[0])
    addr = _address_getter(prog, inst.args[1])
    val = _getter(_operand(prog, inst.args[2]))

    def atom(cta, tids):
        A, V, D = addr(cta), val(cta), cta.dst(d)
        for t in sorted(tids):
            old = value_of_bytes(cta.read("global", A[t], 4), "int", cta.dag)
            if type(old) is not int:
                raise ExecError("atom.add on a value that is not a concrete integer")
            cta.write("global", A[t], list(((old + V[t]) & M32).to_bytes(4, "little")))
            D[t] = old
    return atom


# ---------------------------------------------------------------------------------------------
# Warp-collective instructions: run once per warp, every lane present


def _shfl(prog: Program, inst: Inst):
    """shfl.sync.{bfly,idx}.b32 d|p, a, b, c, membermask over the whole warp (membermask -1, c = 31:
    one segment of 32 lanes): lane l receives a of lane l ^ b (bfly) or of lane b (idx); p is 1
    (the source lane is always in the segment). PTX ISA, "Data Movement: shfl.sync"."""
    mode = inst.op.split(".")[2]
    if inst.op != f"shfl.sync.{mode}.b32" or mode not in ("bfly", "idx") or len(inst.args) != 5:
        raise ExecError(f"{inst.op} not modelled")
    outs = inst.args[0].split("|")
    d = _dst(prog, outs[0])
    p = _dst(prog, outs[1]) if len(outs) == 2 else None
    a, b, c, mask = [_getter(_operand(prog, x)) for x in inst.args[1:]]

    def run(cta, wb):
        A, B, C, Mk = a(cta), b(cta), c(cta), mask(cta)
        D = cta.dst(d)
        got = []
        for lane in range(32):
            t = wb + lane
            if C[t] != 31 or Mk[t] & M32 != M32:
                raise ExecError(f"{inst.op} with c = {C[t]:#x}, membermask {Mk[t]:#x} not modelled")
            src = lane ^ (B[t] & 31) if mode == "bfly" else B[t] & 31
            got.append(A[wb + src])
        D[wb:wb + 32] = got
        if p is not None:
            cta.dst(p)[wb:wb + 32] = [1] * 32
    return run


def _ldmatrix(prog: Program, inst: Inst):
    """ldmatrix.sync.aligned.m8n8.{x1,x2,x4}[.trans].shared.b16: matrix i's row j comes from lane
    8i + j's address (16 bytes); lane l receives, in register i, bytes 4(l%4)..+4 of matrix i's row
    l/4; with .trans the matrix transposed: elements 2(l%4) and 2(l%4) + 1 of column l/4 (each two
    bytes of its row) (PTX ISA, "Warp-level matrix load instruction: ldmatrix")."""
    parts = inst.op.split(".")
    num = {"x1": 1, "x2": 2, "x4": 4}.get(parts[4])
    trans = parts[5:6] == ["trans"]
    if trans:
        parts = parts[:5] + parts[6:]
    if num is None or parts[5:] != ["shared", "b16"]:
        raise ExecError(f"{inst.op} not modelled")
    dsts = [_dst(prog, t) for t in split_outside(inst.args[0].strip()[1:-1], "{[", "}]")]
    if len(dsts) != num:
        raise ExecError(f"{inst.op}: {len(dsts)} destinations")
    addr = _address_getter(prog, inst.args[1])
    if trans:
        return _ldmatrix_trans(dsts, addr, num)

    def run(cta, warp_base):
        A = addr(cta)
        dag, decoded = cta.dag, cta.decoded_rows
        rows = []
        for lane in range(8 * num):
            a = A[warp_base + lane]
            regs = decoded.get(a)
            if regs is None:
                if a % 16:
                    raise ExecError(f"ldmatrix row address {a:#x} not 16-byte aligned")
                e = cta.read("shared", a, 16)
                regs = decoded[a] = tuple(_register_of(e[q], e[q + 1], e[q + 2], e[q + 3], dag) for q in (0, 4, 8, 12))
            rows.append(regs)
        for i, d in enumerate(dsts):
            D = cta.dst(d)
            for lane in range(32):
                D[warp_base + lane] = rows[8 * i + (lane >> 2)][lane & 3]
    return run


def _ldmatrix_trans(dsts: list, addr, num: int):
    def run(cta, warp_base):
        A = addr(cta)
        dag = cta.dag
        rows = []
        for lane in range(8 * num):
            a = A[warp_base + lane]
            if a % 16:
                raise ExecError(f"ldmatrix row address {a:#x} not 16-byte aligned")
            rows.append(cta.read("shared", a, 16))
        for i, d in enumerate(dsts):
            D = cta.dst(d)
            for lane in range(32):
                lo, hi = rows[8 * i + 2 * (lane & 3)], rows[8 * i + 2 * (lane & 3) + 1]
                c = 2 * (lane >> 2)
                D[warp_base + lane] = _register_of(lo[c], lo[c + 1], hi[c], hi[c + 1], dag)
    return run


def _register_of(e0, e1, e2, e3, dag: Dag):
    """A 32-bit register loaded from four byte entries: an int, or Bytes with its two bf16 halves
    worked out where the bytes are two bf16 values (what mma.sync will read them as)."""
    if type(e0) is int and type(e1) is int and type(e2) is int and type(e3) is int:
        return e0 | e1 << 8 | e2 << 16 | e3 << 24
    v = Bytes((e0, e1, e2, e3))
    try:
        v.halves = (_half(e0, e1, dag), _half(e2, e3, dag))
    except TypeError:
        pass  # not bf16 halves: an error if an instruction reads them so
    return v


def _mma(prog: Program, inst: Inst):
    """mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 d, a, b, c with the PTX ISA fragments
    (g = lane / 4, t = lane % 4; low half first): a0 = A[g][2t..2t+1], a1 = A[g+8][2t..],
    a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]; b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g];
    c0, c1 = C[g][2t], C[g][2t+1]; c2, c3 = C[g+8][2t], C[g+8][2t+1]; d as c."""
    if inst.op != "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32":
        raise ExecError(f"{inst.op} not modelled")
    d, a, b, c = [[_dst(prog, t) for t in split_outside(x.strip()[1:-1], "{[", "}]")] for x in inst.args]
    if (len(d), len(a), len(b), len(c)) != (4, 4, 2, 4):
        raise ExecError(f"{inst.op}: fragment sizes {len(d)}, {len(a)}, {len(b)}, {len(c)}")

    def operand(cta, regs: list[int], wb: int, build) -> list[Node]:
        """build(halves of each register) for the warp's values of regs, reused while they are the same
        values (a fragment feeds several mma.sync: its rows are worked out once)."""
        R = cta.regs
        now = [v for x in regs for v in R[x][wb:wb + 32]]
        key = (tuple(regs), wb)
        hit = cta.mma_operands.get(key)
        if hit is not None and hit[0] == now:  # the same objects (ints: equal values)
            return hit[1]
        dag = cta.dag
        ints = dag.int_halves
        halves = [(v.halves if type(v) is Bytes else ints.get(v)) or bf16_halves(v, dag) for v in now]
        out = build(dag, [halves[32 * i:32 * i + 32] for i in range(len(regs))])
        cta.mma_operands[key] = (now, out)
        return out

    def run(cta, wb):
        R, dag = cta.regs, cta.dag
        rows = operand(cta, a, wb, _a_rows)
        cols = operand(cta, b, wb, _b_cols)
        get, table = dag.table.get, dag.table
        for ci, di, rsel, csel in zip(c, d, _MMA_ROWS, _MMA_COLS):
            keys = [(_MMA, acc, rows[r], cols[col]) for acc, r, col in zip(R[ci][wb:wb + 32], rsel, csel)]
            out = [get(k) for k in keys]
            if None in out:
                for i, key in enumerate(keys):
                    if out[i] is None:
                        if type(key[1]) is not Node:
                            raise TypeError("an mma accumulator that is not an f32 value")
                        out[i] = table.get(key) or table.setdefault(key, Node(key, 4))
            cta.dst(di)[wb:wb + 32] = out
    return run


def _a_rows(dag: Dag, h: list) -> list[Node]:
    """The 16 rows of A from the halves of a0..a3 (lane by lane): row g is a0 of lanes 4g..4g+3
    (k 0..7), then a2 (k 8..15); row g + 8 is a1, then a3."""
    vget, vec = dag.vecs.get, dag.vec
    return [vget(t) or vec(t) for t in
            (lo[i] + lo[i + 1] + lo[i + 2] + lo[i + 3] + hi[i] + hi[i + 1] + hi[i + 2] + hi[i + 3]
             for lo, hi in ((h[0], h[2]), (h[1], h[3])) for i in range(0, 32, 4))]


def _b_cols(dag: Dag, h: list) -> list[Node]:
    """The 8 columns of B from the halves of b0, b1: column g is b0 of lanes 4g..4g+3 (k 0..7), then
    b1 (k 8..15)."""
    vget, vec = dag.vecs.get, dag.vec
    return [vget(t) or vec(t) for t in
            (h[0][i] + h[0][i + 1] + h[0][i + 2] + h[0][i + 3] + h[1][i] + h[1][i + 1] + h[1][i + 2] + h[1][i + 3]
             for i in range(0, 32, 4))]


# Per accumulator register c0..c3, lane by lane: its row of A (g or g + 8) and column of B (2t, 2t + 1).
_MMA_ROWS = [[h + (lane >> 2) for lane in range(32)] for h in (0, 0, 8, 8)]
_MMA_COLS = [[2 * (lane & 3) + odd for lane in range(32)] for odd in (0, 1, 0, 1)]


# ---------------------------------------------------------------------------------------------
# wgmma (sm_90a): run per warp, which is exact: warp w of the warpgroup holds rows 16w .. 16w + 15
# of D and of A, and each element depends on its own A row, B column and accumulator only.


def _wgmma(prog: Program, inst: Inst):
    """wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 d, a, b-desc, scale-d, 1, 1[, tnsp-a], tnsp-b
    with A from registers (mma.sync's m16k16 A fragment of the warp's 16 rows) or from a shared-memory
    descriptor, B from one; each element of one k16 step is the node mma.sync's step gives it (the
    assumption wgmma_ptx.cuh states): mma(accumulator, its A row, its B column). D's fragment: register
    4 nt + e of lane l holds row 16w + l / 4 (+ 8 for e >= 2), column 8 nt + 2 (l % 4) + e % 2
    (PTX ISA, "Asynchronous Warpgroup Level Matrix ... Register Fragments"). Descriptors: the 128-byte
    swizzle only (layout type 1, base offset 0), see _sw128."""
    m = re.match(r"^wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.bf16\.bf16$", inst.op)
    if not m:
        raise ExecError(f"{inst.op} not modelled")
    n = int(m.group(1))
    args = inst.args
    d = [_dst(prog, t) for t in split_outside(args[0].strip()[1:-1], "{[", "}]")]
    rs = args[1].strip().startswith("{")
    a_regs = [_dst(prog, t) for t in split_outside(args[1].strip()[1:-1], "{[", "}]")] if rs else []
    a_desc = None if rs else _getter(_operand(prog, args[1]))
    rest = args[2:]
    if len(d) != n // 2 or (rs and len(a_regs) != 4) or len(rest) != (5 if rs else 6):
        raise ExecError(f"{inst.op}: operands {len(d)}, {len(a_regs)}, {len(rest)} not modelled")
    b_desc, scale_d = _getter(_operand(prog, rest[0])), _getter(_operand(prog, rest[1]))
    imms = [_imm(x) for x in rest[2:]]
    if imms[:2] != [1, 1] or (not rs and imms[2] != 0) or imms[-1] not in (0, 1):
        raise ExecError(f"{inst.op} with scales / transposes {rest[2:]} not modelled")
    trans_b = imms[-1]

    def run(cta, wb):
        dag = cta.dag
        P, B = scale_d(cta), b_desc(cta)
        if any(P[wb + i] != 1 for i in range(32)):
            raise ExecError("wgmma with scale-d 0 (D = A B) not modelled")
        bd = _uniform(B, wb, "B descriptor")
        cols = [dag.vec(tuple(_element(cta, bd, trans_b, k, c) for k in range(16))) for c in range(n)]
        if rs:
            R = cta.regs
            halves = [[bf16_halves(v, dag) for v in R[x][wb:wb + 32]] for x in a_regs]
            rows = _a_rows(dag, halves)
        else:
            ad = _uniform(a_desc(cta), wb, "A descriptor")
            w = (wb >> 5) & 3
            rows = [dag.vec(tuple(_element(cta, ad, 0, k, 16 * w + r) for k in range(16)))
                    for r in range(16)]
        R = cta.regs
        for i, di in enumerate(d):
            nt, e = divmod(i, 4)
            acc = R[di]
            out = []
            for lane in range(32):
                c = acc[wb + lane]
                if type(c) is not Node:
                    raise TypeError("a wgmma accumulator that is not an f32 value")
                out.append(dag.mma(c, rows[(lane >> 2) + 8 * (e >> 1)], cols[8 * nt + 2 * (lane & 3) + (e & 1)]))
            cta.dst(di)[wb:wb + 32] = out
    return run


def _uniform(V, wb: int, what: str) -> int:
    v = V[wb]
    if any(V[wb + i] != v for i in range(32)) or type(v) is not int:
        raise ExecError(f"a wgmma {what} that differs across the warp or is not concrete")
    return v


def _sw128(desc: int) -> tuple[int, int, int]:
    """(start, leading byte offset, stride byte offset) of a shared-memory matrix descriptor with the
    128-byte swizzle (bits 0-13 start >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base offset 0,
    62-63 layout 1). Errors: ExecError for another layout."""
    if desc >> 62 != 1 or (desc >> 49) & 7 or desc & ~((0x3FFF) | (0x3FFF << 16) | (0x3FFF << 32) | (3 << 62)):
        raise ExecError(f"wgmma descriptor {desc:#x}: only the 128-byte swizzle with base offset 0 is modelled")
    return (desc & 0x3FFF) << 4, ((desc >> 16) & 0x3FFF) << 4, ((desc >> 32) & 0x3FFF) << 4


def _element(cta, desc: int, trans: int, k: int, mn: int) -> Node:
    """Element (k, mn) of a wgmma operand in shared memory, bf16. K-major (A, or B with tnsp-b 0): row
    mn of 128-byte rows in 8-row groups SBO apart, k contiguous from the start (which must leave the
    step's 32 bytes inside a row); N-major (B with tnsp-b 1): row k, 64 columns a row, column blocks
    LBO apart, 8-row groups SBO apart. The 128-byte swizzle then XORs address bits 4-6 with bits 7-9
    (the address is the shared-memory one, the atoms 1,024-byte aligned)."""
    start, lbo, sbo = _sw128(desc)
    if trans:
        addr = start + (mn >> 6) * lbo + (k >> 3) * sbo + (k & 7) * 128 + 2 * (mn & 63)
    else:
        if (start & 127) + 32 > 128:
            raise ExecError(f"a K-major wgmma operand whose k16 step crosses a 128-byte row (start {start:#x})")
        addr = start + (mn >> 3) * sbo + (mn & 7) * 128 + 2 * k
    addr ^= ((addr >> 7) & 7) << 4
    e = cta.read("shared", addr, 2)
    return _half(e[0], e[1], cta.dag)
