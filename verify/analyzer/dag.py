# Symbolic execution of the CPU kernels' LLVM IR (the issue's direction (b), on the compiled
# code): integers and pointers are concrete, floating-point values are nodes of a hash-consed
# operation DAG whose leaves are the input elements read (tensor, element index). Running a
# function for given shapes gives, for every output element it stores, the exact operation DAG
# (which operations, on which logical operands, in which order and grouping): two functions
# evaluate an element alike iff the DAGs are the same node. Used to compare the CPU matmul's
# micro-kernels dot_block<R, C>: which one computes an element is chosen from m and the thread's
# column range.
# Supported: the scalar and <N x float/i32/i64> instructions clang -O3 emits for these kernels
# (arithmetic, fma, shuffles, extract/insert, phi, select, icmp, loads/stores, gep). Anything else
# raises Unsupported, naming the instruction (the comparison is then not proven).
from __future__ import annotations

import re

from llvm import balanced, split_top

class N:
    """A DAG node: (operation, operands...) where operands are nodes or constants. Hash-consed:
    equal keys give the same object, so equality is identity and hashing is O(arity)."""

    __slots__ = ("key",)

    def __init__(self, key: tuple) -> None:
        self.key = key

    def __repr__(self) -> str:
        return f"N{self.key[:2]}"


_NODES: dict[tuple, N] = {}


def node(*key) -> N:
    """The unique node for an operation and its operands (hash-consing)."""
    n = _NODES.get(key)
    if n is None:
        n = _NODES[key] = N(key)
    return n


class Unsupported(Exception):
    pass


_TYPE_SIZES = {"float": 4, "double": 8, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "i1": 1, "half": 2, "bfloat": 2}


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
    m = re.match(r"^\{(.*)\}$", t)
    if m:
        return sum(type_size(x, types) for x in split_top(m.group(1)))
    raise Unsupported(f"size of type {t}")


class Module:
    """The functions (as raw lines) and named types of one .ll file."""

    def __init__(self, path: str) -> None:
        self.funcs: dict[str, tuple[list[str], list[str]]] = {}
        self.types: dict[str, str] = {}
        lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
        i = 0
        while i < len(lines):
            ln = lines[i]
            tm = re.match(r"^(%[\w.\"\\:()\-<> ]+?) = type (.*)$", ln)
            if tm:
                self.types[tm.group(1)] = tm.group(2).strip()
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
                    elif s.strip():
                        body.append(s)
                    i += 1
                self.funcs[m.group(1)] = (params, body)
            i += 1


def run(module: Module, name: str, args: list, max_steps: int = 20_000_000) -> dict[tuple, tuple]:
    """Executes function `name` with args (ints, ("ptr", base, byte offset), None for null) and
    returns its stores: (base, byte offset) -> value (a DAG node, or an int)."""
    params, order, blocks = _compiled(module, name)
    env: dict[str, object] = dict(zip(params, args))
    memory: dict[tuple, object] = {}
    stores: dict[tuple, object] = {}
    cur, prev = order[0], None
    steps = 0
    while True:
        phis, body, fall = blocks[cur]
        if phis:
            env.update({d: incoming[prev](env) for d, incoming in phis})
        nxt = None
        for f in body:
            res = f(env, memory, stores)
            if res is not None:
                if res == "ret":
                    return stores
                nxt = res
                break
        steps += len(body)
        if steps > max_steps:
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
                            for val, plab in re.findall(r"\[\s*([^,\]]+),\s*(%[\w.$-]+)\s*\]", m.group(3))}
                phis.append((m.group(1), incoming))
            else:
                closures.append(_compile(ln, module))
        blocks[lab] = (phis, closures, order[i + 1] if i + 1 < len(order) else None)
    _COMPILED[key] = (params, order, blocks)
    return _COMPILED[key]


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
            z = node("const", 0.0) if m.group(2) in ("float", "double") else 0
            return tuple(z for _ in range(int(m.group(1))))
        return node("const", 0.0) if ty.strip() in ("float", "double") else 0
    if tok.startswith("<"):
        inner = tok[1:-1]
        et = re.match(r"^<\d+ x (.+)>$", ty.strip()).group(1)
        return tuple(_value(x.strip().split(" ", 1)[1], et, env) for x in split_top(inner))
    if ty.strip() in ("float", "double"):
        if tok.startswith("0x"):
            return node("const", tok)
        return node("const", float(tok))
    if re.match(r"^-?\d+$", tok):
        return int(tok)
    if tok.startswith("@"):
        return ("ptr", tok, 0)
    raise Unsupported(f"operand {tok}")


def _is_node(v) -> bool:
    return isinstance(v, N)


_FP = {"fadd": "add", "fsub": "sub", "fmul": "mul", "fdiv": "div", "frem": "rem"}
_INT = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
        "and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
        "shl": lambda a, b: a << b, "lshr": lambda a, b: (a % (1 << 64)) >> b, "ashr": lambda a, b: a >> b,
        "sdiv": lambda a, b: int(a / b), "udiv": lambda a, b: a // b, "srem": lambda a, b: a - int(a / b) * b,
        "urem": lambda a, b: a % b}
_ICMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "slt": lambda a, b: a < b, "sle": lambda a, b: a <= b,
         "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b, "ult": lambda a, b: a < b, "ule": lambda a, b: a <= b,
         "ugt": lambda a, b: a > b, "uge": lambda a, b: a >= b}


def _ptr_add(p, off: int):
    if p is None:
        return ("ptr", "null", off)
    return ("ptr", p[1], p[2] + off)


def _vec(x) -> bool:
    return isinstance(x, tuple) and not (x and x[0] == "ptr")


def _compile(ln: str, module: Module):
    """One instruction as a closure (env, memory, stores) -> None | next label | "ret"."""
    m = re.match(r"^(%[\w.$-]+) = (.*)$", ln)
    dst, rest = (m.group(1), m.group(2)) if m else (None, ln)
    rest = re.sub(r"^(tail|musttail|notail) ", "", rest)
    op = rest.split()[0]
    if op == "br":
        c = re.match(r"^br i1 ([^,]+), label (%[\w.$-]+), label (%[\w.$-]+)", rest)
        if c:
            cond, t, f = _getter(c.group(1), "i1"), c.group(2), c.group(3)
            return lambda env, mem, st: t if cond(env) else f
        target = re.match(r"^br label (%[\w.$-]+)", rest).group(1)
        return lambda env, mem, st: target
    if op == "ret":
        return lambda env, mem, st: "ret"
    if op in ("unreachable", "resume"):
        def abort(env, mem, st):
            raise Unsupported("reached an abort path")
        return abort
    body = rest[len(op):].strip()
    while True:
        fm = re.match(r"^(nuw|nsw|exact|inbounds|fast|nnan|ninf|nsz|contract|afn|reassoc|arcp) ", body)
        if not fm:
            break
        body = body[fm.end():]
    if op in _FP or op in _INT:
        ty, a, b = re.match(r"^((?:<[^>]+>)|\S+) ([^,]+), (.+)$", body).groups()
        ga, gb = _getter(a, ty), _getter(b, ty)
        if op in _FP:
            name = _FP[op]

            def fp(env, mem, st):
                x, y = ga(env), gb(env)
                env[dst] = tuple(node(name, p, q) for p, q in zip(x, y)) if _vec(x) else node(name, x, y)
            return fp
        f = _INT[op]

        def integer(env, mem, st):
            x, y = ga(env), gb(env)
            env[dst] = tuple(f(p, q) for p, q in zip(x, y)) if _vec(x) else f(x, y)
        return integer
    if op == "fneg":
        ty, a = re.match(r"^((?:<[^>]+>)|\S+) (.+)$", body).groups()
        ga = _getter(a, ty)

        def neg(env, mem, st):
            x = ga(env)
            env[dst] = tuple(node("neg", p) for p in x) if _vec(x) else node("neg", x)
        return neg
    if op == "icmp":
        cc, ty, a, b = re.match(r"^(\w+) ((?:<[^>]+>)|\S+) ([^,]+), (.+)$", body).groups()
        ga, gb, f = _getter(a, ty), _getter(b, ty), _ICMP[cc]

        def icmp(env, mem, st):
            x, y = ga(env), gb(env)
            if isinstance(x, tuple) and x and x[0] == "ptr" or x is None or y is None:
                kx = ("null", 0) if x is None else (x[1], x[2]) if isinstance(x, tuple) else x
                ky = ("null", 0) if y is None else (y[1], y[2]) if isinstance(y, tuple) else y
                env[dst] = int(f(kx, ky)) if cc in ("eq", "ne") else int(f(kx[1], ky[1]))
            else:
                env[dst] = int(f(x, y))
        return icmp
    if op in ("zext", "sext", "trunc", "bitcast", "ptrtoint", "inttoptr", "addrspacecast", "freeze"):
        src = re.match(r"^((?:<[^>]+>)|[^ ]+) ([^ ]+)(?: to (.+))?$", body)
        ga = _getter(src.group(2), src.group(1))
        mask = None
        if op == "trunc":
            mask = (1 << int(re.match(r"i(\d+)", src.group(3).strip()).group(1))) - 1

        def conv(env, mem, st):
            v = ga(env)
            env[dst] = v & mask if mask is not None and isinstance(v, int) else v
        return conv
    if op == "select":
        parts = split_top(body)
        gc = _getter(parts[0].split()[-1], "i1")
        ty = parts[1].rsplit(" ", 1)[0]
        ga, gb = _getter(parts[1].rsplit(" ", 1)[1], ty), _getter(parts[2].rsplit(" ", 1)[1], ty)

        def select(env, mem, st):
            env[dst] = ga(env) if gc(env) else gb(env)
        return select
    if op == "getelementptr":
        parts = split_top(body)
        cur_ty = parts[0]
        gp = _getter(parts[1].rsplit(" ", 1)[1], "ptr")
        terms = []  # (getter, scale) per variable index; constant offset folded
        const = 0
        for k, idx in enumerate(parts[2:]):
            ity, iv = idx.rsplit(" ", 1)
            gi = _getter(iv, ity)
            if k == 0:
                terms.append((gi, type_size(cur_ty, module.types)))
                continue
            t = module.types.get(cur_ty, cur_ty)
            am = re.match(r"^\[(\d+) x (.+)\]$", t)
            if am:
                cur_ty = am.group(2)
                terms.append((gi, type_size(cur_ty, module.types)))
                continue
            sm = re.match(r"^\{(.*)\}$", t)
            if sm:
                fields = split_top(sm.group(1))
                i = gi({})
                const += sum(type_size(f, module.types) for f in fields[:i])
                cur_ty = fields[i]
                continue
            raise Unsupported(f"gep into {t}")

        def gep(env, mem, st):
            off = const + sum(g(env) * sc for g, sc in terms)
            env[dst] = _ptr_add(gp(env), off)
        return gep
    if op == "load":
        ty, ptr = re.match(r"^((?:<[^>]+>)|[^,]+), [^,]+ ([^,]+)", body).groups()
        gp, ty = _getter(ptr, "ptr"), ty.strip()

        def load(env, mem, st):
            env[dst] = _load(ty, gp(env), mem, module)
        return load
    if op == "store":
        parts = split_top(body)
        ty, val = parts[0].rsplit(" ", 1)
        gp, gv, ty = _getter(parts[1].rsplit(" ", 1)[1], "ptr"), _getter(val, ty), ty.strip()

        def store(env, mem, st):
            _store(ty, gp(env), gv(env), mem, st, module)
        return store
    if op == "call" or op == "invoke":
        cm = re.search(r"@([\w.$-]+)\((.*)\)", body)
        callee, argtxt = cm.group(1), cm.group(2)
        gs = []
        for a in split_top(argtxt):
            toks = a.split()
            gs.append(_getter(toks[-1], " ".join(toks[:-1]).split(" noundef")[0]))
        if callee.startswith("llvm.fma") or callee.startswith("llvm.fmuladd"):
            def fma(env, mem, st):
                a, b, c = (g(env) for g in gs)
                env[dst] = tuple(node("fma", *xs) for xs in zip(a, b, c)) if _vec(a) else node("fma", a, b, c)
            return fma
        if callee.startswith(("llvm.prefetch", "llvm.lifetime", "llvm.assume", "llvm.experimental.noalias")):
            return lambda env, mem, st: None
        if callee.startswith(("llvm.smin", "llvm.smax", "llvm.umin", "llvm.umax")):
            f = min if "min" in callee else max

            def minmax(env, mem, st):
                env[dst] = f(gs[0](env), gs[1](env))
            return minmax

        def unsupported(env, mem, st):
            raise Unsupported(f"call to {callee}")
        return unsupported
    if op == "shufflevector":
        parts = split_top(body)
        t1, a = parts[0].rsplit(" ", 1)
        t2, b = parts[1].rsplit(" ", 1)
        ga, gb = _getter(a, t1), _getter(b, t2)
        mask_txt = parts[2]
        if "zeroinitializer" in mask_txt:
            idx = [0] * int(re.match(r"<(\d+)", mask_txt).group(1))
        else:
            idx = [int(t) if t not in ("undef", "poison") else -1
                   for t in re.findall(r"i32 (-?\d+|undef|poison)", mask_txt)]
        undef = node("undef")

        def shuffle(env, mem, st):
            both = ga(env) + gb(env)
            env[dst] = tuple(both[i] if i >= 0 else undef for i in idx)
        return shuffle
    if op == "extractelement":
        parts = split_top(body)
        t, a = parts[0].rsplit(" ", 1)
        ga, gi = _getter(a, t), _getter(parts[1].rsplit(" ", 1)[1], "i64")
        return lambda env, mem, st: env.__setitem__(dst, ga(env)[gi(env)])
    if op == "insertelement":
        parts = split_top(body)
        t, a = parts[0].rsplit(" ", 1)
        et, b = parts[1].rsplit(" ", 1)
        ga, gb, gi = _getter(a, t), _getter(b, et), _getter(parts[2].rsplit(" ", 1)[1], "i64")

        def insert(env, mem, st):
            v = list(ga(env))
            v[gi(env)] = gb(env)
            env[dst] = tuple(v)
        return insert
    if op == "alloca":
        return lambda env, mem, st: env.__setitem__(dst, ("ptr", dst, 0))

    def unknown(env, mem, st):
        raise Unsupported(f"instruction {op}: {ln[:80]}")
    return unknown


def _elem(t: str) -> tuple[int, str]:
    m = re.match(r"^<(\d+) x (.+)>$", t)
    return (int(m.group(1)), m.group(2)) if m else (1, t)


def _load(ty: str, p, memory: dict, module: Module):
    n, et = _elem(ty)
    size = type_size(et, module.types)
    vals = []
    for j in range(n):
        key = (p[1], p[2] + j * size)
        if key in memory:
            vals.append(memory[key])
        else:
            vals.append(node("in", p[1], p[2] + j * size))
    return tuple(vals) if ty.startswith("<") else vals[0]


def _store(ty: str, p, v, memory: dict, stores: dict, module: Module) -> None:
    n, et = _elem(ty)
    size = type_size(et, module.types)
    vals = v if ty.startswith("<") else (v,)
    for j in range(n):
        key = (p[1], p[2] + j * size)
        memory[key] = vals[j]
        stores[key] = vals[j]


def canonical(v, rename) -> N:
    """The DAG with its leaves renamed by rename(base, byte offset) -> logical name (iterative,
    memoized per node so a shared subgraph is renamed once)."""
    memo: dict[N, N] = {}
    stack = [(v, False)]
    while stack:
        x, ready = stack.pop()
        if not isinstance(x, N) or x in memo:
            continue
        k = x.key
        if k[0] == "in":
            memo[x] = node("in", *rename(k[1], k[2]))
            continue
        if ready:
            memo[x] = node(k[0], *[memo[a] if isinstance(a, N) else a for a in k[1:]])
            continue
        stack.append((x, True))
        for a in k[1:]:
            if isinstance(a, N) and a not in memo:
                stack.append((a, False))
    return memo.get(v, v)
