# The front end: the PTX reader (ptx.py, ptx_insts.py), the LLVM reader (llvm.py, llvm_insts.py,
# llvm_types.py) and kir's operand splitting.
import pytest

from analyzer.frontend.kir import split_outside
from analyzer.frontend.llvm import LlvmModule, parse_llvm
from analyzer.frontend.llvm_types import Unsupported, field_offsets, split_typed, type_align, type_size
from analyzer.frontend.ptx import PtxModule, parse_ptx, reg_type
from analyzer.frontend.ptx_insts import Scope, parse_inst

from . import snippets as S

PTX = S.write(S.SCALE + S.SWIZZLE + S.FIELDS, ".ptx")


def test_split_outside():
    assert split_outside("a, [b, c], {d, e}", "{[", "}]") == ["a", "[b, c]", "{d, e}"]
    assert split_outside("i32 %x, <2 x i32> <i32 1, i32 2>", "<", ">") == ["i32 %x", "<2 x i32> <i32 1, i32 2>"]


def test_ptx_module():
    m = PtxModule(PTX)
    assert [e.name for e in m.entries] == ["scale", "swizzle", "fields"]
    assert m.entries[0].params == ["scale_param_0", "scale_param_1", "scale_param_2"]
    assert m.entries[0].ntid == (16, 1, 1)
    assert m.symbols == {"buf": "shared"}
    assert m.entries[0].symbols == {} and m.entries[1].symbols == {"buf": "shared"}  # declared before it
    assert m.shared_declarations() == {"buf": (4, 64, 0)}
    assert [f.name for f in parse_ptx(PTX)[0]] == ["scale", "swizzle", "fields"]
    assert m.function("swizzle") is m.function("swizzle")  # parsed once


def test_ptx_blocks_and_kinds():
    f = PtxModule(PTX).function("scale")
    assert [b.label for b in f.blocks] == ["entry", "$__fall1", "$L__BB0_2"]
    assert f.blocks[0].succs == ["$L__BB0_2", "$__fall1"]  # a guarded branch falls through
    kinds = [(i.op, i.kind) for i in f.blocks[0].insts]
    assert kinds[:3] == [("ld.param.u64", "load")] * 2 + [("ld.param.u32", "load")]
    assert f.blocks[0].insts[0].params == [("scale_param_0", 0)]
    branch = f.blocks[0].insts[-1]
    assert (branch.kind, branch.pred, branch.targets) == ("branch", "%p1", ["$L__BB0_2"])
    body = {i.op: i for i in f.blocks[1].insts}
    assert body["ld.global.f32"].addr == ["%rd5"] and body["ld.global.f32"].fp_dst
    assert body["add.f32"].fp and body["add.f32"].srcs == ["%f1", "%f1"]
    assert body["st.global.f32"].kind == "store" and body["st.global.f32"].width == 4
    assert reg_type(f, "%f2") == "f32" and reg_type(f, "%rd1") == "b64"


def test_ptx_scopes_and_symbols():
    f = PtxModule(PTX).function("fields")
    setp = next(i for b in f.blocks for i in b.insts if i.op.startswith("setp"))
    assert setp.dsts == ["p#s1"] and f.reg_types["p#s1"] == "pred"  # the inline-asm scope's own register
    mov = PtxModule(PTX).function("swizzle").blocks[0].insts
    assert next(i for i in mov if i.text.startswith("mov.u32 \t%r4")).symbols == ["buf"]


@pytest.mark.parametrize("stmt, kind", [
    ("bar.sync 0", "barrier"), ("membar.gl", "barrier"), ("call.uni foo, (%r1)", "call"),
    ("atom.global.add.u32 %r1, [%rd1], 1", "atomic"), ("red.global.add.f32 [%rd1], %f1", "atomic"),
    ("cp.async.cg.shared.global [%r1], [%rd1], 16", "copy"), ("cp.async.wait_all", "barrier"),
    ("mbarrier.try_wait.parity.shared.b64 %p1, [%r1], %r2", "other"), ("wgmma.fence.sync.aligned", "barrier"),
    ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2,%r3,%r4}, {%r5,%r6}, "
     "{%f1,%f2,%f3,%f4}", "arith"), ("exit", "ret"), ("cvta.to.global.u64 %rd1, %rd2", "move")])
def test_ptx_classifier(stmt, kind):
    inst = parse_inst(stmt, Scope(), {})
    assert inst.kind == kind
    if inst.op.startswith("mma"):
        assert inst.fp and inst.dsts == ["%f1", "%f2", "%f3", "%f4"] and "%r5" in inst.srcs
    if inst.op.startswith("atom"):
        assert inst.dsts == ["%r1"] and inst.addr == ["%rd1"] and not inst.fp
    if inst.op.startswith("red"):
        assert inst.fp
    if inst.op.startswith("cp.async.cg"):
        assert (inst.dst_space, inst.space, inst.width, inst.dst_addr) == ("shared", "global", 16, ["%r1"])


def test_llvm_module():
    m = LlvmModule(S.write(S.LLVM, ".ll"))
    assert m.types == {"%struct.Pair": "{ i32, float* }"}
    assert set(m.funcs) == {"scale", "madd", "pick"}
    f = m.funcs["scale"]
    assert f.params == ["%0", "%1", "%2"] and f.param_types["%0"] == "float*"
    switch = next(t for t in f.body if t.strip().startswith("switch"))
    assert "label %8" in switch and "label %9" in switch  # its case lines joined to it
    assert m.global_element("@table", 4, 4) == 5
    with pytest.raises(Unsupported):
        m.global_element("@table", 2, 4)  # not an element


def test_parse_llvm():
    funcs = {f.name: f for f in parse_llvm(S.write(S.LLVM, ".ll"))}
    f = funcs["scale"]
    assert [b.label for b in f.blocks] == ["%entry", "%8", "%9", "%10"]
    assert f.blocks[0].succs == ["%10", "%8", "%9"]  # the switch's default and cases
    switch = f.blocks[0].insts[-1]
    assert (switch.kind, switch.pred) == ("branch", "%2")
    gep = f.blocks[0].insts[1]
    assert (gep.op, gep.offset, gep.args) == ("getelementptr", 8, ["const", "%4"])
    assert f.reg_types["%7"] == "fp" and f.blocks[0].insts[4].fp
    assert f.blocks[2].insts[0].kind == "ret" and f.blocks[2].insts[0].op == "unreachable"
    madd = funcs["madd"].blocks[0].insts
    assert [i.kind for i in madd] == ["load", "move", "load", "arith", "move", "load", "arith", "store", "ret"]


def test_llvm_types():
    types = {"%struct.Pair": "{ i32, float* }"}
    assert type_size("%struct.Pair", types) == 16 and type_align("%struct.Pair", types) == 8
    assert field_offsets("{ i8, i32, i16 }", {}) == [0, 4, 8] and type_size("{ i8, i32, i16 }", {}) == 12
    assert field_offsets("<{ i8, i32 }>", {}) == [0, 1]  # packed
    assert type_size("<8 x float>", {}) == 32 and type_size("[3 x i64]", {}) == 24
    assert split_typed("[2 x i32] [i32 1, i32 2]") == ("[2 x i32]", "[i32 1, i32 2]")
    assert split_typed("i32 noundef %x") == ("i32 noundef", "%x")
    with pytest.raises(Unsupported):
        type_size("x86_amx", {})
