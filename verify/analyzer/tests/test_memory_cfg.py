# domains/memory.py (pointer provenance, cells) and frontend/cfg.py (regions, normal paths, cycles).
from analyzer.domains.memory import cell, pointer_roots, roots_of, stack_offsets
from analyzer.frontend.cfg import blocks_in_cycles, control_regions, normal_paths
from analyzer.frontend.llvm import parse_llvm
from analyzer.frontend.ptx import PtxModule

from . import snippets as S

MODULE = PtxModule(S.write(S.SCALE + S.SWIZZLE + S.SUM, ".ptx"))
LLVM = {f.name: f for f in parse_llvm(S.write(S.LLVM, ".ll"))}


def _insts(f):
    return [(b.label, i) for b in f.blocks for i in b.insts]


def test_pointer_roots_ptx():
    f = MODULE.function("scale")
    roots = pointer_roots(f, _insts(f))
    assert roots["%rd5"] == {("param", "scale_param_0", 0)}  # x + tid * 4
    assert roots["%rd7"] == {("param", "scale_param_1", 0)}
    assert "%r2" not in roots  # the thread index is no pointer
    assert roots_of(["%rd5", "%rd7"], roots) == {("param", "scale_param_0", 0), ("param", "scale_param_1", 0)}


def test_cells():
    roots = {"%a": {("param", "p", 0)}, "%b": {("param", "p", 0), ("sym", "buf")}}
    assert cell(roots, set(), ["%a"], "") == ("param", "p", 0)
    assert cell(roots, {("sym", "buf")}, ["%b"], "") == ("sym", "buf")  # the root used as a pointer
    assert cell(roots, set(), ["%b"], "")[0] == "multi"
    assert cell(roots, set(), [], "buf") == ("sym", "buf")
    assert cell(roots, set(), ["%c"], "") == ("unknown",)
    swizzle = MODULE.function("swizzle")
    assert pointer_roots(swizzle, _insts(swizzle))["%r5"] == {("sym", "buf")}


def test_llvm_stack_objects():
    f = LLVM["scale"]
    insts = _insts(f)
    assert stack_offsets(f, insts) == {"%4": 0, "%5": 8}  # the Pair's float* field at byte 8
    roots = pointer_roots(f, insts)
    assert roots["%5"] == {("sym", "%4")} and roots["%0"] == {("param", "%0", 0)}


def test_control_regions():
    f = MODULE.function("scale")
    labels, succ = [b.label for b in f.blocks], {b.label: b.succs for b in f.blocks}
    exits: set[str] = set()
    assert control_regions({b.label: b for b in f.blocks}, labels, succ, exits) == {"entry": {"$__fall1"}}
    assert exits == {"entry"}  # its region runs to the kernel's end
    s = MODULE.function("sum")
    assert blocks_in_cycles([b.label for b in s.blocks], {b.label: b.succs for b in s.blocks}) == {"$L__BB1_1"}


def test_normal_paths():
    labels, succ = normal_paths(LLVM["scale"])
    assert labels == ["%entry", "%8", "%10"]  # %9 ends in unreachable: an abort path
    assert succ["%entry"] == ["%10", "%8"]
