# The checks that compare DAGs: the CPU matmul's micro-kernels (checks/microkernels.py).
from analyzer.checks import microkernels

from . import snippets as S


def test_micro_kernels_compared_element_by_element():
    clean = S.write(S.micro_kernels(False), ".ll")
    names, problems = microkernels.compare(clean, [2])
    assert [microkernels._rc(n) for n in names] == [(1, 1), (1, 2)]
    assert problems == []
    planted = S.write(S.micro_kernels(True), ".ll")
    names, problems = microkernels.compare(planted, [2])
    assert problems == ["dot_block<1,2> element (0,1) at k=2 with bias differs from dot_block<1,1>'s",
                        "dot_block<1,2> element (0,1) at k=2 differs from dot_block<1,1>'s"]
    assert microkernels.compare(clean, [2], table="kOtherTable") == ([], ["kOtherTable not found in the IR"])


def test_caches_keyed_by_id_hold_their_object():
    # A module freed and another allocated at its address must not get its compiled functions.
    from analyzer.frontend.llvm import LlvmModule
    from analyzer.symbolic import dag
    name = "_ZN5vosti12_GLOBAL__N_19dot_blockILi1ELi2EEEvPKflS3_lS3_Pfl"
    clean, planted = LlvmModule(S.write(S.micro_kernels(False), ".ll")), LlvmModule(S.write(S.micro_kernels(True), ".ll"))
    compiled = dag._compiled(clean, name)
    dag._COMPILED[(id(planted), name)] = (clean, compiled)  # what an id reused after a free would find
    assert dag._compiled(planted, name) is not compiled
    args = [("ptr", "X", 0), 2, ("ptr", "W", 0), 2, None, ("ptr", "Y", 0), 4]
    assert dag.run(clean, name, args)[("Y", 4)] is not dag.run(planted, name, args)[("Y", 4)]
