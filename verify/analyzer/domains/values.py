# Integer value analysis of a PTX function (abstract interpretation over intervals): for every
# integer and predicate register, at every instruction, an interval that contains every value it
# can hold, given the spec's constants (plan parameters fixed per plan, template constants are
# already literals in the PTX) and the ranges of the special registers (%tid < .maxntid ...).
# Used for
#   - feasible control flow: a branch whose predicate is constant has one successor (a plan that
#     fixes split = 0 removes the split path); a guarded instruction whose guard is constant
#     false never runs;
#   - memory cells: the byte range, relative to its shared/local symbol, that every access can
#     touch, so that distinct fields of one shared struct (or the stages of a ring) are distinct
#     cells (flow.py).
# Sound: a register absent from a state may hold anything; every transfer function returns an
# interval containing every result of the operation on values of its operand intervals, wrapping
# to the whole type range where the result can overflow; loops are widened (to the function's own
# constants, then to the type range) so the fixpoint is reached.
# Branch conditions refine the registers they compare on the edge they guard (the setp in the
# same block, its operands not redefined before the branch). An address register that is a
# function of the thread index alone (a swizzled layout's x + (bit ? -c : c), which intervals
# widen past the buffer) gets the hull of its exact per-thread values (thread_values.py).
from __future__ import annotations

from dataclasses import dataclass, field

from ..frontend.kir import Function, Inst
from .intervals import Interval, join, widen
from .thread_values import ThreadValues
from .transfer import PtxEval

_WIDEN_AFTER = 4  # visits of a block before its entry state is widened to the function's constants
_WIDEN_FULL = 14  # ... and then to the whole type range

SPECIAL_RANGES = {
    "%laneid": (0, 31), "%warpid": (0, 63), "%nwarpid": (1, 64), "%smid": (0, 1023), "%nsmid": (1, 1024),
    "%ctaid.x": (0, 2**31 - 1), "%ctaid.y": (0, 65534), "%ctaid.z": (0, 65534),
    "%nctaid.x": (1, 2**31 - 1), "%nctaid.y": (1, 65535), "%nctaid.z": (1, 65535),
    "%clusterid.x": (0, 2**31 - 1), "%clusterid.y": (0, 65534), "%clusterid.z": (0, 65534),
    "%nclusterid.x": (1, 2**31 - 1), "%nclusterid.y": (1, 65535), "%nclusterid.z": (1, 65535),
    "%cluster_ctaid.x": (0, 15), "%cluster_ctaid.y": (0, 15), "%cluster_ctaid.z": (0, 15),
    "%cluster_nctaid.x": (1, 16), "%cluster_nctaid.y": (1, 16), "%cluster_nctaid.z": (1, 16),
    "%cluster_ctarank": (0, 15), "%cluster_nctarank": (1, 16),
}


@dataclass
class ValueInfo:
    """What the value analysis established for one function."""

    feasible: dict[str, list[str]]  # block -> successors that can be taken
    reachable: set[str]
    never_runs: set[int] = field(default_factory=set)  # id(inst) of guarded insts whose guard is always false
    addr: dict[int, Interval | None] = field(default_factory=dict)  # id(inst) -> its address register's interval
    dst_addr: dict[int, Interval | None] = field(default_factory=dict)  # copies: the destination's
    desc: dict[int, list[Interval | None]] = field(default_factory=dict)  # wgmma: intervals of descriptor operands
    shfl_lane: dict[int, Interval | None] = field(default_factory=dict)  # shfl: the source lane operand
    wgmma_scale_d: dict[int, Interval | None] = field(default_factory=dict)  # wgmma: its scale-d predicate
    operands: dict[int, list[Interval | None]] = field(default_factory=dict)  # integer add/sub/and: operand intervals
    first_reg: dict[int, tuple[Interval | None, Interval | None]] = field(default_factory=dict)  # copies: the
    # intervals of the first register of the source and of the destination operand (TMA: the tensor map)
    const_pred: dict[int, int] = field(default_factory=dict)  # id(branch inst) -> 0/1 where decided


def _edges(func: Function):
    """block -> [(successor, predicate register or None, truth when taken)]."""
    out: dict[str, list[tuple[str, str | None, bool]]] = {}
    n = len(func.blocks)
    for bi, b in enumerate(func.blocks):
        last = b.insts[-1] if b.insts else None
        nxt = func.blocks[bi + 1].label if bi + 1 < n else None
        es: list[tuple[str, str | None, bool]] = []
        if last is not None and last.kind == "branch":
            for t in last.targets:
                es.append((t, last.pred, not last.pred_neg))
            if last.pred is not None and nxt:
                es.append((nxt, last.pred, last.pred_neg))
        elif last is not None and last.kind == "ret" and last.pred is None:
            pass
        elif nxt:
            es.append((nxt, None, True))
        labels = {x.label for x in func.blocks}
        out[b.label] = [e for e in es if e[0] in labels]
    return out


# (id(func), constants, ranges) -> (func, its ValueInfo): the entry holds its function, so that no
# other function can take its id while the entry stands
_MEMO: dict[tuple, tuple[Function, ValueInfo]] = {}


def analyze_values(func: Function, consts: dict[tuple[str, int], int] | None = None,
                   special: dict[str, Interval] | None = None) -> ValueInfo:
    """Intervals of the PTX function's integer registers under the given parameter constants
    ((param, byte offset) -> value) and special-register ranges (defaults: SPECIAL_RANGES and the
    function's .maxntid). Memoized per (function, constants, ranges)."""
    key = (id(func), tuple(sorted((consts or {}).items())), tuple(sorted((special or {}).items())))
    got = _MEMO.get(key)
    if got is None or got[0] is not func:
        got = _MEMO[key] = (func, _analyze_values(func, consts, special))
    return got[1]


def _analyze_values(func: Function, consts: dict[tuple[str, int], int] | None,
                    special: dict[str, Interval] | None) -> ValueInfo:
    sp = dict(SPECIAL_RANGES)
    nt = func.ntid or (1024, 1024, 64)
    for i, axis in enumerate("xyz"):
        sp[f"%tid.{axis}"] = (0, nt[i] - 1)
        sp[f"%ntid.{axis}"] = (1, nt[i])
    if special:
        sp.update(special)
    fix = _Fixpoint(func, PtxEval(func, consts or {}, sp))
    fix.solve()
    order = fix.order
    reachable = {lab for lab in order if fix.entry_state[lab] is not None}
    info = ValueInfo({lab: [s for s, _, _ in fix.edges[lab] if s in fix.feasible[lab]] for lab in order}, reachable)
    fix.threads = ThreadValues(func, info.feasible, consts or {}, sp)
    # One pass more to record, per instruction, its guard's constancy and its address intervals.
    for lab in order:
        if lab in reachable:
            fix.run_block(lab, info)
    return info


class _Fixpoint:
    """The blocks' entry states (register -> interval), iterated to a fixpoint over the feasible
    edges (branch refinement on the edge a setp decides, widening on back edges)."""

    def __init__(self, func: Function, ev: PtxEval) -> None:
        self.ev = ev
        self.edges = _edges(func)
        self.blocks = {b.label: b for b in func.blocks}
        self.order = [b.label for b in func.blocks]
        self.index = {lab: i for i, lab in enumerate(self.order)}
        self.entry_state: dict[str, dict | None] = {lab: None for lab in self.order}
        self.entry_state[self.order[0]] = {}
        self.visits = {lab: 0 for lab in self.order}
        self.feasible: dict[str, set[str]] = {lab: set() for lab in self.order}
        ndefs: dict[str, int] = {}
        for b in func.blocks:
            for inst in b.insts:
                for d in inst.dsts:
                    ndefs[d] = ndefs.get(d, 0) + 1
        self.single_defs = {d: (inst, b.label) for b in func.blocks for inst in b.insts for d in inst.dsts[:1]
                            if ndefs[d] == 1}
        self.single_defs["#entry"] = func.blocks[0].label
        self.threads: ThreadValues | None = None  # for the recording pass

    def solve(self) -> None:
        ev, index, entry_state = self.ev, self.index, self.entry_state
        work = {self.order[0]}
        while work:
            lab = min(work, key=lambda x: index[x])
            work.discard(lab)
            st, setp_of = self.run_block(lab, None)
            for succ, pred, truth in self.edges[lab]:
                s2 = st
                if pred is not None:
                    pv = st.get(pred)
                    if pv is not None and pv[0] == pv[1] and bool(pv[0]) != truth:
                        continue  # infeasible edge
                    if pred in setp_of:
                        s2 = ev.refine(st, setp_of[pred], truth)
                        if s2 is None:
                            continue
                self.feasible[lab].add(succ)
                old = entry_state[succ]
                new = join(old, s2)
                if old is not None and index[succ] <= index[lab]:  # a back edge: widen
                    self.visits[succ] += 1
                    if self.visits[succ] > _WIDEN_AFTER:
                        new = widen(old, new, ev.thresholds, self.visits[succ] > _WIDEN_FULL)
                if new != old:
                    entry_state[succ] = new
                    work.add(succ)

    def run_block(self, lab: str, record: ValueInfo | None) -> tuple[dict, dict]:
        """The block's exit state and the setp of each predicate it defines (record: the recording
        pass, which notes each instruction's facts)."""
        ev = self.ev
        st = dict(self.entry_state[lab])
        setp_of: dict[str, Inst] = {}
        for k, inst in enumerate(self.blocks[lab].insts):
            if inst.pred is not None:
                p = st.get(inst.pred)
                if p is not None and p[0] == p[1] and bool(p[0]) == inst.pred_neg:
                    if record is not None:
                        record.never_runs.add(id(inst))
                    continue  # never runs
            if record is not None:
                self._record(record, st, inst, lab, k)
            ev.transfer(st, inst, setp_of)
            for d in inst.dsts:
                if setp_of:
                    for key in [key for key, s in setp_of.items() if key != "#sym" and (d in s.args[1:3] or key == d)]:
                        setp_of.pop(key, None)
            if inst.op.startswith("setp") and inst.dsts and inst.pred is None and "|" not in inst.args[0]:
                setp_of[inst.dsts[0]] = inst
        return st, setp_of

    def _record(self, record: ValueInfo, st: dict, inst: Inst, lab: str, k: int) -> None:
        """inst's address intervals, descriptors, shuffle lane and operands, before it runs."""
        ev = self.ev
        if inst.kind in ("load", "store", "atomic", "copy"):
            here = _refined(ev, st, inst.addr[:1] + inst.dst_addr[:1], self.single_defs)
            here = _per_thread(self.threads, here, inst.addr[:1] + inst.dst_addr[:1], lab, k)
            record.addr[id(inst)] = _address(here, inst.addr, inst.offset)
            if inst.kind == "copy":
                record.dst_addr[id(inst)] = _address(here, inst.dst_addr, inst.dst_offset)
                record.first_reg[id(inst)] = (st.get(inst.addr[0]) if inst.addr else None,
                                              st.get(inst.dst_addr[0]) if inst.dst_addr else None)
        if inst.op.startswith("wgmma.mma_async"):
            record.desc[id(inst)] = [st.get(r) for r in inst.ignored_srcs]
            if len(inst.args) > 3:
                record.wgmma_scale_d[id(inst)] = ev.operand(st, inst.args[3], None)
        if inst.op.startswith("shfl") and len(inst.args) > 2:
            record.shfl_lane[id(inst)] = ev.operand(st, inst.args[2], None)
        if inst.op.split(".")[0] in ("add", "sub", "and") and not inst.fp:
            record.operands[id(inst)] = [ev.operand(st, x, None) for x in inst.args[1:]]


_REEVAL_OPS = ("add", "sub", "shl", "mul", "mad", "cvt", "cvta", "mov", "and", "or", "xor", "shr", "selp")


def _refined(ev: PtxEval, st: dict, regs: list[str], single_defs: dict, depth: int = 6) -> dict:
    """st with each address register re-derived from its defining expression (registers defined
    once, through integer arithmetic, up to `depth` levels) under the intervals at this point: a
    branch refines the thread index the address was computed from earlier, not the address
    itself. The result is intersected with what st already holds (both are sound)."""
    out = st
    for r in regs:
        iv = _reeval(ev, st, r, single_defs, depth, {})
        if iv is not None:
            cur = st.get(r)
            new = iv if cur is None else (max(iv[0], cur[0]), min(iv[1], cur[1]))
            if new[0] <= new[1] and new != cur:
                if out is st:
                    out = dict(st)
                out[r] = new
    return out


def _reeval(ev: PtxEval, st: dict, r: str, single_defs: dict, depth: int, memo: dict) -> Interval | None:
    """r's interval recomputed from its definition. Sound only where the operands' current values
    are the ones r was computed from: operands defined once in r's own block (run together with
    it) or in the entry block (run once); any other register operand counts as unknown."""
    if r in memo:
        return memo[r]
    inst, blk = single_defs.get(r, (None, None))
    cur = st.get(r)
    if depth == 0 or inst is None or inst.op.split(".")[0] not in _REEVAL_OPS or inst.pred is not None or \
            inst.kind not in ("arith", "move") or len(inst.dsts) != 1:
        memo[r] = cur
        return cur
    tmp = dict(st)
    for a in inst.args[1:]:
        a = a.strip()
        if not (a.startswith("%") or "#s" in a) or a.startswith("%tid") or a.startswith("%ctaid"):
            continue  # immediates, symbols, special registers (the same all along)
        a_def = single_defs.get(a)
        if a_def is not None and a_def[1] in (blk, single_defs["#entry"]):
            sub = _reeval(ev, st, a, single_defs, depth - 1, memo) if a_def[1] == blk else st.get(a)
            if sub is None:
                tmp.pop(a, None)
            else:
                tmp[a] = sub
        else:
            tmp.pop(a, None)
            tmp.pop(("#m", a), None)
    ev.transfer(tmp, inst)
    got = tmp.get(r)
    if got is not None and cur is not None:
        got = (max(got[0], cur[0]), min(got[1], cur[1])) if max(got[0], cur[0]) <= min(got[1], cur[1]) else cur
    memo[r] = got if got is not None else cur
    return memo[r]


def _per_thread(threads: ThreadValues, st: dict, regs: list[str], lab: str, k: int) -> dict:
    """st with each address register that is a function of the thread index alone narrowed to the
    hull of its values over every thread (thread_values.py); both intervals are sound, so their
    intersection is."""
    out = st
    for r in regs:
        iv = threads.interval(r, lab, k)
        cur = st.get(r)
        if iv is None or cur == iv:
            continue
        new = iv if cur is None else (max(iv[0], cur[0]), min(iv[1], cur[1]))
        if new[0] <= new[1]:
            if out is st:
                out = dict(st)
            out[r] = new
    return out


def _address(st: dict, regs: list[str], offset: int) -> Interval | None:
    if not regs:
        return (offset, offset)
    if len(regs) != 1:
        return None
    iv = st.get(regs[0])
    if iv is None:
        return None
    return (iv[0] + offset, iv[1] + offset)
