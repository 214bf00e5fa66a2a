# Equality of dag.py DAGs up to table lookups: the AVX-512 one-row matmul decodes Q4_0 and Q4_1
# weights by selecting from a 16-entry table (vpermt2ps: a "perm" node over four index bits),
# where the AVX2 decoders compute the value from the same four bits. same() equates such a
# lookup with a value if, for each of the 16 values of the index bits, the entry selected is the
# value evaluated there (truth tables for the integer part, constants folded where exact).
from __future__ import annotations

from .dag_values import (N, _COMMUTATIVE, _const_of, _fold_exact, node)


def same(a, b, budget: int = 10_000_000) -> bool:
    """Whether a and b compute the same value: the same node, or the same operation on operands
    that compute the same values, where a table lookup (perm: vpermt2ps, the AVX-512 decoders)
    equals a value computed from the same index bits if, for each of the 2^n values of those bits,
    the entry it selects is the value evaluated there (perm_equal). False when unsure."""
    stack = [(a, b)]
    seen: set[tuple[int, int]] = set()
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        if not isinstance(x, N) or not isinstance(y, N):
            if isinstance(x, N) or isinstance(y, N) or type(x) is not type(y):
                return False
            if isinstance(x, tuple):
                if len(x) != len(y):
                    return False
                stack.extend(zip(x, y))
            elif x != y:
                return False
            continue
        if (id(x), id(y)) in seen:
            continue
        seen.add((id(x), id(y)))
        budget -= 1
        if budget < 0:
            return False
        if x.key[0] == "perm" or y.key[0] == "perm":
            if not (perm_equal(x, y) if x.key[0] == "perm" else perm_equal(y, x)):
                return False
            continue
        kx, ky = x.key, y.key
        if kx[0] != ky[0] or len(kx) != len(ky):
            return False
        stack.extend(zip(kx[1:], ky[1:]))
    return True


def _leaf_bit(b) -> bool:
    return isinstance(b, N) and b.key[0] == "bit" and isinstance(b.key[2], N) and b.key[2].key[0] == "in"


def perm_equal(p: N, other, limit: int = 400) -> bool:
    """perm(bits, table) == other: every index bit is a constant or an input bit; for each value v
    of those input bits, table[index(v)] and other with the bits set to v (constants folded) compute
    the same value. Truth tables over the 2^n assignments evaluate other's integer parts at once."""
    bits, table = p.key[1], p.key[2]
    vars_ = sorted({b for b in bits if not isinstance(b, int)}, key=id)
    if not all(_leaf_bit(b) for b in vars_) or len(vars_) > 4:
        return False
    n = 1 << len(vars_)
    full = (1 << n) - 1
    masks = {v: sum(1 << a for a in range(n) if (a >> i) & 1) for i, v in enumerate(vars_)}
    truth: dict[int, int] = {}

    def tt(x) -> int | None:
        """x's truth table over the assignments (bit a: x's value under assignment a), if x is a
        boolean formula over vars_ and constants."""
        if type(x) is int:
            return full if x else 0
        if x in masks:
            return masks[x]
        got = truth.get(id(x))
        if got is not None:
            return got
        op = x.key[0]
        if op == "~":
            t = tt(x.key[1])
            r = None if t is None else full ^ t
        elif op in ("&", "|", "^"):
            t1, t2 = tt(x.key[1]), tt(x.key[2])
            r = None if t1 is None or t2 is None else (t1 & t2 if op == "&" else t1 | t2 if op == "|" else t1 ^ t2)
        else:
            r = None
        if r is not None:
            truth[id(x)] = r
        return r

    for a in range(n):
        index = sum((b if type(b) is int else (a >> vars_.index(b)) & 1) << i for i, b in enumerate(bits))
        memo: dict[int, object] = {}
        got = _at(other, a, tt, memo, [limit])
        if got is None or not _same_commuted(table[index], got, limit):
            return False
    return True


def _same_commuted(x, y, depth: int) -> bool:
    """same() on small DAGs (a table entry and a decoded value), the operands of a floating-point
    add or mul in either order: LLVM's fadd and fmul are commutative (its semantics leave a NaN's
    payload open, so the compiler may swap them on either path)."""
    if x is y:
        return True
    if not isinstance(x, N) or not isinstance(y, N):
        if isinstance(x, N) or isinstance(y, N) or type(x) is not type(y):
            return False
        if isinstance(x, tuple):
            return len(x) == len(y) and all(_same_commuted(p, q, depth - 1) for p, q in zip(x, y))
        return x == y
    kx, ky = x.key, y.key
    if depth <= 0 or kx[0] != ky[0] or len(kx) != len(ky) or kx[0] == "perm":
        return False
    if all(_same_commuted(p, q, depth - 1) for p, q in zip(kx[1:], ky[1:])):
        return True
    return kx[0] in ("add", "mul") and len(kx) == 3 and _same_commuted(kx[1], ky[2], depth - 1) and \
        _same_commuted(kx[2], ky[1], depth - 1)


def _at(x, a: int, tt, memo: dict, budget: list):
    """x under assignment a of perm_equal's variables, rebuilt with constants folded; None if it
    grows past the budget or a bit is not a formula over the variables."""
    if not isinstance(x, N):
        if isinstance(x, tuple):
            out = []
            for y in x:
                r = _at(y, a, tt, memo, budget)
                if r is None:
                    return None
                out.append(r)
            return type(x)(out)
        return x
    got = memo.get(id(x))
    if got is not None:
        return got
    budget[0] -= 1
    if budget[0] < 0:
        return None
    k = x.key
    op = k[0]
    if op in ("~", "&", "|", "^", "bit"):
        t = tt(x)
        if t is not None:
            r = (t >> a) & 1
        elif op == "bit":
            r = x
        else:  # a formula over other bits too: rebuilt (folding what the assignment decides)
            args = [_at(y, a, tt, memo, budget) for y in k[1:]]
            if any(y is None for y in args):
                return None
            r = _COMMUTATIVE[op](*args)
    elif op in ("in", "const", "undef", "addr"):
        r = x
    else:
        args = []
        for y in k[1:]:
            r = _at(y, a, tt, memo, budget)
            if r is None:
                return None
            args.append(r)
        if op in ("uitofp", "sitofp") and all(type(b) is int for b in args[1]):
            v = sum(b << j for j, b in enumerate(args[1]))
            if op == "sitofp" and args[1] and args[1][-1]:
                v -= 1 << len(args[1])
            r = _const_of(float(v), args[0] == "float")
        elif op in ("add", "sub", "mul") and all(isinstance(y, N) and y.key[0] == "const" for y in args):
            r = _fold_exact(op, args[0], args[1])
        else:
            r = None
        if r is None:
            r = node(op, *args)
    memo[id(x)] = r
    return r
