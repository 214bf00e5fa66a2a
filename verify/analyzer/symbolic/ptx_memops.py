# Memory instructions of the PTX symbolic execution (ptx_ops.py's table): ld and st of every state
# space the executor models (byte entries; a 4-byte f32 read back as its node), cp.async (executed
# at issue: its commit and wait are no-ops, the kernel's barrier protocol assumed), and the integer
# atom.add the split GEMM's tile counters use (executed in thread order).
from __future__ import annotations

import re

from ..domains.ptx_dag import M32, ExecError, bytes_of_value, value_of_bytes
from ..frontend.kir import Inst, split_outside
from .ptx_memory import gm_read
from .ptx_program import Const, Program, address_getter, dst, getter, imm, operand, vector


_ELEM = {"u8": 1, "s8": 1, "b8": 1, "u16": 2, "s16": 2, "b16": 2, "u32": 4, "s32": 4, "b32": 4, "f32": 4,
         "u64": 8, "s64": 8, "b64": 8}


def _access(op: str) -> tuple[str, int, int]:
    """(space, element bytes, vector count) of ld/st."""
    parts = op.split(".")
    space = next((p for p in parts[1:] if p in ("global", "shared", "param", "local", "const")), "")
    if not space:
        raise ExecError(f"{op}: a generic address space is not modelled")
    vec = next((int(p[1:]) for p in parts if re.match(r"^v[248]$", p)), 1)
    ty = parts[-1]
    if ty not in _ELEM:
        raise ExecError(f"{op} not modelled")
    allowed = {"ld", "st", "global", "shared", "param", "local", "cg", "ca", "cs", "cv", "wb", "wt", "nc", "lu",
               "v2", "v4", ty}
    if any(p not in allowed for p in parts):
        raise ExecError(f"{op} not modelled")
    return space, _ELEM[ty], vec


def load_store(prog: Program, inst: Inst):
    op, args = inst.op, inst.args
    space, elem, vec = _access(op)
    is_load = op.startswith("ld.")
    kind = "f32" if op.endswith(".f32") else "int"
    if is_load:
        dsts = [dst(prog, t) for t in
                (split_outside(args[0].strip()[1:-1], "{[", "}]") if args[0].startswith("{") else [args[0]])]
        addr = address_getter(prog, args[1])
        if len(dsts) != vec:
            raise ExecError(f"{op}: {len(dsts)} destinations")

        def load(cta, tids):
            A = addr(cta)
            for t in tids:
                entries = cta.read(space, A[t], elem * vec, t)
                for j, d in enumerate(dsts):
                    cta.dst(d)[t] = value_of_bytes(entries[j * elem:(j + 1) * elem], kind, cta.dag)
        return load
    addr = address_getter(prog, args[0])
    srcs = [getter(s) for s in vector(prog, args[1])]
    if len(srcs) != vec:
        raise ExecError(f"{op}: {len(srcs)} sources")

    def store(cta, tids):
        A = addr(cta)
        S = [g(cta) for g in srcs]
        for t in tids:
            entries = []
            for s in S:
                entries += bytes_of_value(s[t], elem)
            cta.write(space, A[t], entries, t)
    return store


def cp_async(prog: Program, inst: Inst):
    """cp.async.{ca,cg}.shared.global [dst], [src], size{, src_size}: src_size bytes copied, the rest
    of size zero-filled; executed at issue."""
    args = inst.args
    if len(args) not in (3, 4) or inst.op not in ("cp.async.cg.shared.global", "cp.async.ca.shared.global"):
        raise ExecError(f"{inst.op} {', '.join(args)} not modelled")
    dst, src = address_getter(prog, args[0]), address_getter(prog, args[1])
    size = imm(args[2])
    if size not in (4, 8, 16):
        raise ExecError(f"cp.async of {args[2]} bytes not modelled")
    src_size = getter(operand(prog, args[3])) if len(args) == 4 else (lambda cta: Const(size))

    def copy(cta, tids):
        D, S, N = dst(cta), src(cta), src_size(cta)
        gm = cta.gmem
        smem = cta.smem
        base = cta.smem_base
        for t in tids:
            n = N[t]
            if n > size:
                raise ExecError(f"cp.async src-size {n} > {size}")
            if n and S[t] % size:
                raise ExecError(f"cp.async from global address {S[t]:#x}, not {size}-byte aligned")
            if cta.speculating:
                raise ExecError("cp.async under a branch on a floating-point value (not modelled)")
            entries = gm_read(gm, S[t], n) + [0] * (size - n) if n else [0] * size
            a = D[t] - base
            if a < 0 or a + size > len(smem) or D[t] % size:
                raise ExecError(f"cp.async to shared address {D[t]:#x} outside the CTA's shared memory or unaligned")
            smem[a:a + size] = entries
            cta.decoded_rows.pop(D[t] & ~15, None)
    return copy




def atom(prog: Program, inst: Inst):
    if inst.op != "atom.global.add.u32" or len(inst.args) != 3:
        raise ExecError(f"{inst.op} not modelled")
    d = dst(prog, inst.args[0])
    addr = address_getter(prog, inst.args[1])
    val = getter(operand(prog, inst.args[2]))

    def atom(cta, tids):
        A, V, D = addr(cta), val(cta), cta.dst(d)
        for t in sorted(tids):
            old = value_of_bytes(cta.read("global", A[t], 4), "int", cta.dag)
            if type(old) is not int:
                raise ExecError("atom.add on a value that is not a concrete integer")
            cta.write("global", A[t], list(((old + V[t]) & M32).to_bytes(4, "little")))
            D[t] = old
    return atom
