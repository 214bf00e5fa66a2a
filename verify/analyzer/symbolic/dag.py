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
# constants) are domains/dag_values.py's; equality up to the AVX-512 decoders' table lookups is
# domains/dag_tables.py's; the instructions are compiled once into closures (dag_insts.py, with
# dag_calls.py and dag_convert.py) over the run's state (dag_state.py).
from __future__ import annotations

import re

from ..domains.dag_values import N, Unsupported, _COMMUTATIVE, node
from ..frontend.llvm import LlvmModule
from .dag_insts import compile_instruction
from .dag_state import Ctx, fails, getter


def run(module: LlvmModule, name: str, args: list, max_steps: int = 20_000_000, memory: dict | None = None,
        modules: list[LlvmModule] | None = None, pure: str = "") -> dict[tuple, object]:
    """Executes function `name` with args (ints, ("ptr", base, byte offset), None for null) and
    returns the memory it wrote: (base, byte offset) -> value (a DAG node, or an int, or a
    pointer). memory: initial contents, (base, offset) -> (value, size in bytes) (pointer arrays).
    modules: further modules whose functions a call may execute; pure: regex of callees treated
    as uninterpreted functions."""
    ctx = Ctx([module] + list(modules or []), pure, max_steps, _call)
    for (base, off), (v, size) in (memory or {}).items():
        ctx.memory[(base, off)] = (v, size)
        for b in range(off, off + size):
            ctx.written[(base, b)] = off
        ctx.written_bases.add(base)
    _call(ctx, module, name, args)
    init = set(memory or {})
    return {k: v for k, (v, _) in ctx.memory.items() if k not in init or (memory or {})[k][0] is not v}




def call(module: LlvmModule, name: str, args: list, max_steps: int = 10_000):
    """The value function `name` of module returns for args (a run of its own: block_layout)."""
    return _call(Ctx([module], "", max_steps, _call), module, name, args)


def _call(ctx: Ctx, module: LlvmModule, name: str, args: list):
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


# (id(module), function) -> (module, compiled): the entry holds its module, so that no other module
# can take its id while the entry stands
_COMPILED: dict[tuple[int, str], tuple] = {}


def _compiled(module: LlvmModule, name: str):
    """The function's blocks, each instruction parsed once into a closure: label -> (phis
    [(dst, {pred: getter})], [closure], fall-through label)."""
    key = (id(module), name)
    got = _COMPILED.get(key)
    if got is not None and got[0] is module:
        return got[1]
    f = module.funcs[name]
    params, body = f.params, f.body
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
                incoming = {plab: getter(val.strip(), m.group(2))
                            for val, plab in re.findall(r"\[\s*([^\[\]]+?),\s*(%[\w.$-]+)\s*\]", m.group(3))}
                phis.append((m.group(1), incoming))
            else:
                try:
                    closures.append(compile_instruction(ln, module))
                except (AttributeError, ValueError, IndexError, KeyError, Unsupported) as e:
                    closures.append(fails(f"cannot read {ln[:80]} ({type(e).__name__})"))
        blocks[lab] = (phis, closures, order[i + 1] if i + 1 < len(order) else None)
    _COMPILED[key] = (module, (params, order, blocks))
    return params, order, blocks



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
