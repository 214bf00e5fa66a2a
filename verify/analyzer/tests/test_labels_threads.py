# domains/labels.py and domains/threads.py: the labels' pseudo-axes, the tid bit fields, row masks.
from analyzer.domains.labels import LANE_BITS, PSEUDO, THREAD, TID_BITS, uniform_for
from analyzer.domains.threads import row_bound_compares, thread_fields
from analyzer.domains.values import analyze_values
from analyzer.frontend.ptx import PtxModule

from . import snippets as S

MODULE = PtxModule(S.write(S.SCALE + S.FIELDS, ".ptx"))


def _insts(name: str):
    f = MODULE.function(name)
    return f, [(b.label, i) for b in f.blocks for i in b.insts]


def test_pseudo_axes():
    assert THREAD in PSEUDO and set(TID_BITS) <= PSEUDO and "rows" not in PSEUDO
    assert LANE_BITS == frozenset(f"tid{i}" for i in range(5))


def test_uniform_for():
    # the branch reads tid bit 5 (the warp), the cell's address bits 0-4 (the lane): uniform
    assert uniform_for(frozenset({"rows", "tid5"}), frozenset({"tid0", "tid1"}))
    # a bit both read: threads that differ in it write and read different cells
    assert not uniform_for(frozenset({"tid1"}), frozenset({"tid1"}))
    assert not uniform_for(frozenset({"schedule"}), frozenset())
    assert not uniform_for(frozenset({THREAD}), frozenset())
    assert not uniform_for(frozenset(), frozenset({THREAD}))


def test_thread_fields():
    f, insts = _insts("fields")
    fields, broadcasts = thread_fields(f, insts, analyze_values(f))
    by_text = {i.text.split("\t")[0].strip() + " " + i.dsts[0]: sorted(fields[id(i)]) for _, i in insts
               if id(i) in fields}
    assert by_text["shr.u32 %r2"] == ["tid5", "tid6"]  # the warp of 128 threads
    assert by_text["and.b32 %r3"] == [f"tid{i}" for i in range(5)]  # the lane
    assert by_text["mov.u32 %r1"] == [f"tid{i}" for i in range(7)]
    assert not broadcasts


def test_row_bound_compares():
    f, insts = _insts("scale")
    rows = {("scale_param_2", 0)}  # n: the row count
    masks = [i.text for _, i in insts if id(i) in row_bound_compares(f, insts, rows)]
    assert masks == ["setp.ge.u32 \t%p1, %r2, %r1"]
    assert row_bound_compares(f, insts, set()) == set()
