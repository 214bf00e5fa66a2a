# The information-flow analysis: which batch-variant values (labelled with the variation axes they
# carry: rows, row, chunk, pages, plan, threads, padding, schedule) can shape a floating-point
# result of a kernel.
#
# Sources (spec.py turns the spec entry into them): scalar parameters and struct fields, special
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
#            value, a variant if that picks a value); a guarded definition carries its guard.
# Verdict: a floating-point register whose labels are not empty is a violation: a batch-variant
# value reached an operand, a loop bound or a choice of a floating-point computation. Variant values
# may reach addresses, masks of whole-element stores and the bounds of loops that carry no
# floating-point state (grid-stride loops over rows), and nothing else. Floating-point atomics are
# violations (their order is the hardware's schedule).
from __future__ import annotations

import re
from dataclasses import dataclass, field

from kir import Function, Inst
from values import ValueInfo, analyze_values

EMPTY: frozenset[str] = frozenset()
_INF = 1 << 62
# Pseudo-axes: the value may differ between the threads of one CTA: "tid<i>", through bit i of
# %tid.x; "thread", otherwise (elected lane, %tid.y ...). Never a violation by themselves; they say
# which threads of a CTA can take different sides of a branch.
THREAD = "thread"
TID_BITS = tuple(f"tid{i}" for i in range(10))
PSEUDO = frozenset((THREAD,) + TID_BITS)
_LANE_BITS = frozenset(TID_BITS[:5])


@dataclass
class Sources:
    """What the spec entry says about one function's inputs."""

    param_labels: dict[tuple[str, int], frozenset[str]] = field(default_factory=dict)  # (param, offset) -> axes
    param_default: frozenset[str] = EMPTY  # any other ld.param
    load_labels: dict[tuple, frozenset[str]] = field(default_factory=dict)  # cell root -> axes of loaded values
    address_ok: set[tuple] = field(default_factory=set)  # cells whose addresses may vary (inout rows)
    special: dict[str, frozenset[str]] = field(default_factory=dict)  # "%ctaid.x" -> axes
    assume_false: set[str] = field(default_factory=set)  # (unused: plans give constants instead)
    consts: dict[tuple[str, int], int] = field(default_factory=dict)  # (param, offset) -> value (a plan)
    special_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)  # "%ctaid.z" -> (0, 0) (a plan)
    extents: set[tuple[str, int]] = field(default_factory=set)  # (param, offset) of row/column counts
    pure_calls: str = ""  # regex of callees that only read memory (their result: their inputs' labels)
    elem_labels: dict[tuple, tuple] = field(default_factory=dict)  # pointer root -> (size, field labels, default)


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


def _postdominators(labels: list[str], succ: dict[str, list[str]]):
    exit_ = "<exit>"
    full_succ = {lab: (succ[lab] if succ[lab] else [exit_]) for lab in labels}
    pdom = {n: set(labels) | {exit_} for n in labels}
    pdom[exit_] = {exit_}
    changed = True
    while changed:
        changed = False
        for n in reversed(labels):
            ss = [s for s in full_succ[n] if s in pdom]
            new = (set.intersection(*[pdom[s] for s in ss]) if ss else set()) | {n}
            if new != pdom[n]:
                pdom[n] = new
                changed = True
    ipdom = {}
    for n in labels:
        cands = sorted(pdom[n] - {n}, key=lambda c: len(pdom.get(c, ())), reverse=True)
        ipdom[n] = cands[0] if cands else exit_
    return ipdom, full_succ


def control_regions(blocks: dict, labels: list[str], succ: dict[str, list[str]],
                    exit_guards: set[str]) -> dict[str, set[str]]:
    """For each block with two or more successors: the blocks its decision controls, directly or
    through nested branches (reachable from its successors without passing its immediate
    post-dominator). A decision whose region runs to the kernel's end is an exit guard."""
    ipdom, full_succ = _postdominators(labels, succ)
    regions: dict[str, set[str]] = {}
    for a in labels:
        ss = full_succ[a]
        if len(ss) < 2:
            continue
        stop = ipdom[a]
        region: set[str] = set()
        work = [b for b in ss if b != stop and b != "<exit>"]
        while work:
            b = work.pop()
            if b in region:
                continue
            region.add(b)
            work.extend(c for c in full_succ.get(b, []) if c != stop and c != "<exit>" and c not in region)
        regions[a] = region
        if stop == "<exit>" or all(i.kind == "ret" for i in blocks[stop].insts):
            exit_guards.add(a)
    return regions


def _normal_paths(func: Function) -> tuple[list[str], dict[str, list[str]]]:
    """LLVM: the blocks from which a normal return (ret) is reachable, and their edges to such
    blocks. The others end in an abort or a throw (a failed check): they produce no result."""
    succ = {b.label: list(b.succs) for b in func.blocks}
    live = {b.label for b in func.blocks if b.insts and b.insts[-1].kind == "ret" and b.insts[-1].op == "ret"}
    grow = True
    while grow:
        grow = False
        for b in func.blocks:
            if b.label not in live and any(c in live for c in succ[b.label]):
                live.add(b.label)
                grow = True
    labels = [b.label for b in func.blocks if b.label in live]
    return labels, {lab: [c for c in succ[lab] if c in live] for lab in labels}


def _pointer_roots(func: Function, insts: list[tuple[str, Inst]]) -> dict[str, set[tuple]]:
    """The roots (parameters, symbols) each register's value may derive from, as an address."""
    roots: dict[str, set[tuple]] = {}
    if func.kind == "llvm":
        for p in func.params:
            roots[p] = {("param", p, 0)}
    stored: dict[tuple, set[tuple]] = {}  # llvm: (stack object, byte offset or None) -> roots stored there
    offs = stack_offsets(func, insts) if func.kind == "llvm" else {}
    changed = True
    while changed:
        changed = False
        for _, inst in insts:
            new: set[tuple] = set()
            if func.kind == "llvm" and inst.kind == "store":
                for cell in _roots_of(inst.addr, roots):
                    if cell[0] == "sym":
                        key = (cell, offs.get(inst.addr[0]) if inst.addr else None)
                        got = _roots_of(inst.srcs[:1], roots)
                        if not got <= stored.get(key, set()):
                            stored[key] = stored.get(key, set()) | got
                            changed = True
                continue
            if inst.kind == "load" and inst.space == "param":
                new = {("param", p, off) for p, off in inst.params}
            elif inst.kind == "load":
                if func.kind == "llvm" and inst.op.startswith("load ptr"):
                    # a pointer read out of a struct parameter: the struct's pointed-to data; out
                    # of a stack object: the pointers stored there
                    at = _roots_of(inst.addr, roots)
                    new = {("param", r[1], "*") for r in at if r[0] == "param"}
                    off = offs.get(inst.addr[0]) if inst.addr else None
                    for r in at:
                        if r[0] == "sym":  # the pointers stored at that field (any field if unknown)
                            for (cell, o), got in stored.items():
                                if cell == r and (off is None or o is None or o == off):
                                    new |= got
                    if not any(r[0] in ("param", "sym") for r in at):
                        new = {("loaded",)}
            elif inst.kind in ("move", "arith", "other", "call"):
                base = inst.op.split(".")[0].split()[0]
                if base in ("mad", "fma"):
                    carried = inst.srcs[-1:]  # the addend: base pointer + index * stride
                elif base in ("add", "sub", "mov", "cvta", "cvt", "selp", "or", "getelementptr", "bitcast",
                              "phi", "select", "inttoptr", "ptrtoint", "addrspacecast", "mapa"):
                    carried = inst.srcs
                else:
                    carried = []
                for s in carried:
                    new |= roots.get(s, set())
                for sym in inst.symbols:
                    new.add(("param-sym", sym) if func.symbols.get(sym) == "param" else ("sym", sym))
            for d in inst.dsts:
                if not new <= roots.get(d, set()):
                    roots[d] = roots.get(d, set()) | new
                    changed = True
    return roots


def _blocks_in_cycles(labels: list[str], succ: dict[str, list[str]]) -> set[str]:
    """Blocks that lie on a cycle of the control-flow graph (in a loop)."""
    index = {lab: i for i, lab in enumerate(labels)}
    out: set[str] = set()
    for lab in labels:
        # lab is on a cycle iff it is reachable from one of its successors
        seen, work = set(), list(succ.get(lab, ()))
        while work:
            b = work.pop()
            if b == lab:
                out.add(lab)
                break
            if b in seen or b not in index:
                continue
            seen.add(b)
            work.extend(succ.get(b, ()))
    return out


def stack_offsets(func: Function, insts: list[tuple[str, Inst]]) -> dict[str, int]:
    """LLVM: register -> constant byte offset into the stack object it points to (alloca = 0,
    bitcast keeps it, getelementptr with constant indices adds llvm.py's inst.offset). A register
    absent here has an unknown offset."""
    offs: dict[str, int] = {}
    changed = True
    while changed:
        changed = False
        for _, inst in insts:
            if not inst.dsts:
                continue
            d = inst.dsts[0]
            v = None
            if inst.op == "alloca":
                v = 0
            elif inst.op in ("bitcast", "addrspacecast") and inst.srcs and inst.srcs[-1] in offs:
                v = offs[inst.srcs[-1]]
            elif inst.op == "getelementptr" and inst.args[:1] == ["const"] and inst.args[1] in offs:
                v = offs[inst.args[1]] + inst.offset
            if v is not None and offs.get(d) != v:
                if d in offs:  # defined twice with different offsets (phi): unknown
                    continue
                offs[d] = v
                changed = True
    return offs


def _cell(roots, pointer_roots: set[tuple], addr_regs: list[str], sym: str) -> tuple:
    rs = _roots_of(addr_regs, roots) | ({("sym", sym)} if sym else set())
    if len(rs) > 1:
        rs = {r for r in rs if r in pointer_roots} or rs
    if not rs:
        return ("unknown",)
    rs = {("param", r[1], "blob") if r[0] == "param-sym" else r for r in rs}
    if len(rs) == 1:
        return next(iter(rs))
    return ("multi",) + tuple(sorted(map(str, rs)))


def _tensor_map(regs: list[str], iv, roots) -> tuple | None:
    """The cell of a TMA operand [tensor map, {coordinates}] whose map is a kernel parameter (its
    address derives from the parameter symbol, at a known offset): ("param", name, ("tmap", offset)),
    the global tensor that map describes. None for any other operand."""
    if len(regs) < 2 or iv is None or iv[0] != iv[1]:
        return None
    rs = roots.get(regs[0], set())
    params = {r for r in rs if r[0] == "param-sym"}
    if len(params) != 1 or len(rs) != 1:
        return None
    return ("param", next(iter(params))[1], ("tmap", iv[0]))


def _wgmma_reads(inst: Inst, vi: ValueInfo | None) -> list[tuple[int, int]] | None:
    """Byte ranges (relative to the shared symbol) a wgmma's descriptor operands can read: start
    address (descriptor bits 0-13, x16) plus rows/8 core-matrix groups at the stride byte offset
    (bits 32-45, x16); A has 64 rows, B the instruction's N. None where not decoded (any byte)."""
    if vi is None:
        return None
    descs = vi.desc.get(id(inst))
    if not descs:
        return None
    m = re.search(r"\.m64n(\d+)k", inst.op)
    n = int(m.group(1)) if m else 256
    a_in_regs = inst.args[1].strip().startswith("{") if len(inst.args) > 1 else False
    rows = [n] if a_in_regs else [64, n]
    out = []
    for iv, r in zip(descs, rows):
        if iv is None or iv[0] < 0 or (iv[0] >> 14) != (iv[1] >> 14) or (iv[0] >> 32) != (iv[1] >> 32):
            return None
        start_lo, start_hi = (iv[0] & 0x3FFF) * 16, (iv[1] & 0x3FFF) * 16
        sbo = ((iv[0] >> 32) & 0x3FFF) * 16
        lbo = ((iv[0] >> 16) & 0x3FFF) * 16
        span = (r + 7) // 8 * max(sbo, lbo, 128) + 1024
        out.append((start_lo, start_hi + span))
    return out


def analyze(func: Function, src: Sources, is_fp_reg, _unused=None) -> FlowResult:
    vi = analyze_values(func, src.consts, src.special_ranges) if func.kind == "ptx" else None
    blocks = {b.label: b for b in func.blocks}
    if vi is not None:
        labels = [b.label for b in func.blocks if b.label in vi.reachable]
        succ = {lab: [s for s in vi.feasible[lab] if s in vi.reachable] for lab in labels}
        dead = vi.never_runs
    else:
        labels, succ = _normal_paths(func)
        dead = set()
    insts = [(lab, i) for lab in labels for i in blocks[lab].insts if id(i) not in dead]
    where_used: dict[str, set[str]] = {}
    for lab, inst in insts:
        for r in inst.srcs + inst.addr + inst.dst_addr + inst.ignored_srcs + ([inst.pred] if inst.pred else []):
            where_used.setdefault(r, set()).add(lab)
    exit_guards: set[str] = set()
    regions = control_regions(blocks, labels, succ, exit_guards)
    branch_pred = {lab: blocks[lab].insts[-1].pred for lab in labels
                   if blocks[lab].insts and blocks[lab].insts[-1].kind == "branch" and blocks[lab].insts[-1].pred}
    roots = _pointer_roots(func, insts)
    pointer_roots: set[tuple] = set()
    for _, inst in insts:
        if inst.op.startswith("cvta") or inst.op.startswith("getelementptr") or inst.kind == "copy":
            for r in inst.srcs + inst.addr + inst.dst_addr:
                pointer_roots |= roots.get(r, set())
        pointer_roots |= {("param-sym", s) if func.symbols.get(s) == "param" else ("sym", s) for s in inst.symbols}

    llvm_offs = stack_offsets(func, insts) if func.kind == "llvm" else {}

    # ---- memory accesses ----
    accesses: dict[int, list[_Access]] = {}
    for _, inst in insts:
        acc: list[_Access] = []

        def add(write: bool, regs: list[str], sym: str, iv, width: int, staging: bool = False) -> None:
            root = _cell(roots, pointer_roots, regs, sym)
            if iv is None and func.kind == "llvm" and regs and regs[0] in llvm_offs:
                iv = (llvm_offs[regs[0]], llvm_offs[regs[0]])
            lo, hi = (-_INF, _INF) if iv is None or root[0] != "sym" else (iv[0], iv[1] + (width or _INF))
            acc.append(_Access(inst, write, root, lo, hi, list(regs), staging))

        if inst.kind == "load" and inst.space != "param":
            add(False, inst.addr, inst.mem_sym, vi.addr.get(id(inst)) if vi else None, inst.width or 16)
        elif inst.kind in ("store", "atomic"):
            add(True, inst.addr, inst.mem_sym, vi.addr.get(id(inst)) if vi else None, inst.width or 16)
            if inst.kind == "atomic":  # reads the cell too
                add(False, inst.addr, inst.mem_sym, vi.addr.get(id(inst)) if vi else None, inst.width or 16)
        elif inst.kind == "copy":
            first = vi.first_reg.get(id(inst), (None, None)) if vi else (None, None)
            tmap_src, tmap_dst = _tensor_map(inst.addr, first[0], roots), _tensor_map(inst.dst_addr, first[1], roots)
            if tmap_src:  # TMA load: the global tensor the map (a kernel parameter) describes
                acc.append(_Access(inst, False, tmap_src, -_INF, _INF, list(inst.addr)))
            else:
                add(False, inst.addr, inst.mem_sym, vi.addr.get(id(inst)) if vi else None, inst.width)
            from_global = inst.space in ("global", "param", "const") and inst.dst_space in ("shared", "local")
            if tmap_dst:  # TMA store
                acc.append(_Access(inst, True, tmap_dst, -_INF, _INF, list(inst.dst_addr)))
            else:
                add(True, inst.dst_addr, inst.dst_sym, vi.dst_addr.get(id(inst)) if vi else None, inst.width,
                    staging=from_global)
        elif inst.kind == "call" and src.pure_calls and re.search(src.pure_calls, inst.callee):
            for r in inst.srcs:  # reads through every pointer argument
                for root in roots.get(r, set()):
                    acc.append(_Access(inst, False, root, -_INF, _INF, [r]))
        if acc:
            accesses[id(inst)] = acc
    # wgmma reads its operands from shared memory through descriptors: the decoded byte ranges of
    # every shared symbol the kernel uses (or all of them).
    shared_syms = sorted(n for n, sp in func.symbols.items() if sp == "shared")
    for _, inst in insts:
        if inst.op.startswith("wgmma.mma_async"):
            ranges = _wgmma_reads(inst, vi)
            accesses[id(inst)] = [_Access(inst, False, ("sym", sym), *(r if r else (-_INF, _INF)), inst.ignored_srcs)
                                  for sym in shared_syms or ["<shared>"] for r in ranges or [None]]
    all_acc = [a for lst in accesses.values() for a in lst]
    writes_by_root: dict[tuple, list[_Access]] = {}
    for a in all_acc:
        if a.write:
            writes_by_root.setdefault(a.root, []).append(a)
    read_roots = {a.root for a in all_acc if not a.write}
    write_roots = set(writes_by_root)

    def overlapping(a: _Access) -> list[_Access]:
        if a.root[0] in ("unknown", "multi", "loaded"):  # could be anything written
            return [w for ws in writes_by_root.values() for w in ws if w.root[0] != "param"] + \
                writes_by_root.get(a.root, [])
        ws = list(writes_by_root.get(a.root, []))
        for k in ("unknown", "multi", "loaded"):
            ws += [w for r, lst in writes_by_root.items() if r[0] == k for w in lst]
        return [w for w in ws if w.root != a.root or (w.lo < a.hi and a.lo < w.hi)]

    overlaps = {id(a): overlapping(a) for a in all_acc}

    def row_data(root: tuple) -> bool:
        """A global input read only, or output written only, or a declared row-local in-place buffer:
        its addresses are the address assumption's."""
        if root in src.address_ok:
            return True
        return root[0] == "param" and not (root in read_roots and root in write_roots)

    def staging_only(a: _Access) -> bool:
        ws = overlaps[id(a)] if not a.write else [a]
        return bool(ws) and all(w.staging for w in ws)

    row_bounds = _row_bound_compares(func, insts, src)

    # ---- labels to a fixpoint ----
    label: dict[str, frozenset[str]] = {}
    if func.kind == "llvm":
        for p in func.params:
            if src.param_labels.get((p, 0)):
                label[p] = src.param_labels[(p, 0)]
    wlab: dict[int, frozenset[str]] = {}  # id(access) -> labels of the values it writes (and its address)
    wctl: dict[int, dict[str, frozenset[str]]] = {}  # id(access) -> branch -> labels of that branch
    waddr: dict[int, frozenset[str]] = {}  # id(access) -> thread bits its address depends on
    tid_fields, warp_broadcasts = _thread_fields(func, insts, vi)
    block_of = {id(i): lab for lab, i in insts}
    in_loop = _blocks_in_cycles(labels, succ)
    position = {id(i): k for k, (_, i) in enumerate(insts)}
    cover_cache: dict = {}
    origin: dict[str, frozenset[str]] = {}
    why: dict[str, str] = {}

    def labs(rs) -> frozenset[str]:
        out = EMPTY
        for r in rs:
            x = label.get(r)
            if x:
                out = out | x
        return out

    def read_labels(a: _Access) -> frozenset[str]:
        v = src.load_labels.get(a.root, EMPTY)
        ws = overlaps[id(a)]
        covered = None
        for w in ws:
            v = v | wlab.get(id(w), EMPTY)
            for head, lb in wctl.get(id(w), {}).items():
                if lb <= v:
                    continue
                if covered is None:
                    covered = _covered(a, ws)
                # The write's branch decided whether it ran; the read sees this pass's write anyway
                # when the branch is the same for every thread of the CTA, the read lies in its
                # region, and writes to the cell lie on every path to the read.
                # Or the branch is decided once (in no loop) and the read lies in its region too:
                # the read runs only where the write's side was taken.
                if (covered or head not in in_loop) and block_of[id(a.inst)] in regions.get(head, ()) and \
                        _uniform_for(lb, labs(a.addr_regs) | waddr.get(id(w), EMPTY)):
                    continue
                v = v | lb
        if not row_data(a.root) and not staging_only(a):
            v = v | labs(a.addr_regs)
        else:
            v = v | (labs(a.addr_regs) & PSEUDO)  # another address per thread: another value
        return v

    def _covered(a: _Access, ws: list[_Access]) -> bool:
        """Every path from the entry to the read passes an unguarded write of the cell first."""
        rb = block_of[id(a.inst)]
        cover_blocks = set()
        for w in ws:
            if w.inst.pred is not None or w.write is False:
                continue
            wb = block_of[id(w.inst)]
            if wb == rb:
                if position[id(w.inst)] < position[id(a.inst)]:
                    return True
                continue
            cover_blocks.add(wb)
        key = (rb, frozenset(cover_blocks))
        if key not in cover_cache:
            # Blocks from which a write is reachable without passing the read: at a branch that only
            # the thread index decides, a writing thread takes a side that leads to its write, the
            # same in every pass.
            to_cover = set(cover_blocks)
            grow = True
            while grow:
                grow = False
                for b in labels:
                    if b not in to_cover and b != rb and any(c2 in to_cover for c2 in succ.get(b, ())):
                        to_cover.add(b)
                        grow = True
            seen = {labels[0]} if labels[0] not in cover_blocks else set()
            work = list(seen)
            reached = False
            while work:
                b = work.pop()
                if b == rb:
                    reached = True
                    break
                nxt = succ.get(b, ())
                bp = branch_pred.get(b)
                if bp and label.get(bp) and label[bp] <= frozenset(TID_BITS):
                    toward = [c2 for c2 in nxt if c2 in to_cover]
                    nxt = toward or nxt
                for c2 in nxt:
                    if c2 not in seen and c2 not in cover_blocks:
                        seen.add(c2)
                        work.append(c2)
            cover_cache[key] = not reached and labels[0] not in cover_blocks
        return cover_cache[key]

    heads_of: dict[str, list[str]] = {}
    for a, region in regions.items():
        for blk in region:
            heads_of.setdefault(blk, []).append(a)
    escapes: dict[tuple[str, str], bool] = {}

    def escapes_region(d: str, a: str) -> bool:
        if (d, a) not in escapes:
            escapes[(d, a)] = any(u not in regions[a] for u in where_used.get(d, ()))
        return escapes[(d, a)]

    used = set(where_used)
    changed = True
    rounds = 0
    while changed and rounds < 200:
        rounds += 1
        changed = False
        branch_label = {a: labs([branch_pred[a]]) if a in branch_pred else EMPTY for a in regions}
        cover_cache.clear()  # it reads branch labels, which grow
        for lab in labels:
            ctrl_regions = [a for a in heads_of.get(lab, ()) if branch_label[a]]
            ctrl_all = EMPTY
            ctrl_private = EMPTY
            for a in ctrl_regions:
                ctrl_all = ctrl_all | branch_label[a]
                if a not in exit_guards:
                    ctrl_private = ctrl_private | branch_label[a]
            for inst in blocks[lab].insts:
                if id(inst) in dead:
                    continue
                guard = labs([inst.pred]) if inst.pred else EMPTY
                ctrl_here = ctrl_all | guard
                v_fp = EMPTY
                why_v = "operand"
                if inst.kind == "load" and inst.space == "param":
                    # each destination of a vector load reads its own field
                    size = inst.width // max(len(inst.dsts), 1) if inst.width else 4
                    for k, d in enumerate(inst.dsts):
                        v = guard
                        for p, off in inst.params:
                            v = v | src.param_labels.get((p, off + k * size), src.param_default)
                        if not v <= label.get(d, EMPTY):
                            label[d] = label.get(d, EMPTY) | v
                            origin[d] = origin.get(d, EMPTY) | v
                            why[d] = "parameter"
                            changed = True
                    continue
                elif inst.kind == "load" and _elem_root(accesses.get(id(inst), []), src):
                    # an element of a struct array: each destination reads its field's labels
                    a = accesses[id(inst)][0]
                    size, fields, default = src.elem_labels[a.root]
                    per = inst.width // max(len(inst.dsts), 1) if inst.width else 4
                    extra = (labs(a.addr_regs) if not row_data(a.root) else labs(a.addr_regs) & PSEUDO) | guard
                    for k, d in enumerate(inst.dsts):
                        v = fields.get((inst.offset + k * per) % size, default) | extra
                        for a_head in ctrl_regions:
                            if escapes_region(d, a_head):
                                v = v | branch_label[a_head]
                        if not v <= label.get(d, EMPTY):
                            label[d] = label.get(d, EMPTY) | v
                            origin[d] = origin.get(d, EMPTY) | v
                            why[d] = f"load from {describe_cell(a.root)}"
                            changed = True
                    continue
                elif inst.kind in ("load", "store", "atomic", "copy") or inst.op.startswith("wgmma.mma_async"):
                    accs = accesses.get(id(inst), [])
                    reads = [a for a in accs if not a.write]
                    v = EMPTY
                    for a in reads:
                        v = v | read_labels(a)
                    if reads:
                        why_v = f"load from {describe_cell(reads[0].root)}"
                    if inst.kind in ("store", "atomic", "copy"):
                        val = (labs(inst.srcs) | (v if inst.kind == "copy" else EMPTY))
                        exact = inst.kind == "atomic" and _commutative_exact(inst, used)
                        if inst.kind == "atomic" and not exact:
                            val = val | frozenset({"schedule"})
                        for w in (a for a in accs if a.write):
                            local = w.root[0] == "sym" and ("local_depot" in w.root[1] or inst.space == "local")
                            # staging: which copy a reader sees is the pipeline's pairing (assumed), not
                            # a choice the writer's control makes
                            quiet = w.root in src.address_ok or w.staging
                            nv = val | (EMPTY if quiet else guard)
                            if not row_data(w.root) and not w.staging:
                                nv = nv | labs(w.addr_regs)
                            nv = nv - PSEUDO  # a reader at one address reads one writer's value
                            wa = labs(w.addr_regs) & PSEUDO
                            if not wa <= waddr.get(id(w), EMPTY):
                                waddr[id(w)] = waddr.get(id(w), EMPTY) | wa
                                changed = True
                            old = wlab.get(id(w), EMPTY)
                            if not nv <= old:
                                wlab[id(w)] = old | nv
                                changed = True
                            if quiet:
                                continue
                            ctl = wctl.setdefault(id(w), {})
                            for a_head in ctrl_regions:
                                if local and a_head in exit_guards:
                                    continue
                                lb = branch_label[a_head]
                                if not lb <= ctl.get(a_head, EMPTY):
                                    ctl[a_head] = ctl.get(a_head, EMPTY) | lb
                                    changed = True
                        if inst.kind != "atomic" or not inst.dsts:
                            continue
                        v = v | val | frozenset({"schedule"})
                        why_v = "atomic"
                    if inst.op.startswith("wgmma.mma_async"):
                        v_fp = labs(s for s in inst.srcs if is_fp_reg(s))
                        v = v | labs(s for s in inst.srcs if not is_fp_reg(s))
                        why_v = "load from shared memory (wgmma operand)"
                else:
                    v = labs(s for s in inst.srcs if not is_fp_reg(s))
                    v_fp = labs(s for s in inst.srcs if is_fp_reg(s))
                    for a in accesses.get(id(inst), ()):  # a pure call's reads
                        v = v | read_labels(a)
                    for sp in inst.special:
                        v = v | src.special.get(sp, src.special.get(sp.split(".")[0], EMPTY))
                    if inst.op.startswith("elect"):
                        v = v | {THREAD}
                    if id(inst) in tid_fields:  # (tid.x >> s) & mask: depends on those bits only
                        v = (v - PSEUDO) | tid_fields[id(inst)]
                    elif id(inst) in warp_broadcasts:  # shfl from a fixed lane: the same in the whole warp
                        v = v - _LANE_BITS
                    if id(inst) in row_bounds and v - PSEUDO <= _ROW_BOUND_AXES and v & {"row", "plan"}:
                        v = v & PSEUDO  # a row coordinate against the row count: a row mask (A-bounds)
                        why_v = "row bound"
                v = v | guard
                for d in inst.dsts:
                    extra = EMPTY
                    for a in ctrl_regions:
                        if escapes_region(d, a):
                            extra = extra | branch_label[a]
                    own = v | extra
                    if not own <= origin.get(d, EMPTY):
                        origin[d] = origin.get(d, EMPTY) | own
                        why[d] = why_v if v else "control (a variant branch chooses it)"
                        changed = True
                    nv = own | v_fp
                    if not nv <= label.get(d, EMPTY):
                        label[d] = label.get(d, EMPTY) | nv
                        changed = True

    # ---- verdict ----
    violations: list[Violation] = []
    fp_count = 0
    axes_seen = EMPTY
    for axes in list(label.values()) + list(wlab.values()):
        axes_seen = axes_seen | axes
    axes_seen = axes_seen - PSEUDO
    calls = []
    for _, inst in insts:
        if inst.fp:
            fp_count += 1
        if inst.kind == "call":
            calls.append(inst.callee)
            if inst.callee.startswith("indirect:") and label.get(inst.callee[9:]):
                violations.append(Violation(
                    inst.line, inst.text, label[inst.callee[9:]],
                    "a batch-variant value picks the function that computes these elements (dispatch); "
                    "the analyzer does not prove the candidates compute each element alike"))
        if inst.kind == "atomic" and inst.fp:
            violations.append(Violation(inst.line, inst.text, frozenset({"schedule", "threads"}),
                                        "floating-point atomic: its order is the hardware's schedule"))
            continue
        fp_defs = [d for d in inst.dsts if is_fp_reg(d) and label.get(d, EMPTY) - PSEUDO]
        own = EMPTY
        for d in fp_defs:
            own = own | origin.get(d, EMPTY)
        own = own - PSEUDO
        if own:
            violations.append(Violation(inst.line, inst.text, own, _reason(fp_defs[0], why)))
    kinds = {}
    for a in all_acc:
        key = a.root if a.root[0] != "sym" else (a.root[0], a.root[1], a.lo, a.hi)
        kinds[key] = "row data" if row_data(a.root) else ("staging" if a.staging else "address-sensitive")
    res = FlowResult(violations, axes_seen, calls, fp_count, kinds, vi)
    res.debug = {"accesses": accesses, "overlaps": overlaps, "wlab": wlab, "wctl": wctl, "waddr": waddr, "label": label, "origin": origin,
                 "why": why, "regions": regions, "branch_pred": branch_pred}
    return res


_ROW_BOUND_AXES = frozenset({"row", "plan", "rows", "padding"})


def _elem_root(accs: list, src: Sources) -> bool:
    """A load of one struct-array element through a spec'd pointer ("->Struct")."""
    return len(accs) == 1 and not accs[0].write and accs[0].root in src.elem_labels


def _uniform_for(branch: frozenset[str], addresses: frozenset[str]) -> bool:
    """A branch that every pair of threads writing and reading one cell decides alike: it depends on
    no thread-variant input but bits of %tid.x that neither address depends on (the threads that
    differ in those bits touch the same cells), and on no scheduling state."""
    if THREAD in branch or "schedule" in branch or THREAD in addresses:
        return False
    return not (branch & addresses & PSEUDO)


def _thread_fields(func: Function, insts: list[tuple[str, Inst]], vi) -> tuple[dict, set]:
    """Instructions whose result is a bit field of %tid.x, (tid.x >> s) & mask (register defined
    once): id -> the tid bits it depends on; and shfl.sync.idx reads from a constant lane."""
    ndefs: dict[str, int] = {}
    for _, inst in insts:
        for d in inst.dsts:
            ndefs[d] = ndefs.get(d, 0) + 1
    nt = (func.ntid or (1024, 1, 1))[0]
    field: dict[str, tuple[int, int]] = {}
    high: dict[str, tuple[str, int]] = {}  # register = field & -2^k: (field register, the mask)
    alias: dict[str, str] = {}
    out: dict[int, frozenset[str]] = {}
    broadcasts: set[int] = set()
    for _, inst in insts:
        base = inst.op.split(".")[0]
        d = inst.dsts[0] if len(inst.dsts) == 1 else None
        args = [a.strip() for a in inst.args[1:]]
        f = None
        if base == "mov" and args == ["%tid.x"]:
            f = (0, (1 << max(nt - 1, 1).bit_length()) - 1)
        elif base in ("mov", "cvt") and len(args) == 1 and args[0] in field and not inst.fp:
            f = field[args[0]]
        elif base == "shr" and len(args) == 2 and args[0] in field and args[1].isdigit():
            s0, m0 = field[args[0]]
            f = (s0 + int(args[1]), m0 >> int(args[1]))
        elif base == "and" and len(args) == 2 and args[0] in field and args[1].lstrip("-").isdigit():
            s0, m0 = field[args[0]]
            c = int(args[1]) & 0xFFFFFFFF
            f = (s0, m0 & (c >> s0))
            if int(args[1]) < 0 and d:
                high[d] = (args[0], int(args[1]))
        elif base == "add" and len(args) == 2 and vi is not None:
            ops = vi.operands.get(id(inst), [])
            for x, other in ((0, 1), (1, 0)):  # x + 0: x
                if len(ops) == 2 and ops[other] == (0, 0) and args[x] in field:
                    f = field[args[x]]
                    alias[d] = args[x]
        elif base == "sub" and len(args) == 2 and args[0] in field and args[1] in high:
            src_reg, c = high[args[1]]
            if alias.get(src_reg, src_reg) == alias.get(args[0], args[0]) or src_reg == args[0]:
                s0, m0 = field[args[0]]
                f = (s0, m0 & ((~c & 0xFFFFFFFF) >> s0))  # x - (x & -2^k): x's low k bits
        if f is not None and d and ndefs.get(d) == 1:
            field[d] = f
            out[id(inst)] = frozenset(TID_BITS[b] for b in range(10) if (f[1] << f[0]) >> b & 1)
        if base == "shfl" and ".idx" in inst.op and len(args) >= 2 and vi is not None:
            lane = vi.shfl_lane.get(id(inst))
            if lane is not None and lane[0] == lane[1]:
                broadcasts.add(id(inst))
                dst = inst.args[0].split("|")[0].strip()
                if args[0] in field and field[args[0]][0] >= 5 and ndefs.get(dst) == 1:
                    field[dst] = field[args[0]]  # a warp-uniform field: every lane holds lane c's value
                    out[id(inst)] = frozenset(TID_BITS[b] for b in range(10)
                                              if (field[dst][1] << field[dst][0]) >> b & 1)
    return out, broadcasts


def _row_bound_compares(func: Function, insts: list[tuple[str, Inst]], src: Sources) -> set[int]:
    """Integer comparisons x + c CMP m (or m - x CMP c ...) where m is a row-count parameter (a field
    labelled rows) entering with coefficient +-1 and everything else is free of it: the candidates
    for row masks. flow.analyze() accepts one as a mask when its other operand carries the row
    (or plan) axis, i.e. is a row coordinate, and nothing but row, plan, rows and padding.
    Coefficients are per register over all its definitions (a register defined twice with
    different coefficients has none)."""
    rows_fields = src.extents
    if not rows_fields:
        return set()
    coef: dict[str, int | None] = {}

    def c(r: str) -> int | None:
        return coef.get(r.strip(), 0)

    def merge(d: str, v: int | None) -> bool:
        if d not in coef:
            coef[d] = v
            return v != 0
        if coef[d] is not None and coef[d] != v:
            coef[d] = None
            return True
        return False

    changed = True
    while changed:
        changed = False
        for _, inst in insts:
            if not inst.dsts:
                continue
            base = inst.op.split(".")[0]
            args = [a.strip() for a in inst.args[1:]]
            if inst.kind == "load" and inst.space == "param":
                size = inst.width // max(len(inst.dsts), 1) if inst.width else 4
                for k, d in enumerate(inst.dsts):
                    hit = any((p, off + k * size) in rows_fields for p, off in inst.params)
                    changed |= merge(d, 1 if hit else 0)
                continue
            regs = [a for a in args if a.startswith("%") or "#s" in a]
            cs = [c(a) for a in regs]
            if all(x == 0 for x in cs) or inst.fp or inst.fp_dst:
                v: int | None = 0 if all(x == 0 for x in cs) else None
            elif base in ("mov", "cvta") or (base == "cvt" and not inst.fp):
                v = cs[0] if len(cs) == 1 else None
            elif base == "add" and len(args) == 2:
                v = None if None in cs else sum(cs)
            elif base == "sub" and len(args) == 2:
                a0 = c(args[0]) if args[0] in regs else 0
                a1 = c(args[1]) if args[1] in regs else 0
                v = None if a0 is None or a1 is None else a0 - a1
            elif base == "neg" and len(cs) == 1:
                v = None if cs[0] is None else -cs[0]
            elif base == "mad" and "lo" in inst.op.split(".") and len(args) == 3 and \
                    (c(args[0]) == 0 and (c(args[1]) == 0 if args[1] in regs else True)):
                v = c(args[2]) if args[2] in regs else 0  # coordinate * stride + extent term
            else:
                v = None
            for d in inst.dsts:
                changed |= merge(d, v)
    out = set()
    for _, inst in insts:
        if inst.op.startswith("setp.") and len(inst.args) >= 3 and not inst.fp:
            parts = inst.op.split(".")
            if len(parts) != 3 or parts[2][0] not in "su":
                continue
            ca, cb = c(inst.args[1]), c(inst.args[2])
            if ca is not None and cb is not None and abs(ca - cb) == 1:
                out.add(id(inst))
    return out


def _roots_of(regs, roots) -> set[tuple]:
    out: set[tuple] = set()
    for r in regs:
        out |= roots.get(r, set())
    return out


def describe_cell(cell: tuple) -> str:
    if cell[0] == "param":
        return f"param {cell[1].split('_param_')[-1] if '_param_' in cell[1] else cell[1]}+{cell[2]}"
    if cell[0] == "sym":
        return f"symbol {cell[1][-40:]}"
    return cell[0]


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
