# The refinements of the information-flow analysis (flow.py) that clear a label where it cannot
# change a value, each sound under the assumptions docs/VERIFICATION.md states:
#   write cover   a read that an unguarded write of its cell precedes on every path from the entry
#                 (at branches only %tid.x decides, a writing thread takes its own side in every
#                 pass) sees this pass's write, whichever way the write's branch went elsewhere;
#   same copy     a copy d = x inside a variant branch's region where d already equals x at the
#                 branch (available copies, on every path from the entry), x is not redefined in
#                 the region and every definition of d there is that copy: d leaves the region with
#                 the same value whichever way the branch went.
# Refinements is a mixin of flow._Analysis: it reads the analysis' blocks, accesses and labels.
from __future__ import annotations

from ..domains.labels import TID_BITS
from ..frontend.kir import Inst


class Refinements:
    """The write-cover search and the available-copies rule, over flow._Analysis' state."""

    def _covered(self, a, ws: list) -> bool:
        """Every path from the entry to the read passes an unguarded write of the cell first."""
        rb = self.block_of[id(a.inst)]
        cover_blocks = set()
        for w in ws:
            if w.inst.pred is not None or w.write is False:
                continue
            wb = self.block_of[id(w.inst)]
            if wb == rb:
                if self.position[id(w.inst)] < self.position[id(a.inst)]:
                    return True
                continue
            cover_blocks.add(wb)
        key = (rb, frozenset(cover_blocks))
        if key not in self.cover_cache:
            self.cover_cache[key] = self._cover_search(rb, cover_blocks)
        return self.cover_cache[key]

    def _cover_search(self, rb: str, cover_blocks: set[str]) -> bool:
        labels, succ = self.labels, self.succ
        # Blocks from which a write is reachable without passing the read: at a branch that only
        # the thread index decides, a writing thread takes a side that leads to its write, the same
        # in every pass.
        # (The blocks other than the read's that reach a writing block through such blocks: a
        # backward search from the writes, never through the read's block.)
        to_cover = set(cover_blocks)
        back = list(cover_blocks)
        while back:
            for b in self.pred.get(back.pop(), ()):
                if b not in to_cover and b != rb:
                    to_cover.add(b)
                    back.append(b)
        seen = {labels[0]} if labels[0] not in cover_blocks else set()
        work = list(seen)
        while work:
            b = work.pop()
            if b == rb:
                return False
            nxt = succ.get(b, ())
            bp = self.branch_pred.get(b)
            if bp and self.label.get(bp) and self.label[bp] <= frozenset(TID_BITS):
                nxt = [c2 for c2 in nxt if c2 in to_cover] or nxt
            for c2 in nxt:
                if c2 not in seen and c2 not in cover_blocks:
                    seen.add(c2)
                    work.append(c2)
        return labels[0] not in cover_blocks

    # ---- copies that cannot change a register (the control rule's exception) ----
    @staticmethod
    def _copy_key(inst: Inst) -> tuple | None:
        """(destination, source) of an unguarded mov of one register or one immediate, else None."""
        if inst.kind != "move" or inst.pred or len(inst.dsts) != 1 or not inst.op.startswith("mov") \
                or inst.special or inst.symbols:
            return None
        if len(inst.srcs) == 1:
            return (inst.dsts[0], ("reg", inst.srcs[0]))
        if not inst.srcs and len(inst.args) == 2:
            return (inst.dsts[0], ("imm", inst.args[1].strip()))
        return None

    def _copies_at_branch(self) -> dict[str, frozenset]:
        """Available copies: for each block, the (d, source) pairs with d equal to the source at its
        end on every path from the entry (forward, intersection at joins)."""
        if self.copies_out is not None:
            return self.copies_out
        out: dict[str, frozenset | None] = {lab: None for lab in self.labels}  # None: not reached yet
        entry = self.labels[0] if self.labels else None

        def transfer(lab: str, cur: set) -> frozenset:
            for inst in self.blocks[lab].insts:
                if id(inst) in self.dead:
                    continue
                for x in inst.dsts:
                    cur = {c for c in cur if c[0] != x and c[1] != ("reg", x)}
                key = self._copy_key(inst)
                if key and key[1] != ("reg", key[0]):
                    cur.add(key)
            return frozenset(cur)

        changed = True
        while changed:
            changed = False
            for lab in self.labels:
                ins = [out[q] for q in self.pred.get(lab, []) if out[q] is not None]
                if lab == entry:
                    cur: set = set()
                elif not ins:
                    continue
                else:
                    cur = set(ins[0]).intersection(*ins[1:])
                new = transfer(lab, cur)
                if new != out[lab]:
                    out[lab] = new
                    changed = True
        self.copies_out = {lab: v or frozenset() for lab, v in out.items()}
        return self.copies_out

    def _same_copy(self, inst: Inst, d: str, a: str) -> bool:
        """Whether inst's definition of d inside branch a's region leaves d as it was at the branch."""
        key = self._copy_key(inst)
        if key is None or key[0] != d:
            return False
        if (id(inst), a) in self.same_copy:
            return self.same_copy[(id(inst), a)]
        ok = key in self._copies_at_branch().get(a, frozenset())
        src = key[1][1] if key[1][0] == "reg" else None
        for lab in self.regions[a] if ok else ():
            for other in self.blocks[lab].insts:
                if id(other) in self.dead:
                    continue
                if (d in other.dsts and self._copy_key(other) != key) or (src is not None and src in other.dsts):
                    ok = False
                    break
            if not ok:
                break
        self.same_copy[(id(inst), a)] = ok
        return ok
