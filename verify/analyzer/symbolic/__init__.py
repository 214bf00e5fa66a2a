# Symbolic execution: LLVM IR (dag.py) and PTX (ptx_exec.py, ptx_ops.py) over the domains' values.
