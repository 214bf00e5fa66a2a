# Calls in dag.py's symbolic execution of LLVM IR, compiled once into closures (env, ctx) -> None:
# an indirect call through a constant table of function pointers and a call of a function defined
# in the run's modules execute it (ctx.call); the intrinsics below are modelled, by a table of
# callee prefix -> compiler; a callee declared pure is an uninterpreted function of its operands
# (reading only memory the run has not written); any other call raises Unsupported.
from __future__ import annotations

import re

from ..domains.dag_values import BV, Unsupported, _bits, _to_s, _to_u, node
from ..frontend.llvm_types import split_top, split_typed
from .dag_state import getter, is_ptr, is_vec, store, width


def compile_call(dst: str | None, body: str, ln: str):
    """call/invoke: body is the instruction after its opcode (return type, callee, arguments)."""
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
        ty, val = split_typed(a)
        gs.append(getter(val, ty.split(" noundef")[0]))
    if callee.startswith("%"):
        return _indirect(dst, getter(callee, "ptr"), gs)
    name = callee[1:]
    for prefixes, compiler in _INTRINSICS:
        if name.startswith(prefixes):
            return compiler(dst, name, gs, ret_ty, ln)
    return _direct(dst, name, gs, ret_ty)


def _indirect(dst, gf, gs):
    """A function pointer loaded from a constant table: the function it points to, executed."""
    def indirect(env, ctx):
        f = gf(env)
        if not is_ptr(f) or f[2] != 0 or ctx.find(f[1][1:]) is None:
            raise Unsupported(f"indirect call of {f!r:.60}")
        r = ctx.call(ctx, ctx.find(f[1][1:]), f[1][1:], [g(env) for g in gs])
        if dst:
            env[dst] = r
    return indirect


def _direct(dst, name: str, gs, ret_ty: str):
    """A function of the run's modules (executed), or a pure callee (a node of its operands)."""
    def call(env, ctx):
        args = [g(env) for g in gs]
        target = ctx.find(name)
        if target is not None:
            r = ctx.call(ctx, target, name, args)
            if dst:
                env[dst] = r
            return
        if ctx.pure is not None and ctx.pure.search(name):
            ops = []
            for a in args:
                if is_ptr(a):
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


def _fused(op: str):
    """llvm.fma (one rounding) and llvm.fmuladd (fused or not at the compiler's choice: its own
    operation): a node of the three operands, lane by lane."""
    def compiler(dst, name, gs, ret_ty, ln):
        def fused(env, ctx):
            a, b, c = (g(env) for g in gs)
            env[dst] = tuple(node(op, *xs) for xs in zip(a, b, c)) if is_vec(a) else node(op, a, b, c)
        return fused
    return compiler


def _hint(dst, name, gs, ret_ty, ln):
    return lambda env, ctx: None  # prefetch, lifetime, assume, noalias: no value


def _minmax(dst, name, gs, ret_ty, ln):
    """llvm.smin/smax/umin/umax: concrete on integers, else an uninterpreted function of the bits."""
    w = width(ret_ty)
    signed = name.startswith(("llvm.smin", "llvm.smax"))
    pick = min if "min" in name else max

    def mm1(x, y):
        if type(x) is int and type(y) is int:
            return pick(x, y, key=lambda v: _to_s(v, w) if signed else _to_u(v, w))
        n = node(name.split(".")[1], w, _bits(x, w), _bits(y, w))
        return BV(tuple(node("bit", j, n) for j in range(w)))

    def minmax(env, ctx):
        x, y = gs[0](env), gs[1](env)
        env[dst] = tuple(mm1(p, q) for p, q in zip(x, y)) if is_vec(x) else mm1(x, y)
    return minmax


def _permute(dst, name, gs, ret_ty, ln):
    """vpermt2ps: lane j is (idx & 8 ? hi : lo)[idx & 7] (8 lanes); a perm node where the index
    bits are not known (dag_tables.py compares it)."""
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


def _memset(dst, name, gs, ret_ty, ln):
    def memset(env, ctx):
        p, v, n = gs[0](env), gs[1](env), gs[2](env)
        if not is_ptr(p) or type(n) is not int:
            raise Unsupported(f"memset of a computed size: {ln[:80]}")
        for j in range(n):
            store((1, "i8", 1, False), ("ptr", p[1], p[2] + j), v, ctx)
    return memset


# callee prefix -> compiler(dst, name, argument getters, return type, line), tried in order
_INTRINSICS = ((("llvm.fma.",), _fused("fma")), (("llvm.fmuladd.",), _fused("fmuladd")),
               (("llvm.prefetch", "llvm.lifetime", "llvm.assume", "llvm.experimental.noalias"), _hint),
               (("llvm.smin", "llvm.smax", "llvm.umin", "llvm.umax"), _minmax),
               (("llvm.x86.avx512.vpermi2var.ps",), _permute), (("llvm.memset",), _memset))
