# The information-flow analysis: which batch-variant values (labelled with the variation axes they
# carry: rows, row, chunk, pages, plan, threads, padding, schedule) can shape a floating-point
# result of a kernel.
#
# Sources (spec/sources.py turns the spec entry into them): scalar parameters and struct fields, special
# registers (%ctaid = the CTA's place, %nctaid = the grid, %warpid/%smid/%clock = scheduling), loads
# through pointers whose values are batch-variant (block tables, slots, row_seq), atomics' old values
# and mbarrier phases (scheduling).
# Control flow: PTX is first run through the value analysis (values.py) under the spec's constants
# (a plan fixes split = 0 ...): branches it decides lose their dead successor, guarded instructions
# whose guard is always false are dropped, and every shared/local access gets the byte range it can
# touch.
# Propagation, to a fixpoint:
#   data     every register an instruction defines carries the labels of its data operands;
#   memory   a write adds its value's labels (and its control labels) to the bytes it can touch (a
#            cell: the pointer parameter, or the shared/local symbol and byte range, the address
#            derives from); a read gets the labels of every write that can overlap it. The address
#            of a global input or output is NOT a data operand: the kernel reads the row's own
#            logical operand wherever the row sits (the address assumption, checked by the bitwise
#            tests). A shared, local or scratch cell is address-sensitive: a variant address there
#            chooses among intermediate values, so it joins the value's labels, except in a staging
#            cell: one that only asynchronous copies of global inputs write (cp.async, TMA). A
#            staging cell holds global input data, so its slot (a pipeline stage that may depend on
#            how many tiles the CTA ran before) is storage, like the global address it mirrors (the
#            pipeline assumption: a reader gets the tile its copy fetched, CUTLASS's and the
#            kernels' barrier protocol; docs/VERIFICATION.md);
#   control  a register defined in a region that a variant branch controls, and used outside that
#            region, carries the branch's labels (a variant loop bound that reaches a loop-carried
#            value, a variant if that picks a value); a guarded definition carries its guard. Except
#            a copy that cannot change the register (_same_copy): d = x where d already equals x at
#            the branch, x is not redefined in the region and every definition of d there is that
#            copy: whichever way the branch goes, d leaves the region holding x's value (the
#            compiler places such copies of loop-carried values on every path out of a branch).
# Verdict: a floating-point register whose labels are not empty is a violation: a batch-variant
# value reached an operand, a loop bound or a choice of a floating-point computation. Variant values
# may reach addresses, masks of whole-element stores and the bounds of loops that carry no
# floating-point state (grid-stride loops over rows), and nothing else. Floating-point atomics are
# violations (their order is the hardware's schedule).
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..domains.labels import EMPTY, LANE_BITS, PSEUDO, ROW_BOUND_AXES, THREAD, uniform_for
from ..domains.memory import cell, pointer_roots, stack_offsets, tensor_map, wgmma_reads
from ..domains.threads import row_bound_compares, thread_fields
from ..domains.values import ValueInfo, analyze_values
from ..frontend.cfg import blocks_in_cycles, control_regions, normal_paths
from ..frontend.kir import Function, Inst
from ..spec.sources import Sources
from .flow_rules import Refinements

_INF = 1 << 62


@dataclass
class Violation:
    line: int
    text: str
    axes: frozenset[str]
    why: str


@dataclass
class FlowResult:
    violations: list[Violation]
    axes_seen: frozenset[str]  # every axis that reaches the function at all
    calls: list[str]
    fp_instructions: int
    cells: dict[tuple, str]
    values: ValueInfo | None = None
    debug: dict = field(default_factory=dict)  # internals for --explain (accesses, labels, writes)


@dataclass
class _Access:
    """One memory access of an instruction: a read or a write of a cell."""

    inst: Inst
    write: bool
    root: tuple  # ("param", p, off) | ("sym", name) | ("unknown",) | ("multi", ...) | ("loaded",)
    lo: int  # byte range [lo, hi) relative to a symbol root; (-_INF, _INF) where unknown
    hi: int
    addr_regs: list[str]
    staging: bool = False  # an asynchronous copy of global input data into shared memory


def analyze(func: Function, src: Sources, is_fp_reg, _unused=None) -> FlowResult:
    """The information flow of one compiled function under its sources (a spec entry and a plan)."""
    a = _Analysis(func, src, is_fp_reg)
    a.build_accesses()
    a.fixpoint()
    return a.verdict()


class _Analysis(Refinements):
    """One function's analysis: its feasible control flow, memory accesses and labels."""

    def __init__(self, func: Function, src: Sources, is_fp_reg) -> None:
        self.func, self.src, self.is_fp = func, src, is_fp_reg
        self.vi = analyze_values(func, src.consts, src.special_ranges) if func.kind == "ptx" else None
        self.blocks = {b.label: b for b in func.blocks}
        if self.vi is not None:
            self.labels = [b.label for b in func.blocks if b.label in self.vi.reachable]
            self.succ = {lab: [s for s in self.vi.feasible[lab] if s in self.vi.reachable] for lab in self.labels}
            self.dead = self.vi.never_runs
        else:
            self.labels, self.succ = normal_paths(func)
            self.dead = set()
        self.insts = [(lab, i) for lab in self.labels for i in self.blocks[lab].insts if id(i) not in self.dead]
        self.where_used: dict[str, set[str]] = {}
        for lab, inst in self.insts:
            for r in inst.srcs + inst.addr + inst.dst_addr + inst.ignored_srcs + ([inst.pred] if inst.pred else []):
                self.where_used.setdefault(r, set()).add(lab)
        self.exit_guards: set[str] = set()
        self.regions = control_regions(self.blocks, self.labels, self.succ, self.exit_guards)
        self.branch_pred = {lab: self.blocks[lab].insts[-1].pred for lab in self.labels
                            if self.blocks[lab].insts and self.blocks[lab].insts[-1].kind == "branch"
                            and self.blocks[lab].insts[-1].pred}
        self.roots = pointer_roots(func, self.insts)
        self.pointer_roots: set[tuple] = set()
        for _, inst in self.insts:
            if inst.op.startswith("cvta") or inst.op.startswith("getelementptr") or inst.kind == "copy":
                for r in inst.srcs + inst.addr + inst.dst_addr:
                    self.pointer_roots |= self.roots.get(r, set())
            self.pointer_roots |= {("param-sym", s) if func.symbols.get(s) == "param" else ("sym", s)
                                   for s in inst.symbols}
        self.llvm_offs = stack_offsets(func, self.insts) if func.kind == "llvm" else {}
        self.row_bounds = row_bound_compares(func, self.insts, src.extents)
        self.tid_fields, self.warp_broadcasts = thread_fields(func, self.insts, self.vi)
        self.block_of = {id(i): lab for lab, i in self.insts}
        self.in_loop = blocks_in_cycles(self.labels, self.succ)
        self.position = {id(i): k for k, (_, i) in enumerate(self.insts)}
        self.heads_of: dict[str, list[str]] = {}
        for a, region in self.regions.items():
            for blk in region:
                self.heads_of.setdefault(blk, []).append(a)
        self.escapes: dict[tuple[str, str], bool] = {}
        self.used = set(self.where_used)
        # labels
        self.label: dict[str, frozenset[str]] = {}
        if func.kind == "llvm":
            for p in func.params:
                if src.param_labels.get((p, 0)):
                    self.label[p] = src.param_labels[(p, 0)]
        self.wlab: dict[int, frozenset[str]] = {}  # id(access) -> labels of the values it writes (and its address)
        self.wctl: dict[int, dict[str, frozenset[str]]] = {}  # id(access) -> branch -> labels of that branch
        self.waddr: dict[int, frozenset[str]] = {}  # id(access) -> thread bits its address depends on
        self.origin: dict[str, frozenset[str]] = {}
        self.why: dict[str, str] = {}
        self.cover_cache: dict = {}
        self.pred: dict[str, list[str]] = {}  # the blocks of self.labels that branch to a block
        for b in self.labels:
            for c2 in self.succ.get(b, ()):
                self.pred.setdefault(c2, []).append(b)
        self.branch_label: dict[str, frozenset[str]] = {}
        self.copies_out: dict[str, frozenset] | None = None  # _copies_at_branch, computed when first needed
        self.same_copy: dict[tuple[int, str], bool] = {}
        self.changed = False

    # ---- memory accesses ----
    def _add(self, acc: list, inst: Inst, write: bool, regs: list[str], sym: str, iv, width: int,
             staging: bool = False) -> None:
        root = cell(self.roots, self.pointer_roots, regs, sym)
        if iv is None and self.func.kind == "llvm" and regs and regs[0] in self.llvm_offs:
            iv = (self.llvm_offs[regs[0]], self.llvm_offs[regs[0]])
        lo, hi = (-_INF, _INF) if iv is None or root[0] != "sym" else (iv[0], iv[1] + (width or _INF))
        acc.append(_Access(inst, write, root, lo, hi, list(regs), staging))

    def _accesses_of(self, inst: Inst) -> list[_Access]:
        vi, acc = self.vi, []
        addr = vi.addr.get(id(inst)) if vi else None
        if inst.kind == "load" and inst.space != "param":
            self._add(acc, inst, False, inst.addr, inst.mem_sym, addr, inst.width or 16)
        elif inst.kind in ("store", "atomic"):
            self._add(acc, inst, True, inst.addr, inst.mem_sym, addr, inst.width or 16)
            if inst.kind == "atomic":  # reads the cell too
                self._add(acc, inst, False, inst.addr, inst.mem_sym, addr, inst.width or 16)
        elif inst.kind == "copy":
            first = vi.first_reg.get(id(inst), (None, None)) if vi else (None, None)
            tmap_src = tensor_map(inst.addr, first[0], self.roots)
            tmap_dst = tensor_map(inst.dst_addr, first[1], self.roots)
            if tmap_src:  # TMA load: the global tensor the map (a kernel parameter) describes
                acc.append(_Access(inst, False, tmap_src, -_INF, _INF, list(inst.addr)))
            else:
                self._add(acc, inst, False, inst.addr, inst.mem_sym, addr, inst.width)
            from_global = inst.space in ("global", "param", "const") and inst.dst_space in ("shared", "local")
            if tmap_dst:  # TMA store
                acc.append(_Access(inst, True, tmap_dst, -_INF, _INF, list(inst.dst_addr)))
            else:
                self._add(acc, inst, True, inst.dst_addr, inst.dst_sym, vi.dst_addr.get(id(inst)) if vi else None,
                          inst.width, staging=from_global)
        elif inst.kind == "call" and self.src.pure_calls and re.search(self.src.pure_calls, inst.callee):
            for r in inst.srcs:  # reads through every pointer argument
                for root in self.roots.get(r, set()):
                    acc.append(_Access(inst, False, root, -_INF, _INF, [r]))
        return acc

    def build_accesses(self) -> None:
        self.accesses: dict[int, list[_Access]] = {}
        for _, inst in self.insts:
            acc = self._accesses_of(inst)
            if acc:
                self.accesses[id(inst)] = acc
        # wgmma reads its operands from shared memory through descriptors: the decoded byte ranges
        # of every shared symbol the kernel uses (or all of them).
        shared_syms = sorted(n for n, sp in self.func.symbols.items() if sp == "shared")
        for _, inst in self.insts:
            if inst.op.startswith("wgmma.mma_async"):
                ranges = wgmma_reads(inst, self.vi)
                self.accesses[id(inst)] = [
                    _Access(inst, False, ("sym", sym), *(r if r else (-_INF, _INF)), inst.ignored_srcs)
                    for sym in shared_syms or ["<shared>"] for r in ranges or [None]]
        self.all_acc = [a for lst in self.accesses.values() for a in lst]
        self.writes_by_root: dict[tuple, list[_Access]] = {}
        for a in self.all_acc:
            if a.write:
                self.writes_by_root.setdefault(a.root, []).append(a)
        self.read_roots = {a.root for a in self.all_acc if not a.write}
        self.write_roots = set(self.writes_by_root)
        self.overlaps = {id(a): self._overlapping(a) for a in self.all_acc}

    def _overlapping(self, a: _Access) -> list[_Access]:
        wbr = self.writes_by_root
        if a.root[0] in ("unknown", "multi", "loaded"):  # could be anything written
            return [w for ws in wbr.values() for w in ws if w.root[0] != "param"] + wbr.get(a.root, [])
        ws = list(wbr.get(a.root, []))
        for k in ("unknown", "multi", "loaded"):
            ws += [w for r, lst in wbr.items() if r[0] == k for w in lst]
        return [w for w in ws if w.root != a.root or (w.lo < a.hi and a.lo < w.hi)]

    def row_data(self, root: tuple) -> bool:
        """A global input read only, or output written only, or a declared row-local in-place buffer:
        its addresses are the address assumption's."""
        if root in self.src.address_ok:
            return True
        return root[0] == "param" and not (root in self.read_roots and root in self.write_roots)

    def staging_only(self, a: _Access) -> bool:
        ws = self.overlaps[id(a)] if not a.write else [a]
        return bool(ws) and all(w.staging for w in ws)

    # ---- labels ----
    def labs(self, rs) -> frozenset[str]:
        out = EMPTY
        for r in rs:
            x = self.label.get(r)
            if x:
                out = out | x
        return out

    def read_labels(self, a: _Access) -> frozenset[str]:
        v = self.src.load_labels.get(a.root, EMPTY)
        ws = self.overlaps[id(a)]
        covered = None
        for w in ws:
            v = v | self.wlab.get(id(w), EMPTY)
            for head, lb in self.wctl.get(id(w), {}).items():
                if lb <= v:
                    continue
                if covered is None:
                    covered = self._covered(a, ws)
                # The write's branch decided whether it ran; the read sees this pass's write anyway
                # when the branch is the same for every thread sharing the cell, the read lies in
                # its region, and writes to the cell lie on every path to the read. Or the branch is
                # decided once (in no loop) and the read lies in its region too: the read runs only
                # where the write's side was taken.
                if (covered or head not in self.in_loop) and self.block_of[id(a.inst)] in self.regions.get(head, ()) \
                        and uniform_for(lb, self.labs(a.addr_regs) | self.waddr.get(id(w), EMPTY)):
                    continue
                v = v | lb
        if not self.row_data(a.root) and not self.staging_only(a):
            v = v | self.labs(a.addr_regs)
        else:
            v = v | (self.labs(a.addr_regs) & PSEUDO)  # another address per thread: another value
        return v

    def escapes_region(self, d: str, a: str) -> bool:
        if (d, a) not in self.escapes:
            self.escapes[(d, a)] = any(u not in self.regions[a] for u in self.where_used.get(d, ()))
        return self.escapes[(d, a)]

    def _assign(self, d: str, v: frozenset[str], why_v: str) -> None:
        if not v <= self.label.get(d, EMPTY):
            self.label[d] = self.label.get(d, EMPTY) | v
            self.origin[d] = self.origin.get(d, EMPTY) | v
            self.why[d] = why_v
            self.changed = True

    def fixpoint(self) -> None:
        self.changed, rounds = True, 0
        while self.changed and rounds < 200:
            rounds += 1
            self.changed = False
            self.branch_label = {a: self.labs([self.branch_pred[a]]) if a in self.branch_pred else EMPTY
                                 for a in self.regions}
            self.cover_cache.clear()  # it reads branch labels, which grow
            for lab in self.labels:
                ctrl_regions = [a for a in self.heads_of.get(lab, ()) if self.branch_label[a]]
                ctrl_all = EMPTY
                for a in ctrl_regions:
                    ctrl_all = ctrl_all | self.branch_label[a]
                for inst in self.blocks[lab].insts:
                    if id(inst) not in self.dead:
                        self._visit(inst, ctrl_regions, ctrl_all)

    def _visit(self, inst: Inst, ctrl_regions: list[str], ctrl_all: frozenset[str]) -> None:
        guard = self.labs([inst.pred]) if inst.pred else EMPTY
        src = self.src
        if inst.kind == "load" and inst.space == "param":
            # each destination of a vector load reads its own field
            size = inst.width // max(len(inst.dsts), 1) if inst.width else 4
            for k, d in enumerate(inst.dsts):
                v = guard
                for p, off in inst.params:
                    v = v | src.param_labels.get((p, off + k * size), src.param_default)
                self._assign(d, v, "parameter")
            return
        if inst.kind == "load" and self._element_load(self.accesses.get(id(inst), [])):
            self._elem_load(inst, ctrl_regions, guard)
            return
        v_fp, why_v = EMPTY, "operand"
        if inst.kind in ("load", "store", "atomic", "copy") or inst.op.startswith("wgmma.mma_async"):
            accs = self.accesses.get(id(inst), [])
            reads = [a for a in accs if not a.write]
            v = EMPTY
            for a in reads:
                v = v | self.read_labels(a)
            if reads:
                why_v = f"load from {describe_cell(reads[0].root)}"
            if inst.kind in ("store", "atomic", "copy"):
                val = self.labs(inst.srcs) | (v if inst.kind == "copy" else EMPTY)
                if inst.kind == "atomic" and not _commutative_exact(inst, self.used):
                    val = val | frozenset({"schedule"})
                for w in (a for a in accs if a.write):
                    self._write(w, inst, val, guard, ctrl_regions)
                if inst.kind != "atomic" or not inst.dsts:
                    return
                v, why_v = v | val | frozenset({"schedule"}), "atomic"
            if inst.op.startswith("wgmma.mma_async"):
                v_fp = self.labs(s for s in inst.srcs if self.is_fp(s))
                v = v | self.labs(s for s in inst.srcs if not self.is_fp(s))
                why_v = "load from shared memory (wgmma operand)"
        else:
            v, v_fp, why_v = self._operands(inst)
        v = v | guard
        for d in inst.dsts:
            extra = EMPTY
            for a in ctrl_regions:
                if self.escapes_region(d, a) and not self._same_copy(inst, d, a):
                    extra = extra | self.branch_label[a]
            own = v | extra
            if not own <= self.origin.get(d, EMPTY):
                self.origin[d] = self.origin.get(d, EMPTY) | own
                self.why[d] = why_v if v else "control (a variant branch chooses it)"
                self.changed = True
            nv = own | v_fp
            if not nv <= self.label.get(d, EMPTY):
                self.label[d] = self.label.get(d, EMPTY) | nv
                self.changed = True

    def _operands(self, inst: Inst) -> tuple[frozenset[str], frozenset[str], str]:
        """Labels of a computing instruction's result: (from non-floating operands, from floating
        operands, why)."""
        v = self.labs(s for s in inst.srcs if not self.is_fp(s))
        v_fp = self.labs(s for s in inst.srcs if self.is_fp(s))
        why_v = "operand"
        for a in self.accesses.get(id(inst), ()):  # a pure call's reads
            v = v | self.read_labels(a)
        for sp in inst.special:
            v = v | self.src.special.get(sp, self.src.special.get(sp.split(".")[0], EMPTY))
        if inst.op.startswith("elect"):
            v = v | {THREAD}
        if id(inst) in self.tid_fields:  # (tid.x >> s) & mask: depends on those bits only
            v = (v - PSEUDO) | self.tid_fields[id(inst)]
        elif id(inst) in self.warp_broadcasts:  # shfl from a fixed lane: the same in the whole warp
            v = v - LANE_BITS
        if id(inst) in self.row_bounds and v - PSEUDO <= ROW_BOUND_AXES and v & {"row", "plan"}:
            v = v & PSEUDO  # a row coordinate against the row count: a row mask (A-bounds)
            why_v = "row bound"
        return v, v_fp, why_v

    def _element_load(self, accs: list) -> bool:
        """A load of one struct-array element through a spec'd pointer ("->Struct")."""
        return len(accs) == 1 and not accs[0].write and accs[0].root in self.src.elem_labels

    def _elem_load(self, inst: Inst, ctrl_regions: list[str], guard: frozenset[str]) -> None:
        """An element of a struct array: each destination reads its field's labels."""
        a = self.accesses[id(inst)][0]
        size, fields, default = self.src.elem_labels[a.root]
        per = inst.width // max(len(inst.dsts), 1) if inst.width else 4
        addr = self.labs(a.addr_regs)
        extra = (addr if not self.row_data(a.root) else addr & PSEUDO) | guard
        for k, d in enumerate(inst.dsts):
            v = fields.get((inst.offset + k * per) % size, default) | extra
            for a_head in ctrl_regions:
                if self.escapes_region(d, a_head):
                    v = v | self.branch_label[a_head]
            self._assign(d, v, f"load from {describe_cell(a.root)}")

    def _write(self, w: _Access, inst: Inst, val: frozenset[str], guard: frozenset[str],
               ctrl_regions: list[str]) -> None:
        local = w.root[0] == "sym" and ("local_depot" in w.root[1] or inst.space == "local")
        # staging: which copy a reader sees is the pipeline's pairing (assumed), not a choice the
        # writer's control makes
        quiet = w.root in self.src.address_ok or w.staging
        nv = val | (EMPTY if quiet else guard)
        if not self.row_data(w.root) and not w.staging:
            nv = nv | self.labs(w.addr_regs)
        nv = nv - PSEUDO  # a reader at one address reads one writer's value
        wa = self.labs(w.addr_regs) & PSEUDO
        if not wa <= self.waddr.get(id(w), EMPTY):
            self.waddr[id(w)] = self.waddr.get(id(w), EMPTY) | wa
            self.changed = True
        old = self.wlab.get(id(w), EMPTY)
        if not nv <= old:
            self.wlab[id(w)] = old | nv
            self.changed = True
        if quiet:
            return
        ctl = self.wctl.setdefault(id(w), {})
        for a_head in ctrl_regions:
            if local and a_head in self.exit_guards:
                continue
            lb = self.branch_label[a_head]
            if not lb <= ctl.get(a_head, EMPTY):
                ctl[a_head] = ctl.get(a_head, EMPTY) | lb
                self.changed = True

    # ---- verdict ----
    def verdict(self) -> FlowResult:
        violations: list[Violation] = []
        fp_count = 0
        axes_seen = EMPTY
        for axes in list(self.label.values()) + list(self.wlab.values()):
            axes_seen = axes_seen | axes
        calls = []
        for _, inst in self.insts:
            fp_count += 1 if inst.fp else 0
            if inst.kind == "call":
                calls.append(inst.callee)
                if inst.callee.startswith("indirect:") and self.label.get(inst.callee[9:]):
                    violations.append(Violation(
                        inst.line, inst.text, self.label[inst.callee[9:]],
                        "a batch-variant value picks the function that computes these elements (dispatch); "
                        "the analyzer does not prove the candidates compute each element alike"))
            if inst.kind == "atomic" and inst.fp:
                violations.append(Violation(inst.line, inst.text, frozenset({"schedule", "threads"}),
                                            "floating-point atomic: its order is the hardware's schedule"))
                continue
            fp_defs = [d for d in inst.dsts if self.is_fp(d) and self.label.get(d, EMPTY) - PSEUDO]
            own = EMPTY
            for d in fp_defs:
                own = own | self.origin.get(d, EMPTY)
            own = own - PSEUDO
            if own:
                violations.append(Violation(inst.line, inst.text, own, _reason(fp_defs[0], self.why)))
        kinds = {}
        for a in self.all_acc:
            key = a.root if a.root[0] != "sym" else (a.root[0], a.root[1], a.lo, a.hi)
            kinds[key] = "row data" if self.row_data(a.root) else ("staging" if a.staging else "address-sensitive")
        res = FlowResult(violations, axes_seen - PSEUDO, calls, fp_count, kinds, self.vi)
        res.debug = {"accesses": self.accesses, "overlaps": self.overlaps, "wlab": self.wlab, "wctl": self.wctl,
                     "waddr": self.waddr, "label": self.label, "origin": self.origin, "why": self.why,
                     "regions": self.regions, "branch_pred": self.branch_pred}
        return res


def describe_cell(root: tuple) -> str:
    """A cell's root as the report names it."""
    if root[0] == "param":
        return f"param {root[1].split('_param_')[-1] if '_param_' in root[1] else root[1]}+{root[2]}"
    if root[0] == "sym":
        return f"symbol {root[1][-40:]}"
    return root[0]


def _reason(reg: str, why: dict[str, str]) -> str:
    w = why.get(reg, "operand")
    if w.startswith("control"):
        return "a batch-variant branch or loop bound decides this floating-point value"
    if w.startswith("load"):
        return f"floating-point value {w} carries batch-variant data (address or stored under variant control)"
    if w == "parameter":
        return "a batch-variant parameter is a floating-point operand"
    if w == "atomic":
        return "the old value of an atomic (the hardware's schedule) reaches floating-point data"
    return "a batch-variant value is an operand of floating-point arithmetic"


def _commutative_exact(inst: Inst, used: set[str]) -> bool:
    """An integer add/min/max/and/or/xor atomic whose old value is never read: the cell's final
    value is the same in every order (exact, commutative); only the old value is scheduling."""
    parts = inst.op.split(".")
    if inst.fp or any(p.startswith("f") and p[1:].isdigit() for p in parts):
        return False
    if not any(p in ("add", "inc", "min", "max", "and", "or", "xor") for p in parts):
        return False
    return inst.op.startswith("red") or not any(d in used for d in inst.dsts)
