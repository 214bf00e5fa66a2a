# Control-flow facts of a kir.Function that the analyses share: post-dominators and the regions a
# branch controls, the blocks that lie on a cycle, and (LLVM) the blocks on paths that return
# normally (the others end in an abort or a throw: a failed check).
from __future__ import annotations

from .kir import Function


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


def normal_paths(func: Function) -> tuple[list[str], dict[str, list[str]]]:
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


def blocks_in_cycles(labels: list[str], succ: dict[str, list[str]]) -> set[str]:
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
