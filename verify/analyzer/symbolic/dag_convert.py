# Conversions in dag.py's symbolic execution of LLVM IR, compiled once into closures: the same bits
# (ptrtoint, inttoptr, addrspacecast, freeze, a bitcast that keeps the lane count), a bitcast that
# repacks lanes (bit by bit; the bits of one float read back as that float), integer widening and
# truncation (on the bits), integer to float by the integer's value, and the float conversions
# (nodes).
from __future__ import annotations

import re

from ..domains.dag_values import BV, N, Unsupported, _bits, _const_of, _from_bits, _to_s, _to_u, node
from .dag_state import FLOATS, is_ptr, is_vec, width


def compile_conversion(op: str, dst: str, ga, sty: str, to: str, ln: str):
    """op (from type sty to type to) of the operand ga gives."""
    slanes = re.match(r"^<(\d+) x (.+)>$", sty.strip())
    tlanes = re.match(r"^<(\d+) x (.+)>$", to)
    if op in ("ptrtoint", "inttoptr", "addrspacecast", "freeze") or \
            (op == "bitcast" and (slanes.group(1) if slanes else "1") == (tlanes.group(1) if tlanes else "1")):
        def same(env, ctx):  # the same bits (a pointer stays a pointer; a lane keeps its node)
            env[dst] = ga(env)
        return same
    if op == "bitcast":
        return _repack(dst, ga, sty, slanes, tlanes, to)
    sw, tw = width(sty), width(to)
    tel = (tlanes.group(2) if tlanes else to).strip()
    sel = (slanes.group(2) if slanes else sty).strip()
    if op in ("zext", "sext", "trunc"):
        one = _integer(op, sw, tw)
    elif op in ("sitofp", "uitofp"):  # by the integer's value, whatever its width
        one = _to_float(op, sw, tel)
    else:  # float -> int and float <-> float conversions
        def one(x):
            if is_ptr(x) or x is None:
                raise Unsupported(f"{op} of a pointer")
            return node(op, sel, tel, x)

    def conv(env, ctx):
        v = ga(env)
        env[dst] = tuple(one(x) for x in v) if is_vec(v) else one(v)
    return conv


def _repack(dst: str, ga, sty: str, slanes, tlanes, to: str):
    """A bitcast between vectors of another lane count: the bits, regrouped."""
    sw = width(sty)
    tel = (tlanes.group(2) if tlanes else to).strip()
    sel = (slanes.group(2) if slanes else sty).strip()
    n_out = int(tlanes.group(1)) if tlanes else 1
    n_in = int(slanes.group(1)) if slanes else 1
    in_bits = (sw if not sel.startswith(FLOATS) else {"float": 32, "double": 64}.get(sel, 16))
    out_bits = in_bits * n_in // n_out

    def repack(env, ctx):
        v = ga(env)
        lanes = v if is_vec(v) else (v,)
        bits: tuple = ()
        for x in lanes:
            if is_ptr(x) or x is None:
                raise Unsupported("bitcast of a pointer vector")
            bits += _bits(x, in_bits)
        out = []
        for j in range(n_out):
            chunk = bits[out_bits * j:out_bits * (j + 1)]
            if tel.startswith(FLOATS):
                out.append(_float_of_bits(chunk))
            else:
                out.append(_from_bits(chunk))
        env[dst] = tuple(out) if tlanes else out[0]
    return repack


def _float_of_bits(chunk: tuple):
    """The bits of one float: that float; an integer's bits read as a float: the BV."""
    c0 = chunk[0]
    f = c0.key[2] if isinstance(c0, N) and c0.key[0] == "bit" and c0.key[1] == 0 else None
    if f is not None and all(isinstance(b, N) and b.key[0] == "bit" and b.key[1] == i and b.key[2] is f
                             for i, b in enumerate(chunk)):
        return f
    return BV(chunk)


def _integer(op: str, sw: int, tw: int):
    """zext, sext, trunc of one lane."""
    def one(x):
        if type(x) is int:
            if op == "zext":
                return _to_u(x, sw)
            if op == "sext":
                return _to_s(x, sw)
            return _to_u(x, tw)
        if is_ptr(x) or x is None:
            raise Unsupported(f"{op} of a pointer")
        a = _bits(x, sw)
        if op == "trunc":
            return _from_bits(a[:tw])
        return _from_bits(a + ((a[-1] if op == "sext" else 0),) * (tw - sw))
    return one


def _to_float(op: str, sw: int, tel: str):
    """sitofp, uitofp of one lane: a constant where the integer is known, else a node of its value
    (its bits without known-zero or sign-copy high bits)."""
    def one(x):
        if is_ptr(x) or x is None:
            raise Unsupported(f"{op} of a pointer")
        a = _bits(x, sw)
        known = type(x) is int or all(type(b) is int for b in a)
        if known and tel in ("float", "double"):  # a known integer: its value
            v = sum(b << j for j, b in enumerate(a))
            if op == "sitofp" and a[-1]:
                v -= 1 << len(a)
            c = _const_of(float(v), tel == "float") if abs(v) < (1 << 53) else None
            if c is not None:
                return c
        n = len(a)
        if op == "uitofp" or a[-1] == 0:  # the value of the bits up to the highest not known 0
            while n and type(a[n - 1]) is int and a[n - 1] == 0:
                n -= 1
            return node("uitofp", tel, a[:n])
        while n > 1 and a[n - 1] is a[n - 2]:  # the value of the bits without sign copies
            n -= 1
        return node("sitofp", tel, a[:n])
    return one
