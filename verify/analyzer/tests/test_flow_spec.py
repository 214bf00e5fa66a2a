# The spec (spec/loader.py, spec/sources.py) and the information-flow check (checks/flow.py) on
# small kernels: what a variant parameter may reach (a mask, an address) and what it may not (a
# loop bound of a floating-point sum).
import pytest

from analyzer.checks import flow
from analyzer.checks.kernels import KernelResult, fp_reg_predicate, verdict
from analyzer.frontend.ptx import PtxModule
from analyzer.frontend.ptx_insts import Scope, parse_inst
from analyzer.frontend.kir import Block, Function
from analyzer.spec import loader, sources

from . import snippets as S

PTX = PtxModule(S.write(S.SCALE + S.SWIZZLE + S.SUM, ".ptx"))
SPEC = loader.load_spec(S.write("""
[struct.Args]
fields = ["x: ptr", "n: i32 @rows,padding extent", "scale: f32"]

[[kernel]]
name = "scale"
entry = "^scale$"
artifacts = "ptx:snippet.ptx"
params = ["x", "y", "n @rows,padding extent"]

[[kernel]]
name = "swizzle"
entry = "^swizzle$"
artifacts = "ptx:snippet.ptx"
params = ["x", "y"]

[[kernel]]
name = "sum"
entry = "^sum$"
artifacts = "ptx:snippet.ptx"
params = ["x", "y", "n @rows,padding"]
[[kernel.plan]]
name = "n fixed"
consts = { n = 4 }

[[kernel]]
name = "by value"
entry = "^byvalue$"
artifacts = "ptx:snippet.ptx"
params = ["a: Args"]
""", ".toml"))
ENTRY = {k.name: k for k in SPEC.kernels}


def _flow(name: str, plan=None) -> flow.FlowResult:
    f = PTX.function(name)
    src = sources.sources_for(SPEC, ENTRY[name], f.params, "ptx", plan)
    return flow.analyze(f, src, fp_reg_predicate(f))


def test_spec_entries():
    p = ENTRY["scale"].params[2]
    assert (p.name, p.value_axes, p.extent) == ("n", frozenset({"rows", "padding"}), True)
    assert [(off, f.name) for off, f in SPEC.struct_offsets["Args"]] == [(0, "x"), (8, "n"), (12, "scale")]
    assert ENTRY["sum"].plans[0].consts == {"n": 4}
    with pytest.raises(ValueError, match="unknown variation axis"):
        loader.load_spec(S.write('[[kernel]]\nname = "k"\nentry = "k"\nartifacts = "ptx:k"\nparams = ["m @rowz"]\n',
                                 ".toml"))


def test_sources():
    src = sources.sources_for(SPEC, ENTRY["scale"], PTX.function("scale").params, "ptx")
    assert src.param_labels[("scale_param_2", 0)] == frozenset({"rows", "padding"})
    assert src.extents == {("scale_param_2", 0)} and src.special["%ctaid"] == frozenset({"row"})
    fixed = sources.sources_for(SPEC, ENTRY["sum"], PTX.function("sum").params, "ptx", ENTRY["sum"].plans[0])
    assert fixed.consts == {("sum_param_2", 0): 4} and fixed.param_labels[("sum_param_2", 0)] == frozenset()
    with pytest.raises(ValueError, match="lists 3 parameters"):
        sources.sources_for(SPEC, ENTRY["scale"], ["a", "b"], "ptx")


def test_param_types_checked():
    good = parse_inst("ld.param.u32 %r1, [byvalue_param_0+8]", Scope(), {"byvalue_param_0": "param"})
    bad = parse_inst("ld.param.u64 %rd1, [byvalue_param_0+8]", Scope(), {"byvalue_param_0": "param"})
    for inst, ok in ((good, True), (bad, False)):
        f = Function("byvalue", ["byvalue_param_0"], [Block("entry", [inst])])
        if ok:
            sources.check_param_types(SPEC, ENTRY["by value"], f)
        else:
            with pytest.raises(ValueError, match="field n"):
                sources.check_param_types(SPEC, ENTRY["by value"], f)


def test_a_row_mask_is_proven():
    out = _flow("scale")
    assert out.violations == [] and out.axes_seen == frozenset({"rows", "padding"})
    assert out.fp_instructions == 1


def test_a_swizzled_shared_slot_is_proven():
    out = _flow("swizzle")
    assert out.violations == []
    assert out.cells[("sym", "buf", 0, 64)] == "address-sensitive"


def test_a_variant_loop_bound_is_not():
    out = _flow("sum")
    assert {v.line for v in out.violations} and all(v.axes == frozenset({"rows", "padding"}) for v in out.violations)
    assert "loop bound" in out.violations[0].why
    assert _flow("sum", ENTRY["sum"].plans[0]).violations == []  # a plan that fixes n


def test_verdicts():
    res = KernelResult(ENTRY["sum"], functions=["f"])
    res.violations = [("sum", v) for v in _flow("sum").violations]
    res.axes_seen = frozenset({"rows", "padding"})
    assert verdict(res, "rows") == "NOT PROVEN" and verdict(res, "row") == "proven (no input)"
    assert not res.proven()
    ok = KernelResult(ENTRY["scale"], functions=["f"], axes_seen=frozenset({"rows"}))
    assert ok.proven() and verdict(ok, "rows") == "proven"
    assert verdict(KernelResult(ENTRY["scale"], errors=["x"]), "rows") == "ERROR"
