# The instructions of ptx_exec.py's symbolic execution: compile_program flattens a PTX entry into a
# Program (ptx_program.py) and compiles each instruction once into a handler over the CTA's
# registers, by a table of base opcode -> compiler: integer and predicate operations as expression
# templates over whole thread lists (ptx_int.py), floating-point operations and their comparisons
# as DAG nodes (ptx_float.py), loads, stores, cp.async and atom over byte memory (ptx_memops.py),
# ldmatrix, mma.sync, shfl.sync and wgmma once per warp with the PTX-ISA fragment layouts
# (ptx_warp.py). A handler is (kind, payload): run (payload(cta, tids)), branch (target, predicate,
# negated), ret, bar, collective (payload(cta, warp's first thread)). An opcode or operand form not
# modelled raises ExecError.
from __future__ import annotations

from ..domains.ptx_dag import ExecError
from ..frontend.kir import Function, Inst
from ..frontend.ptx import PtxModule
from .ptx_float import floating, is_float
from .ptx_int import arith, cvt_template, int_template, logic, mask_bytes, move
from .ptx_memops import atom, cp_async, load_store
from .ptx_program import Program, reg
from .ptx_warp import ldmatrix, mma, shfl, wgmma


def compile_program(func: Function, module: PtxModule) -> Program:
    """Flattens func (an entry of module) and compiles each instruction. Errors: ExecError for an
    opcode not modelled."""
    insts, labels = [], {}
    for b in func.blocks:
        labels[b.label] = len(insts)
        insts.extend(b.insts)
    shared = {k: v for k, v in module.shared_declarations().items() if k in func.symbols}
    local = {k: v for k, v in module.local_declarations().items() if func.symbols.get(k) == "local"}
    if len(local) > 1:
        raise ExecError(f"{func.name}: {len(local)} local arrays (one, the depot, is modelled)")
    prog = Program(func, insts, labels, [], {}, shared, list(func.params), local)
    for inst in insts:
        try:
            prog.handlers.append(_compile(prog, inst))
        except ExecError as e:
            raise ExecError(f"{e} (line {inst.line}: {inst.text})") from None
    return prog


def _compile(prog: Program, inst: Inst):
    base = inst.op.split(".")[0]
    pred = reg(prog, inst.pred) if inst.pred is not None and base != "bra" else None
    return _COMPILERS.get(base, _computing)(prog, inst, pred)


# Fences and the waits of asynchronous operations that run at issue (wgmma, cp.async): no-ops.
_NO_OPS = ("membar.gl", "membar.cta", "fence.acq_rel.gpu", "fence.sc.gpu", "fence.proxy.async.shared::cta",
           "wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned",
           "cp.async.commit_group", "cp.async.wait_all")


def _no_op(op: str) -> bool:
    return op in _NO_OPS or op.startswith("cp.async.wait_group")


def _branch(prog: Program, inst: Inst, pred):
    if len(inst.targets) != 1 or inst.targets[0] not in prog.labels:
        raise ExecError(f"branch to {inst.targets} not modelled")
    p = None if inst.pred is None else reg(prog, inst.pred)
    return ("branch", (inst.targets[0], p, inst.pred_neg))


def _ret(prog: Program, inst: Inst, pred):
    if inst.pred is not None:
        raise ExecError(f"predicated {inst.op} not modelled")
    return ("ret", None)


def _bar(prog: Program, inst: Inst, pred):
    if inst.op not in ("bar.sync", "barrier.sync", "bar.sync.aligned", "barrier.sync.aligned") or \
            inst.args != ["0"] or pred is not None:
        raise ExecError(f"{inst.op} {', '.join(inst.args)} not modelled (only bar.sync 0)")
    return ("bar", None)


def _fence(prog: Program, inst: Inst, pred):
    if _no_op(inst.op):
        return ("run", lambda cta, tids: None)
    return _computing(prog, inst, pred)


def _collective(prefix: str, compiler):
    """A warp-collective family: unguarded, opcode starting with prefix, else the generic path."""
    def compile_(prog: Program, inst: Inst, pred):
        if _no_op(inst.op):
            return ("run", lambda cta, tids: None)
        if pred is not None:
            raise ExecError(f"a predicated warp-collective {inst.op} not modelled")
        if inst.op.startswith(prefix):
            return ("collective", compiler(prog, inst))
        return _computing(prog, inst, pred)
    return compile_


def _cp(prog: Program, inst: Inst, pred):
    if _no_op(inst.op):
        return ("run", lambda cta, tids: None)
    if inst.op.startswith("cp.async.cg.shared.global") or inst.op.startswith("cp.async.ca.shared.global"):
        return _guarded(cp_async(prog, inst), inst, pred)
    return _computing(prog, inst, pred)


def _memory(compiler):
    return lambda prog, inst, pred: _guarded(compiler(prog, inst), inst, pred)


def _computing(prog: Program, inst: Inst, pred):
    """Every other instruction computes a register: floating point, a move, predicate logic, an
    and.b32 of memory bytes, an integer conversion, or an integer template."""
    op = inst.op
    base = op.split(".")[0]
    if base in _FLOAT_BASES and is_float(op):
        h = floating(prog, inst)
    elif base in ("mov", "cvta"):
        h = move(prog, inst)
    elif base in ("and", "or", "xor", "not") and op.endswith(".pred"):
        h = logic(prog, inst)
    elif op == "and.b32":
        h = mask_bytes(prog, inst)
    elif base == "cvt":
        h = arith(prog, inst, cvt_template(op), 1)
    else:
        expr, nsrc = int_template(op)
        h = arith(prog, inst, expr, nsrc)
    return _guarded(h, inst, pred)


def _guarded(h, inst: Inst, pred):
    """h run by the threads whose guard predicate lets the instruction run."""
    if pred is None:
        return ("run", h)
    neg = inst.pred_neg

    def guarded(cta, tids):
        P = cta.regs[pred]
        h(cta, [t for t in tids if bool(P[t]) != neg])
    return ("run", guarded)


_FLOAT_BASES = ("add", "sub", "mul", "fma", "mov", "cvt", "selp", "max", "min", "abs", "neg", "ex2", "div", "rcp",
                "setp")
# base opcode -> compiler(program, instruction, guard predicate's register or None); others: _computing
_COMPILERS = {"bra": _branch, "ret": _ret, "exit": _ret, "bar": _bar, "barrier": _bar, "membar": _fence,
              "fence": _fence, "cp": _cp, "ldmatrix": _collective("ldmatrix.sync.aligned.m8n8.", ldmatrix),
              "mma": _collective("mma.sync.aligned.", mma), "shfl": _collective("shfl.sync.", shfl),
              "wgmma": _collective("wgmma.mma_async.", wgmma), "ld": _memory(load_store), "st": _memory(load_store),
              "atom": _memory(atom)}
