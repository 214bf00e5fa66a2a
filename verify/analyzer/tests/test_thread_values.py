# domains/thread_values.py: registers that are functions of the thread index, evaluated per thread.
from analyzer.domains.thread_values import ThreadValues
from analyzer.frontend.kir import Block, Function
from analyzer.frontend.ptx_insts import Scope, parse_inst


def _values(lines: list[str], threads: int = 16, consts: dict | None = None) -> ThreadValues:
    insts = [parse_inst(s, Scope(), {"buf": "shared"}) for s in lines]
    f = Function("f", [], [Block("entry", insts)], symbols={"buf": "shared"})
    return ThreadValues(f, {"entry": []}, consts or {}, {"%tid.x": (0, threads - 1)})


def test_swizzle_per_thread():
    tv = _values(["mov.u32 %r1, %tid.x", "xor.b32 %r2, %r1, 8", "shl.b32 %r3, %r2, 2", "mov.u32 %r4, buf",
                  "add.s32 %r5, %r4, %r3", "st.shared.f32 [%r5], %f1"])
    vals, bits = tv._values("%r2", 0)
    assert bits == 32 and vals == [t ^ 8 for t in range(16)]
    assert tv.interval("%r5", "entry", 5) == (0, 60)
    assert tv.interval("%r5", "entry", 4) is None  # read before its definition ran


def test_select_of_a_thread_bit():
    # x + (bit ? -8 : 8): the swizzle written as nvcc writes it; intervals lose the relation
    tv = _values(["mov.u32 %r1, %tid.x", "and.b32 %r2, %r1, 8", "setp.eq.s32 %p1, %r2, 0",
                  "selp.b32 %r3, 8, -8, %p1", "add.s32 %r4, %r1, %r3"])
    assert tv.interval("%r4", "entry", 5) == (0, 15)


def test_not_a_function_of_the_thread():
    tv = _values(["mov.u32 %r1, %tid.x", "ld.param.u32 %r2, [k_param_0]", "add.s32 %r3, %r1, %r2",
                  "add.s32 %r4, %r4, 1", "ld.param.u32 %r5, [k_param_1]", "add.s32 %r6, %r1, %r5"],
                 consts={("k_param_1", 0): 100})
    assert tv.interval("%r3", "entry", 3) is None  # a parameter no plan fixes
    assert tv.interval("%r4", "entry", 4) is None  # defined from itself (a loop counter)
    assert tv.interval("%r6", "entry", 6) == (100, 115)  # a parameter the plan fixes
    assert _values(["mov.u32 %r1, %tid.x"], threads=2048).interval("%r1", "entry", 1) is None  # too many threads


def test_signed_and_wide():
    tv = _values(["mov.u32 %r1, %tid.x", "sub.s32 %r2, %r1, 8", "shr.s32 %r3, %r2, 1",
                  "mul.wide.s32 %rd1, %r2, 4", "cvt.s64.s32 %rd2, %r2"])
    assert tv._values("%r3", 0)[0][:2] == [(-4) & 0xFFFFFFFF, (-4) & 0xFFFFFFFF]  # arithmetic shift
    assert tv.interval("%r2", "entry", 5) is None  # its hull straddles the sign bit
    assert tv._values("%rd1", 0) == ([(4 * (t - 8)) & (2 ** 64 - 1) for t in range(16)], 64)
    assert tv._values("%rd2", 0)[0][0] == (-8) & (2 ** 64 - 1)
