# domains/transfer.py, transfer_ops.py and values.py: the value analysis of PTX integer registers.
from analyzer.domains.transfer import PtxEval
from analyzer.domains.values import analyze_values
from analyzer.frontend.kir import Block, Function
from analyzer.frontend.ptx import PtxModule
from analyzer.frontend.ptx_insts import Scope, parse_inst

from . import snippets as S

MODULE = PtxModule(S.write(S.SCALE + S.SWIZZLE + S.SUM, ".ptx"))


def _eval(lines: list[str], state: dict | None = None, consts: dict | None = None) -> dict:
    """The state after running PTX statements through the transfer functions."""
    insts = [parse_inst(s, Scope(), {}) for s in lines]
    ev = PtxEval(Function("f", [], [Block("entry", insts)]), consts or {}, {"%tid.x": (0, 127)})
    st = dict(state or {})
    for inst in insts:
        ev.transfer(st, inst)
    return st


def test_arithmetic_and_wrap():
    st = _eval(["mov.u32 %r1, %tid.x", "shl.b32 %r2, %r1, 2", "add.s32 %r3, %r2, 16", "mul.lo.s32 %r4, %r1, -1",
                "sub.s32 %r5, %r3, %r1", "mul.wide.u32 %rd1, %r1, 4", "add.s32 %r6, %r1, 4294967295",
                "add.u32 %r7, %r1, 4294967295", "add.s32 %r8, %r1, 2147483647"])
    assert st["%r1"] == (0, 127)
    assert st["%r2"] == (0, 508)
    assert st["%r3"] == (16, 524)
    assert st["%r4"] == (-127, 0)
    assert st["%r5"] == (-111, 524)
    assert st["%rd1"] == (0, 508)
    assert st["%r6"] == (-1, 126)  # the immediate read as an s32: -1
    assert "%r7" not in st and "%r8" not in st  # results that straddle the wrap: any value


def test_bitwise_and_masks():
    st = _eval(["mov.u32 %r1, %tid.x", "and.b32 %r2, %r1, 15", "and.b32 %r3, %r1, 255", "or.b32 %r4, %r2, 64",
                "xor.b32 %r5, %r2, 8", "shr.u32 %r6, %r1, 5", "rem.u32 %r7, %r1, 6", "div.u32 %r8, %r1, 6"])
    assert st["%r2"] == (0, 15)
    assert st["%r3"] == (0, 127)  # a low-bit mask that covers the value: the value
    assert st["%r4"] == (64, 79)  # a constant above the value's bits: a sum
    assert st["%r5"] == (0, 15)
    assert st["%r6"] == (0, 3)
    assert st["%r7"] == (0, 5)
    assert st["%r8"] == (0, 21)
    assert st[("#m", "%r2")] == 15  # known-zero bits kept beside the interval


def test_params_predicates_and_selects():
    st = _eval(["ld.param.u32 %r1, [k_param_0]", "ld.param.u32 %r2, [k_param_1]", "setp.lt.u32 %p1, %r1, 8",
                "setp.lt.u32 %p2, %r2, 8", "selp.b32 %r3, 4, 9, %p1", "selp.b32 %r4, 4, 9, %p2",
                "and.pred %p3, %p1, %p2", "not.pred %p4, %p1"],
               consts={("k_param_0", 0): 3})
    assert st["%r1"] == (3, 3) and "%r2" not in st  # a plan constant, an unknown parameter
    assert st["%p1"] == (1, 1) and st["%p2"] == (0, 1)
    assert st["%r3"] == (4, 4) and st["%r4"] == (4, 9)
    assert st["%p3"] == (0, 1) and st["%p4"] == (0, 0)


def test_refine_on_a_branch_edge():
    setp = parse_inst("setp.lt.u32 %p1, %r1, 10", Scope(), {})
    ev = PtxEval(Function("f", [], [Block("entry", [setp])]), {}, {})
    st = {"%r1": (0, 100)}
    assert ev.refine(st, setp, True)["%r1"] == (0, 9)
    assert ev.refine(st, setp, False)["%r1"] == (10, 100)
    assert ev.refine({"%r1": (20, 30)}, setp, True) is None  # the edge cannot be taken


def test_a_plan_constant_prunes_a_branch():
    f = MODULE.function("scale")
    free = analyze_values(f)
    assert sorted(free.feasible["entry"]) == ["$L__BB0_2", "$__fall1"]
    none = analyze_values(f, {("scale_param_2", 0): 0})  # n = 0: every thread is past n
    assert none.feasible["entry"] == ["$L__BB0_2"]
    assert "$__fall1" not in none.reachable


def test_loop_widening_and_addresses():
    f = MODULE.function("sum")
    info = analyze_values(f, {("sum_param_2", 0): 4})
    assert sorted(info.feasible["$L__BB1_1"]) == ["$L__BB1_1", "$__fall1"]  # the loop exits
    swizzle = MODULE.function("swizzle")
    info = analyze_values(swizzle)
    shared = {i.text.split()[0]: info.addr[id(i)] for b in swizzle.blocks for i in b.insts if i.space == "shared"}
    assert shared == {"st.shared.f32": (0, 60), "ld.shared.f32": (0, 60)}  # bytes of buf it can touch
    assert analyze_values(swizzle) is info  # memoized per (function, constants, ranges)
