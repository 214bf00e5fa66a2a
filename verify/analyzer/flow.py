# The information-flow analysis: which batch-variant values (labelled with the variation axes they
# carry: rows, row, chunk, pages, plan, threads, padding, schedule) can shape a floating-point
# result of a kernel.
#
# Sources (kernel.py turns the spec entry into them): scalar parameters and struct fields, special
# registers (%ctaid = the CTA's place, %nctaid = the grid, %warpid/%smid/%clock = scheduling), loads
# through pointers whose values are batch-variant (block tables, slots, row_seq), atomics and
# mbarrier phases (scheduling).
# Propagation, to a fixpoint:
#   data     every register an instruction defines carries the labels of its data operands;
#   memory   a store adds its value's labels (and its control labels) to the memory cell it writes
#            (a cell = the pointer parameter or shared/local symbol the address derives from); a
#            load gets its cell's labels. The address of a global input or output is NOT a data
#            operand: the kernel reads the row's own logical operand wherever the row sits (the
#            address assumption, checked by the bitwise tests). Shared, local and scratch cells are
#            address-sensitive: a variant address there chooses among intermediate values, so it
#            joins the value's labels;
#   control  a register defined in a region that a variant branch controls, and used outside that
#            region, carries the branch's labels (a variant loop bound that reaches a loop-carried
#            value, a variant if that picks a value); a predicated definition carries its predicate.
# Verdict: a floating-point register whose labels are not empty is a violation: a batch-variant
# value reached an operand, a loop bound or a choice of a floating-point computation. Variant values
# may reach addresses, masks of whole-element stores and the bounds of loops that carry no
# floating-point state (grid-stride loops over rows), and nothing else. Floating-point atomics are
# violations (their order is the hardware's schedule).
from __future__ import annotations

from dataclasses import dataclass, field

from kir import Function, Inst

EMPTY: frozenset[str] = frozenset()


@dataclass
class Sources:
    """What the spec entry says about one function's inputs."""

    param_labels: dict[tuple[str, int], frozenset[str]] = field(default_factory=dict)  # (param, offset) -> axes
    param_default: frozenset[str] = EMPTY  # any other ld.param
    load_labels: dict[tuple, frozenset[str]] = field(default_factory=dict)  # cell root -> axes of loaded values
    address_ok: set[tuple] = field(default_factory=set)  # cells whose addresses may vary (inout rows)
    special: dict[str, frozenset[str]] = field(default_factory=dict)  # "%ctaid.x" -> axes
    assume_false: set[str] = field(default_factory=set)  # branch predicates known false (plan constants)


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


def _cfg(func: Function):
    labels = [b.label for b in func.blocks]
    succ = {b.label: list(b.succs) for b in func.blocks}
    pred: dict[str, list[str]] = {lab: [] for lab in labels}
    for a, ss in succ.items():
        for s in ss:
            if s in pred:
                pred[s].append(a)
    return labels, succ, pred


def _postdominators(labels, succ):
    exit_ = "<exit>"
    full_succ = {lab: (succ[lab] if succ[lab] else [exit_]) for lab in labels}
    nodes = labels + [exit_]
    pdom = {n: set(nodes) for n in nodes}
    pdom[exit_] = {exit_}
    changed = True
    while changed:
        changed = False
        for n in reversed(labels):
            ss = [s for s in full_succ[n] if s in pdom]
            new = set.intersection(*[pdom[s] for s in ss]) if ss else set()
            new = new | {n}
            if new != pdom[n]:
                pdom[n] = new
                changed = True
    ipdom = {}
    for n in labels:
        # the closest strict post-dominator: post-dominator sets form a chain, it has the largest
        cands = sorted(pdom[n] - {n}, key=lambda c: len(pdom.get(c, ())), reverse=True)
        ipdom[n] = cands[0] if cands else exit_
    return pdom, ipdom, full_succ


def control_regions(func: Function, exit_guards: set[str] | None = None) -> dict[str, set[str]]:
    """For each block ending in a conditional branch: the blocks its decision controls, directly or
    through nested branches (reachable from its successors without passing its immediate
    post-dominator)."""
    labels, succ, _ = _cfg(func)
    pdom, ipdom, full_succ = _postdominators(labels, succ)
    regions: dict[str, set[str]] = {}
    if exit_guards is None:
        exit_guards = set()
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
            for c in full_succ.get(b, []):
                if c != stop and c != "<exit>" and c not in region:
                    work.append(c)
        regions[a] = region
        if stop == "<exit>" or all(i.kind == "ret" for i in func.block(stop).insts):
            exit_guards.add(a)
    return regions


def analyze(func: Function, src: Sources, is_fp_reg, reg_is_pred) -> FlowResult:
    blocks = func.blocks
    where: dict[str, list[tuple[str, Inst]]] = {}  # reg -> defining (block, inst)
    uses: dict[str, set[str]] = {}  # reg -> blocks that read it
    for b in blocks:
        for inst in b.insts:
            for d in inst.dsts:
                where.setdefault(d, []).append((b.label, inst))
            for r in inst.srcs + inst.addr + inst.dst_addr + ([inst.pred] if inst.pred else []):
                uses.setdefault(r, set()).add(b.label)
    exit_guards: set[str] = set()
    regions = control_regions(func, exit_guards)
    branch_pred: dict[str, str | None] = {}
    for b in blocks:
        for inst in b.insts:
            if inst.kind == "branch" and inst.pred:
                branch_pred[b.label] = inst.pred
    # Branches decided by plan constants: prune their taken edge's region from consideration.
    # Pointer provenance: the roots (param fields, symbols) an address may derive from.
    roots: dict[str, set[tuple]] = {}
    if func.kind == "llvm":  # parameters are values: each is its own root
        for p in func.params:
            roots[p] = {("param", p, 0)}
    changed = True
    while changed:
        changed = False
        for b in blocks:
            for inst in b.insts:
                new: set[tuple] = set()
                if inst.kind == "load" and inst.space == "param":
                    new = {("param", p, off) for p, off in inst.params}
                elif inst.kind == "load":
                    new = set()  # values loaded from memory are not derived pointers (except below)
                    if func.kind == "llvm" and inst.op.startswith("load ptr"):
                        # a pointer read out of a struct parameter: the struct's pointed-to data
                        new = {("param", r[1], "*") for r in _roots_of(inst.addr, roots) if r[0] == "param"} \
                            or {("loaded",)}
                elif inst.kind in ("move", "arith", "other", "call"):
                    base = inst.op.split(".")[0].split()[0]
                    if base in ("mad", "fma"):
                        carried = inst.srcs[-1:]  # the addend: base pointer + index * stride
                    elif base in ("add", "sub", "mov", "cvta", "cvt", "selp", "or", "getelementptr", "bitcast",
                                  "phi", "select", "inttoptr", "ptrtoint", "addrspacecast"):
                        carried = inst.srcs
                    else:
                        carried = []
                    for s in carried:
                        new |= roots.get(s, set())
                    for sym in inst.symbols:
                        new.add(("sym", sym))
                for d in inst.dsts:
                    if not new <= roots.get(d, set()):
                        roots[d] = roots.get(d, set()) | new
                        changed = True

    # Roots that are pointers: converted to a global/shared address (PTX cvta) or a symbol.
    pointer_roots: set[tuple] = set()
    for b in blocks:
        for inst in b.insts:
            if inst.op.startswith("cvta") or inst.op.startswith("getelementptr") or inst.kind == "copy":
                for r in inst.srcs + inst.addr + inst.dst_addr:
                    pointer_roots |= roots.get(r, set())
            pointer_roots |= {("sym", s) for s in inst.symbols}

    def cell_of(addr_regs: list[str], syms: list[str]) -> tuple:
        rs = _roots_of(addr_regs, roots) | {("sym", s) for s in syms}
        if len(rs) > 1:
            rs = {r for r in rs if r in pointer_roots} or rs
        if not rs:
            return ("unknown",)
        if len(rs) == 1:
            return next(iter(rs))
        return ("multi",) + tuple(sorted(map(str, rs)))

    # Memory cell kinds: address-sensitive unless an input read-only or an output write-only
    # global pointer (or declared row-local in place).
    stored_cells, loaded_cells = set(), set()
    for b in blocks:
        for inst in b.insts:
            if inst.kind == "load" and inst.space != "param":
                loaded_cells.add(cell_of(inst.addr, inst.symbols))
            elif inst.kind in ("store", "atomic"):
                stored_cells.add(cell_of(inst.addr, inst.symbols))
            elif inst.kind == "copy":
                loaded_cells.add(cell_of(inst.addr, inst.symbols[1:] if len(inst.symbols) > 1 else []))
                stored_cells.add(cell_of(inst.dst_addr, inst.symbols[:1]))

    def space_sensitive(cell: tuple) -> bool:
        if cell in src.address_ok:
            return False
        if cell[0] == "param" and not (cell in stored_cells and cell in loaded_cells):
            return False  # a global input (read-only) or output (write-only)
        if cell[0] == "sym" or cell[0] in ("unknown", "multi", "loaded"):
            return True
        return cell in stored_cells and cell in loaded_cells

    cell_kinds = {c: ("address-sensitive" if space_sensitive(c) else "row data")
                  for c in stored_cells | loaded_cells}

    label: dict[str, frozenset[str]] = {}
    if func.kind == "llvm":
        for p in func.params:
            if src.param_labels.get((p, 0)):
                label[p] = src.param_labels[(p, 0)]
    cell_label: dict[tuple, frozenset[str]] = {c: src.load_labels.get(c, EMPTY) for c in stored_cells | loaded_cells}
    for c, axes in src.load_labels.items():
        cell_label[c] = cell_label.get(c, EMPTY) | axes
    why: dict[str, str] = {}
    origin: dict[str, frozenset[str]] = {}  # labels that enter a register other than by fp operands

    def lab(r: str | None) -> frozenset[str]:
        return label.get(r, EMPTY) if r else EMPTY

    def labs(rs) -> frozenset[str]:
        out = EMPTY
        for r in rs:
            out = out | label.get(r, EMPTY)
        return out

    heads_of: dict[str, list[str]] = {}
    for a, region in regions.items():
        if branch_pred.get(a) in src.assume_false:
            continue
        for blk in region:
            heads_of.setdefault(blk, []).append(a)
    escapes: dict[tuple[str, str], bool] = {}

    def escapes_region(d: str, a: str) -> bool:
        key = (d, a)
        if key not in escapes:
            escapes[key] = any(u not in regions[a] for u in uses.get(d, ()))
        return escapes[key]

    changed = True
    iterations = 0
    while changed:
        iterations += 1
        changed = False
        branch_label = {a: lab(branch_pred.get(a)) for a in regions}
        for b in blocks:
            ctrl_regions = [(a, regions[a]) for a in heads_of.get(b.label, ()) if branch_label[a]]
            # An exit guard (its region runs to the end of the kernel) merges nothing after it into a
            # thread's own registers or local memory; shared and global cells are seen by others.
            ctrl_private = EMPTY
            for a, region in ctrl_regions:
                if a not in exit_guards:
                    ctrl_private = ctrl_private | branch_label[a]
            for inst in b.insts:
                ctrl_here = EMPTY
                for a, region in ctrl_regions:
                    ctrl_here = ctrl_here | branch_label[a]
                ctrl_here = ctrl_here | lab(inst.pred)
                v_fp = EMPTY
                if inst.kind == "load" and inst.space == "param":
                    v = EMPTY
                    for p, off in inst.params:
                        v = v | src.param_labels.get((p, off), src.param_default)
                    why_v = "parameter"
                elif inst.kind == "load":
                    cell = cell_of(inst.addr, inst.symbols)
                    v = cell_label.get(cell, EMPTY) | src.load_labels.get(cell, EMPTY)
                    if cell_kinds.get(cell) == "address-sensitive":
                        v = v | labs(inst.addr)
                    why_v = f"load from {describe_cell(cell)}"
                elif inst.kind in ("store", "atomic", "copy"):
                    if inst.kind == "copy":
                        scell = cell_of(inst.addr, inst.symbols[1:] if len(inst.symbols) > 1 else [])
                        dcell = cell_of(inst.dst_addr, inst.symbols[:1])
                        val = cell_label.get(scell, EMPTY) | src.load_labels.get(scell, EMPTY) | labs(inst.srcs)
                        if cell_kinds.get(scell) == "address-sensitive":
                            val = val | labs(inst.addr)
                        if cell_kinds.get(dcell) == "address-sensitive":
                            val = val | labs(inst.dst_addr)
                    else:
                        dcell = cell_of(inst.addr, inst.symbols)
                        val = labs(inst.srcs)
                        if cell_kinds.get(dcell) == "address-sensitive":
                            val = val | labs(inst.addr)
                    if inst.kind == "atomic" and not _commutative_exact(inst):
                        val = val | frozenset({"schedule"})
                    # a store under variant control: its cell's readers see a variant choice
                    # (a row-local in-place cell: the mask only decides whether the row is processed)
                    local = dcell[0] == "sym" and ("local_depot" in dcell[1] or inst.space == "local")
                    ctrl_cell = EMPTY if dcell in src.address_ok else (ctrl_private | lab(inst.pred) if local
                                                                       else ctrl_here)
                    newc = cell_label.get(dcell, EMPTY) | val | ctrl_cell
                    if newc != cell_label.get(dcell, EMPTY):
                        cell_label[dcell] = newc
                        changed = True
                    if inst.kind != "atomic" or not inst.dsts:
                        continue
                    v = val | frozenset({"schedule"})
                    why_v = "atomic"
                else:
                    v = labs(s for s in inst.srcs if not is_fp_reg(s))
                    v_fp = labs(s for s in inst.srcs if is_fp_reg(s))
                    for sp in inst.special:
                        v = v | src.special.get(sp, src.special.get(sp.split(".")[0], EMPTY))
                    why_v = "operand"
                    if inst.op.startswith("wgmma.mma_async"):
                        # operands read from shared memory through descriptors: any shared cell
                        for c, cl in cell_label.items():
                            if c[0] in ("sym", "unknown", "multi"):
                                v = v | cl
                        why_v = "load from shared memory (wgmma operand)"
                v = v | lab(inst.pred)
                for d in inst.dsts:
                    extra = EMPTY
                    for a, region in ctrl_regions:
                        if escapes_region(d, a):
                            extra = extra | branch_label[a]
                    own = v | extra  # labels that enter here, not carried by floating-point operands
                    nv = own | v_fp
                    if not own <= origin.get(d, EMPTY):
                        origin[d] = origin.get(d, EMPTY) | own
                        why[d] = why_v if v else "control (a variant branch chooses it)"
                        changed = True
                    if not nv <= label.get(d, EMPTY):
                        label[d] = label.get(d, EMPTY) | nv
                        changed = True
        if iterations > 200:
            break

    violations: list[Violation] = []
    fp_count = 0
    axes_seen = EMPTY
    for r, axes in label.items():
        axes_seen = axes_seen | axes
    for c, axes in cell_label.items():
        axes_seen = axes_seen | axes
    calls = []
    for b in blocks:
        for inst in b.insts:
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
            fp_defs = [d for d in inst.dsts if is_fp_reg(d) and label.get(d)]
            if not fp_defs:
                continue
            # Report where a variant value first enters floating-point data, not every value after.
            own = EMPTY
            for d in fp_defs:
                own = own | origin.get(d, EMPTY)
            if not own:
                continue
            violations.append(Violation(inst.line, inst.text, own, _reason(inst, fp_defs[0], why)))
    return FlowResult(violations, axes_seen, calls, fp_count, cell_kinds)


def _roots_of(regs, roots) -> set[tuple]:
    out: set[tuple] = set()
    for r in regs:
        out |= roots.get(r, set())
    return out


def describe_cell(cell: tuple) -> str:
    if cell[0] == "param":
        return f"param {cell[1].split('_param_')[-1] if '_param_' in cell[1] else cell[1]}+{cell[2]}"
    if cell[0] == "sym":
        return f"symbol {cell[1]}"
    return cell[0]


def _reason(inst: Inst, reg: str, why: dict[str, str]) -> str:
    w = why.get(reg, "operand")
    if w.startswith("control"):
        return "a batch-variant branch or loop bound decides this floating-point value"
    if w.startswith("load"):
        return f"floating-point value {w} carries batch-variant data (address or stored under variant control)"
    if w == "parameter":
        return "a batch-variant parameter is a floating-point operand"
    return "a batch-variant value is an operand of floating-point arithmetic"


def _commutative_exact(inst: Inst) -> bool:
    """An integer add/min/max/and/or/xor atomic whose old value is not read: the cell's final value
    is the same in every order (exact, commutative), so only the returned old value is scheduling."""
    parts = inst.op.split(".")
    if inst.fp or any(p.startswith("f") and p[1:].isdigit() for p in parts):
        return False
    return any(p in ("add", "inc", "min", "max", "and", "or", "xor") for p in parts) and \
        (inst.op.startswith("red") or not inst.dsts)
