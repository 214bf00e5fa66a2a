# Symbolic execution of a PTX kernel, one CTA at a time (gemm_chains.py and attention_chains.py run
# grids of them). Integers and addresses are concrete (typed wrap-around); floating-point values are
# nodes of a hash-consed DAG (domains/ptx_dag.py) whose leaves are input elements; predicates are
# concrete but for comparisons of floating-point values, which are nodes too (run_cta says how a
# branch on one runs).
# Threads of a CTA run in groups that share a program counter; the group with the smallest one
# runs, up to its next branch, so that groups that diverged meet again and merge. bar.sync and
# warp-collective instructions (ldmatrix, mma.sync) wait until every thread they need stands at
# the same instruction; anything else (threads waiting at different barriers, a warp split at a
# collective, a barrier after some threads exited) is refused.
# Each thread has its own local memory (the entry's __local_depot); the parameter space holds each
# parameter's bytes (a struct by value, or several scalars and pointers); global memory is
# ptx_memory.py's buffers.
# Modelled as: cp.async (and wgmma) at issue (commit_group and wait_group are no-ops), which assumes
# the kernel's barrier protocol (a stage is read only after the wait and the barrier that order
# it after its copy; racecheck tests that); membar and fences are no-ops (CTAs run one after
# another, so every earlier CTA's stores are visible); atom is executed in thread order.
# Every instruction not modelled raises ExecError naming its opcode and line: nothing is guessed.
# This file: the running of a CTA; ptx_program.py holds the program and its operands, ptx_ops.py
# compiles the instructions (its table of opcode -> compiler, over ptx_int.py, ptx_float.py,
# ptx_memops.py and ptx_warp.py).
from __future__ import annotations

from dataclasses import dataclass, field

from ..domains.ptx_dag import Bytes, Dag, ExecError, Node
from .ptx_memory import GlobalMemory, gm_read
from .ptx_program import Const, Program, join_of

PARAM_BASE = 1 << 48  # the parameter space's addresses (global buffers lie at k << 32, k < 2^16)
LOCAL_BASE = 1 << 47  # a thread's local memory (the entry's __local_depot), each thread its own


@dataclass
class Cta:
    """One CTA's state: registers (index -> value per thread), shared memory, and its place."""

    prog: Program
    n: int  # threads (blockDim.x; blockDim.y = z = 1)
    ctaid: tuple[int, int, int]
    nctaid: tuple[int, int, int]
    params: bytes | list[bytes]  # the parameter's bytes, or each parameter's
    gmem: GlobalMemory
    dag: Dag
    dynamic_smem: int
    regs: list = field(default_factory=list)
    smem: list = field(default_factory=list)
    smem_base: int = 1024
    sym_addr: dict[str, int] = field(default_factory=dict)
    decoded_rows: dict[int, tuple] = field(default_factory=dict)  # 16-byte shared row -> its 4 registers
    mma_operands: dict[tuple, tuple] = field(default_factory=dict)  # see _mma's operand()
    speculating: int = 0  # nesting of branches on predicate nodes being run both ways (no stores then)
    local: dict[int, list] = field(default_factory=dict)  # thread -> its local memory bytes

    def __post_init__(self) -> None:
        self.regs = [None] * len(self.prog.reg_index)
        at = 0
        externs = []  # every extern [] array is the dynamic shared memory
        for name, (align, size, _) in sorted(self.prog.shared.items(), key=lambda kv: kv[1][2]):
            if size < 0:
                externs.append((name, align))
                continue
            at = (at + align - 1) // align * align
            self.sym_addr[name] = self.smem_base + at
            at += size
        if externs:
            align = max(a for _, a in externs)
            at = (at + align - 1) // align * align
            for name, _ in externs:
                self.sym_addr[name] = self.smem_base + at
            at += self.dynamic_smem
        self.smem = [None] * at
        self._tid = list(range(self.n))
        self._lane = [t & 31 for t in range(self.n)]

    def dst(self, d: int) -> list:
        D = self.regs[d]
        if D is None:
            D = self.regs[d] = [None] * self.n
        return D

    def special(self, name: str):
        if name == "%tid.x":
            return self._tid
        if name == "%laneid":
            return self._lane
        if name in ("%tid.y", "%tid.z"):
            return Const(0)
        if name in self.sym_addr:
            return Const(self.sym_addr[name])
        if name in self.prog.param_symbols or name in self.prog.local:
            return Const(self.symbol_address(name))
        if not name.startswith("%"):
            raise ExecError(f"symbol {name} not modelled")
        axis = "xyz".index(name[-1])
        if name.startswith("%ntid"):
            return Const(self.n if axis == 0 else 1)
        if name.startswith("%ctaid"):
            return Const(self.ctaid[axis])
        if name.startswith("%nctaid"):
            return Const(self.nctaid[axis])
        raise ExecError(f"{name} not modelled")

    def symbol_address(self, sym: str) -> int:
        if sym in self.prog.param_symbols:  # the parameter space, read by ld.param only
            return PARAM_BASE + (self.prog.param_symbols.index(sym) << 20)
        if sym in self.prog.local:
            return LOCAL_BASE
        if sym in self.sym_addr:
            return self.sym_addr[sym]
        raise ExecError(f"symbol {sym} not modelled")

    def _local(self, addr: int, n: int, t: int) -> tuple[list, int]:
        mem = self.local.get(t)
        if mem is None:
            mem = self.local[t] = [None] * sum(self.prog.local.values())
        a = addr - LOCAL_BASE
        if t < 0 or a < 0 or a + n > len(mem) or addr % n:
            raise ExecError(f"local access [{addr:#x}, +{n}) outside the thread's local memory or unaligned")
        return mem, a

    def read(self, space: str, addr: int, n: int, t: int = -1) -> list:
        if space == "local":
            mem, a = self._local(addr, n, t)
            sl = mem[a:a + n]
            if None in sl:
                raise ExecError(f"reads local bytes [{addr:#x}, +{n}) that nothing wrote")
            return sl
        if space == "param":
            off = addr - PARAM_BASE
            params = [self.params] if type(self.params) is bytes else self.params
            i, off = off >> 20, off & ((1 << 20) - 1)
            if off < 0 or not 0 <= i < len(params) or off + n > len(params[i]):
                raise ExecError(f"ld.param outside the parameters ({len(params)})")
            return list(params[i][off:off + n])
        if space == "shared":
            a = addr - self.smem_base
            if a < 0 or a + n > len(self.smem) or addr % n:
                raise ExecError(f"shared access [{addr:#x}, +{n}) outside the CTA's shared memory or unaligned")
            sl = self.smem[a:a + n]
            if None in sl:
                raise ExecError(f"reads shared bytes [{addr:#x}, +{n}) that nothing wrote")
            return sl
        if space == "global":
            if addr % n:
                raise ExecError(f"global access [{addr:#x}, +{n}) unaligned")
            return gm_read(self.gmem, addr, n)
        raise ExecError(f"{space} memory not modelled")

    def write(self, space: str, addr: int, entries: list, t: int = -1) -> None:
        n = len(entries)
        if space == "local":
            mem, a = self._local(addr, n, t)
            mem[a:a + n] = entries
            return
        if self.speculating:
            raise ExecError(f"a {space} store under a branch on a floating-point value (not modelled)")
        if addr % n:
            raise ExecError(f"{space} store [{addr:#x}, +{n}) unaligned")
        if space == "shared":
            a = addr - self.smem_base
            if a < 0 or a + n > len(self.smem):
                raise ExecError(f"shared store [{addr:#x}, +{n}) outside the CTA's shared memory")
            self.smem[a:a + n] = entries
            for row in range(addr & ~15, addr + n, 16):
                self.decoded_rows.pop(row, None)
        elif space == "global":
            buf, off = self.gmem.at(addr)
            buf.write(off, entries)
        else:
            raise ExecError(f"stores to {space} memory not modelled")


@dataclass
class _Group:
    pc: int
    tids: list[int]
    waiting: bool = False


MAX_STEPS = 10_000_000  # group runs (each up to a branch) a CTA may take before it is refused


def run_cta(cta: Cta) -> None:
    """Runs every thread of the CTA to its exit. Errors: ExecError (what and where).
    A branch on a predicate node (a comparison of floating-point values) runs its threads both ways
    up to the branch's immediate post-dominator, one way after the other from the same registers and
    local memory, and there joins every register (and local byte) the two ways left different:
    select(predicate, taken, not taken) (Dag.select; a value that cannot be joined so raises where it
    is used). Shared and global stores, barriers, warp-collectives and exits on either way are refused."""
    groups = [_Group(0, list(range(cta.n)))]
    exited = 0
    steps = 0
    while groups:
        steps += 1
        if steps > MAX_STEPS:
            raise ExecError(f"the CTA runs past {MAX_STEPS} steps (at {cta.prog.line(groups[0].pc)})")
        groups = _merged(groups)
        runnable = [g for g in groups if not g.waiting]
        if runnable:
            g = min(runnable, key=lambda x: x.pc)
            groups.remove(g)
            out, gone = _run_group(cta, g)
            exited += gone
            groups += out
            continue
        _resolve_wait(cta, groups, exited)


def _merged(groups: list[_Group]) -> list[_Group]:
    by_pc: dict[int, _Group] = {}
    for g in groups:
        h = by_pc.get(g.pc)
        if h is None:
            by_pc[g.pc] = g
        else:
            h.tids = sorted(h.tids + g.tids)
            h.waiting = h.waiting and g.waiting
    return list(by_pc.values())


def _resolve_wait(cta: Cta, groups: list[_Group], exited: int) -> None:
    """Every group waits at a barrier or a collective: run a collective whose warps are all there,
    else pass a barrier every live thread stands at; anything else is refused."""
    prog = cta.prog
    for g in sorted(groups, key=lambda x: x.pc):
        kind, payload = prog.handlers[g.pc]
        if kind != "collective":
            continue
        warps = sorted({t >> 5 for t in g.tids})
        members = set(g.tids)
        if all(all((w << 5) + lane in members for lane in range(32)) for w in warps):
            try:
                for w in warps:
                    payload(cta, w << 5)
            except ExecError as e:
                raise ExecError(f"{prog.line(g.pc)}: {e}") from None
            except (TypeError, ValueError, IndexError, KeyError, AttributeError, OverflowError) as e:
                raise ExecError(f"{prog.line(g.pc)}: {type(e).__name__}: {e}") from None
            g.pc += 1
            g.waiting = False
            return
    if len(groups) == 1 and not exited and prog.handlers[groups[0].pc][0] == "bar":
        groups[0].pc += 1
        groups[0].waiting = False
        return
    where = "; ".join(f"{len(g.tids)} threads at {prog.line(g.pc)[:80]}" for g in groups)
    raise ExecError(f"threads do not meet at a barrier or collective ({exited} exited): {where}")


def _run_group(cta: Cta, g: _Group, stop: int = -1) -> tuple[list[_Group], int]:
    """Runs g up to its next branch, barrier or collective (or instruction `stop`): (the groups it
    becomes, threads exited)."""
    prog = cta.prog
    handlers = prog.handlers
    while True:
        if g.pc == stop:
            return [g], 0
        kind, payload = handlers[g.pc]
        if kind == "run":
            try:
                payload(cta, g.tids)
            except ExecError as e:
                raise ExecError(f"{prog.line(g.pc)}: {e}") from None
            except (TypeError, ValueError, IndexError, KeyError, ZeroDivisionError, AttributeError, OverflowError) as e:
                raise ExecError(f"{prog.line(g.pc)}: {type(e).__name__}: {e}") from None
            g.pc += 1
            continue
        if kind in ("bar", "collective"):
            g.waiting = True
            return [g], 0
        if kind == "ret":
            return [], len(g.tids)
        target, p, neg = payload
        dest = prog.labels[target]
        if p is None:
            g.pc = dest
            return [g], 0
        P = cta.regs[p]
        if P is None:
            raise ExecError(f"{prog.line(g.pc)}: branch on a predicate never written")
        taken, rest, both = [], [], []
        for t in g.tids:
            v = P[t]
            if type(v) is not int:
                if type(v) is not Node or v.width:
                    raise ExecError(f"{prog.line(g.pc)}: branch on a predicate that is no predicate ({v!r:.40})")
                both.append(t)
            elif bool(v) != neg:
                taken.append(t)
            else:
                rest.append(t)
        if both:
            out = [_Group(_both_ways(cta, g.pc, dest, both, P, neg), both)]
            return out + [_Group(pc, ts) for pc, ts in ((dest, taken), (g.pc + 1, rest)) if ts], 0
        if len(taken) == len(g.tids):
            g.pc = dest
            return [g], 0
        if not taken:
            g.pc += 1
            return [g], 0
        return [_Group(dest, taken), _Group(g.pc + 1, rest)], 0


class Unjoined:
    """A register the two ways of a branch on a predicate node left with values no select joins
    (memory bytes, integers): any use raises."""

    __slots__ = ()


_UNJOINED = Unjoined()


def _both_ways(cta: Cta, pc: int, dest: int, tids: list[int], P: list, neg: bool) -> int:
    """Runs tids from the branch at pc both ways to its join (see run_cta); returns the join."""
    join, written, preds = join_of(cta.prog, pc)
    regs = cta.regs
    saved = {r: None if regs[r] is None else list(regs[r]) for r in written}
    local = {t: list(cta.local[t]) for t in tids if t in cta.local}
    cta.speculating += 1
    try:
        _run_until(cta, [_Group(dest, list(tids))], join)
        taken = {r: None if regs[r] is None else [regs[r][t] for t in tids] for r in written}
        taken_local = {t: cta.local.get(t) for t in tids}
        for r in written:
            regs[r] = None if saved[r] is None else list(saved[r])
        for t in tids:
            if t in local:
                cta.local[t] = list(local[t])
            else:
                cta.local.pop(t, None)
        _run_until(cta, [_Group(pc + 1, list(tids))], join)
    finally:
        cta.speculating -= 1
    dag = cta.dag
    for t in tids:
        if taken_local[t] is not None or t in cta.local:
            c = dag.negate(P[t]) if neg else P[t]
            cta.local[t] = _join_bytes(dag, c, taken_local[t], cta.local.get(t))
    for r in written:
        A = taken[r]
        if A is None and regs[r] is None:
            continue
        D = cta.dst(r)
        for i, t in enumerate(tids):
            a, b = None if A is None else A[i], D[t]
            if a is b or a is None or b is None or (type(a) is int and type(b) is int and a == b) or \
                    (type(a) is Bytes and type(b) is Bytes and a.entries == b.entries):
                D[t] = a if a is b or (a is not None and b is not None) else None
                continue
            if (type(a) is int or type(b) is int) and r not in preds:
                D[t] = _UNJOINED
                continue
            try:
                D[t] = dag.select(dag.negate(P[t]) if neg else P[t], a, b)
            except (TypeError, AttributeError):
                D[t] = _UNJOINED
    return join


def _join_bytes(dag: Dag, c, a: list | None, b: list | None) -> list:
    """A thread's local memory after the two ways: bytes that differ, where they are whole values of
    one node on each way (an f32 stored on both), become the bytes of select(c, a, b); other differing
    bytes are unwritten (None: a read of them raises)."""
    if a is None or b is None:
        a, b = a or [None] * len(b), b or [None] * len(a)
    out = list(b)
    i = 0
    while i < len(a):
        x, y = a[i], b[i]
        if x is y or x == y:
            i += 1
            continue
        if type(x) is tuple and type(y) is tuple and x[1] == 0 and y[1] == 0 and x[0].width == y[0].width and \
                a[i:i + x[0].width] == list(x[0].bytes) and b[i:i + y[0].width] == list(y[0].bytes):
            try:
                out[i:i + x[0].width] = list(dag.select(c, x[0], y[0]).bytes)
                i += x[0].width
                continue
            except TypeError:
                pass
        out[i] = None
        i += 1
    return out


def _run_until(cta: Cta, groups: list[_Group], stop: int) -> None:
    """Runs the groups until all stand at instruction stop."""
    steps = 0
    while True:
        groups = _merged(groups)
        runnable = [g for g in groups if g.pc != stop]
        if not runnable:
            return
        steps += 1
        if steps > MAX_STEPS:
            raise ExecError(f"a branch on a floating-point value runs past {MAX_STEPS} steps")
        g = min(runnable, key=lambda x: x.pc)
        groups.remove(g)
        out, gone = _run_group(cta, g, stop)
        if gone or any(o.waiting for o in out):
            where = cta.prog.line(g.pc if gone else next(o.pc for o in out if o.waiting))
            raise ExecError(f"an exit, barrier or warp-collective under a branch on a floating-point value "
                            f"({where})")
        groups += out
