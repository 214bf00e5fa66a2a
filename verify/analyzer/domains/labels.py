# The labels of the information-flow analysis (checks/flow.py): sets of variation axes (rows, row,
# chunk, pages, plan, threads, padding, schedule) a value carries, plus pseudo-axes that say which
# threads of one CTA can hold different values: "tid<i>", through bit i of %tid.x; "thread",
# otherwise (an elected lane, %tid.y ...). Pseudo-axes are never a violation by themselves; they
# say which threads of a CTA can take different sides of a branch.
from __future__ import annotations

EMPTY: frozenset[str] = frozenset()
THREAD = "thread"
TID_BITS = tuple(f"tid{i}" for i in range(10))
PSEUDO = frozenset((THREAD,) + TID_BITS)
LANE_BITS = frozenset(TID_BITS[:5])  # the bits of %tid.x that tell the lanes of a warp apart
ROW_BOUND_AXES = frozenset({"row", "plan", "rows", "padding"})  # what a row mask may compare


def uniform_for(branch: frozenset[str], addresses: frozenset[str]) -> bool:
    """A branch that every pair of threads writing and reading one cell decides alike: it depends on
    no thread-variant input but bits of %tid.x that neither address depends on (the threads that
    differ in those bits touch the same cells), and on no scheduling state."""
    if THREAD in branch or "schedule" in branch or THREAD in addresses:
        return False
    return not (branch & addresses & PSEUDO)
