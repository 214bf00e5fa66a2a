# The symbolic executions: LLVM IR (symbolic/dag.py) and PTX (symbolic/ptx_exec.py, ptx_ops.py).
import pytest

from analyzer.domains.dag_values import Unsupported, node
from analyzer.domains.ptx_dag import Dag, ExecError, Node, value_of_bytes
from analyzer.frontend.llvm import LlvmModule
from analyzer.frontend.ptx import PtxModule
from analyzer.symbolic import dag
from analyzer.symbolic.ptx_exec import Cta, run_cta
from analyzer.symbolic.ptx_memory import GlobalMemory, param_bytes
from analyzer.symbolic.ptx_ops import compile_program

from . import snippets as S

LLVM = LlvmModule(S.write(S.LLVM, ".ll"))
PTX = PtxModule(S.write(S.SCALE + S.SWIZZLE + S.SUM, ".ptx"))
BAD = PtxModule(S.write(S.PTX_HEADER + """
.visible .entry bad(
\t.param .u64 bad_param_0
)
{
\t.reg .b32 \t%r<3>;

\tmov.u32 \t%r1, %clock;
\tpopc.b32 \t%r2, %r1;
\tret;

}
""", ".ptx"))


def test_dag_run_builds_the_operation_dag():
    out = dag.run(LLVM, "madd", [("ptr", "X", 0), ("ptr", "Y", 0)])
    x = [node("in", "X", 4 * i) for i in range(3)]
    assert out == {("Y", 0): node("add", node("mul", x[0], x[1]), x[2])}  # (x0 * x1) + x2, as compiled


def test_dag_paths_and_constants():
    assert dag.call(LLVM, "pick", [2]) == 14  # table[2] << 1, the constant global read
    out = dag.run(LLVM, "scale", [("ptr", "X", 0), 3, 0])
    assert out[("X", 0)] is node("mul", node("in", "X", 0), node("in", "X", 0))
    assert ("X", 0) not in dag.run(LLVM, "scale", [("ptr", "X", 0), 3, 7])  # the default: no store
    with pytest.raises(Unsupported, match="abort"):
        dag.run(LLVM, "scale", [("ptr", "X", 0), 3, 1])  # case 1 is unreachable
    with pytest.raises(Unsupported, match="computed value"):
        dag.run(LLVM, "scale", [("ptr", "X", 0), 3, node("in", "N", 0)])  # a switch on an input


def test_dag_canonical_renames_leaves():
    v = node("add", node("in", "X", 0), node("in", "X", 4))
    renamed = dag.canonical(v, lambda base, off: ("x", off // 4))
    assert renamed is node("add", node("in", "x", 0), node("in", "x", 1))
    assert "vs" in dag.first_difference(v, node("add", node("in", "X", 0), node("in", "X", 8)))


def _run(name: str, params_of, threads: int = 16):
    """Runs one CTA of the entry on x = 16 f32 leaves, y unwritten; y's values (None: not stored)."""
    prog = compile_program(PTX.function(name), PTX)
    d, gm = Dag(), GlobalMemory()
    leaves = [Node(("leaf", "x", 0, i), 4) for i in range(16)]
    x = gm.add("x", 64, writable=False, data=[(leaf, b) for leaf in leaves for b in range(4)])
    y = gm.add("y", 64)
    run_cta(Cta(prog, threads, (0, 0, 0), (1, 1, 1), params_of(x, y), gm, d, 0))
    return leaves, d, [None if y.data[4 * i] is None else value_of_bytes(y.data[4 * i:4 * i + 4], "f32", d)
                       for i in range(16)]


def _pointers(x, y, *more):
    return [param_bytes(8, {0: (x.base, 8)}), param_bytes(8, {0: (y.base, 8)})] + list(more)


def test_ptx_cta_masked_elements():
    leaves, d, ys = _run("scale", lambda x, y: _pointers(x, y, param_bytes(4, {0: (10, 4)})))
    assert ys[:10] == [d.f32_op("add", leaf, leaf) for leaf in leaves[:10]]
    assert ys[10:] == [None] * 6  # tid >= n stores nothing


def test_ptx_cta_shared_swizzle():
    leaves, _, ys = _run("swizzle", _pointers)
    assert ys == leaves  # each thread reads back its own swizzled slot


def test_ptx_cta_loop():
    leaves, d, ys = _run("sum", lambda x, y: _pointers(x, y, param_bytes(4, {0: (3, 4)})), threads=16)
    zero = d.const(0, 4)
    want = d.f32_op("add", d.f32_op("add", d.f32_op("add", zero, leaves[0]), leaves[1]), leaves[2])
    assert ys == [want] * 16


def test_ptx_refuses_what_it_does_not_model():
    with pytest.raises(ExecError, match="clock"):
        compile_program(BAD.function("bad"), BAD)
