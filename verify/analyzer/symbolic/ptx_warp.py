# Warp-collective instructions of the PTX symbolic execution (ptx_ops.py's table), each run once per
# warp with every lane present, by the PTX ISA's fragment layouts: shfl.sync (bfly, idx), ldmatrix
# (and .trans), mma.sync m16n8k16 (each element the node mma(C, its A row, its B column)), and
# wgmma m64nNk16 per warp (each k16 step the node of mma.sync's step on the same operands; its
# shared-memory operands read through their descriptors, the 128-byte swizzle only).
from __future__ import annotations

import re

from ..domains.ptx_dag import M32, MMA_OP, Bytes, Dag, ExecError, Node, bf16_halves, half, register_of
from ..frontend.kir import Inst, split_outside
from .ptx_program import Program, address_getter, dst, getter, imm, operand


def shfl(prog: Program, inst: Inst):
    """shfl.sync.{bfly,idx}.b32 d|p, a, b, c, membermask over the whole warp (membermask -1, c = 31:
    one segment of 32 lanes): lane l receives a of lane l ^ b (bfly) or of lane b (idx); p is 1
    (the source lane is always in the segment). PTX ISA, "Data Movement: shfl.sync"."""
    mode = inst.op.split(".")[2]
    if inst.op != f"shfl.sync.{mode}.b32" or mode not in ("bfly", "idx") or len(inst.args) != 5:
        raise ExecError(f"{inst.op} not modelled")
    outs = inst.args[0].split("|")
    d = dst(prog, outs[0])
    p = dst(prog, outs[1]) if len(outs) == 2 else None
    a, b, c, mask = [getter(operand(prog, x)) for x in inst.args[1:]]

    def run(cta, wb):
        A, B, C, Mk = a(cta), b(cta), c(cta), mask(cta)
        D = cta.dst(d)
        got = []
        for lane in range(32):
            t = wb + lane
            if C[t] != 31 or Mk[t] & M32 != M32:
                raise ExecError(f"{inst.op} with c = {C[t]:#x}, membermask {Mk[t]:#x} not modelled")
            src = lane ^ (B[t] & 31) if mode == "bfly" else B[t] & 31
            got.append(A[wb + src])
        D[wb:wb + 32] = got
        if p is not None:
            cta.dst(p)[wb:wb + 32] = [1] * 32
    return run


def ldmatrix(prog: Program, inst: Inst):
    """ldmatrix.sync.aligned.m8n8.{x1,x2,x4}[.trans].shared.b16: matrix i's row j comes from lane
    8i + j's address (16 bytes); lane l receives, in register i, bytes 4(l%4)..+4 of matrix i's row
    l/4; with .trans the matrix transposed: elements 2(l%4) and 2(l%4) + 1 of column l/4 (each two
    bytes of its row) (PTX ISA, "Warp-level matrix load instruction: ldmatrix")."""
    parts = inst.op.split(".")
    num = {"x1": 1, "x2": 2, "x4": 4}.get(parts[4])
    trans = parts[5:6] == ["trans"]
    if trans:
        parts = parts[:5] + parts[6:]
    if num is None or parts[5:] != ["shared", "b16"]:
        raise ExecError(f"{inst.op} not modelled")
    dsts = [dst(prog, t) for t in split_outside(inst.args[0].strip()[1:-1], "{[", "}]")]
    if len(dsts) != num:
        raise ExecError(f"{inst.op}: {len(dsts)} destinations")
    addr = address_getter(prog, inst.args[1])
    if trans:
        return ldmatrix_trans(dsts, addr, num)

    def run(cta, warp_base):
        A = addr(cta)
        dag, decoded = cta.dag, cta.decoded_rows
        rows = []
        for lane in range(8 * num):
            a = A[warp_base + lane]
            regs = decoded.get(a)
            if regs is None:
                if a % 16:
                    raise ExecError(f"ldmatrix row address {a:#x} not 16-byte aligned")
                e = cta.read("shared", a, 16)
                regs = decoded[a] = tuple(register_of(e[q], e[q + 1], e[q + 2], e[q + 3], dag) for q in (0, 4, 8, 12))
            rows.append(regs)
        for i, d in enumerate(dsts):
            D = cta.dst(d)
            for lane in range(32):
                D[warp_base + lane] = rows[8 * i + (lane >> 2)][lane & 3]
    return run


def ldmatrix_trans(dsts: list, addr, num: int):
    def run(cta, warp_base):
        A = addr(cta)
        dag = cta.dag
        rows = []
        for lane in range(8 * num):
            a = A[warp_base + lane]
            if a % 16:
                raise ExecError(f"ldmatrix row address {a:#x} not 16-byte aligned")
            rows.append(cta.read("shared", a, 16))
        for i, d in enumerate(dsts):
            D = cta.dst(d)
            for lane in range(32):
                lo, hi = rows[8 * i + 2 * (lane & 3)], rows[8 * i + 2 * (lane & 3) + 1]
                c = 2 * (lane >> 2)
                D[warp_base + lane] = register_of(lo[c], lo[c + 1], hi[c], hi[c + 1], dag)
    return run


def mma(prog: Program, inst: Inst):
    """mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 d, a, b, c with the PTX ISA fragments
    (g = lane / 4, t = lane % 4; low half first): a0 = A[g][2t..2t+1], a1 = A[g+8][2t..],
    a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]; b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g];
    c0, c1 = C[g][2t], C[g][2t+1]; c2, c3 = C[g+8][2t], C[g+8][2t+1]; d as c."""
    if inst.op != "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32":
        raise ExecError(f"{inst.op} not modelled")
    d, a, b, c = [[dst(prog, t) for t in split_outside(x.strip()[1:-1], "{[", "}]")] for x in inst.args]
    if (len(d), len(a), len(b), len(c)) != (4, 4, 2, 4):
        raise ExecError(f"{inst.op}: fragment sizes {len(d)}, {len(a)}, {len(b)}, {len(c)}")

    def operand(cta, regs: list[int], wb: int, build) -> list[Node]:
        """build(halves of each register) for the warp's values of regs, reused while they are the same
        values (a fragment feeds several mma.sync: its rows are worked out once)."""
        R = cta.regs
        now = [v for x in regs for v in R[x][wb:wb + 32]]
        key = (tuple(regs), wb)
        hit = cta.mma_operands.get(key)
        if hit is not None and hit[0] == now:  # the same objects (ints: equal values)
            return hit[1]
        dag = cta.dag
        ints = dag.int_halves
        halves = [(v.halves if type(v) is Bytes else ints.get(v)) or bf16_halves(v, dag) for v in now]
        out = build(dag, [halves[32 * i:32 * i + 32] for i in range(len(regs))])
        cta.mma_operands[key] = (now, out)
        return out

    def run(cta, wb):
        R, dag = cta.regs, cta.dag
        rows = operand(cta, a, wb, _a_rows)
        cols = operand(cta, b, wb, _b_cols)
        get, table = dag.table.get, dag.table
        for ci, di, rsel, csel in zip(c, d, _MMA_ROWS, _MMA_COLS):
            keys = [(MMA_OP, acc, rows[r], cols[col]) for acc, r, col in zip(R[ci][wb:wb + 32], rsel, csel)]
            out = [get(k) for k in keys]
            if None in out:
                for i, key in enumerate(keys):
                    if out[i] is None:
                        if type(key[1]) is not Node:
                            raise TypeError("an mma accumulator that is not an f32 value")
                        out[i] = table.get(key) or table.setdefault(key, Node(key, 4))
            cta.dst(di)[wb:wb + 32] = out
    return run


def _a_rows(dag: Dag, h: list) -> list[Node]:
    """The 16 rows of A from the halves of a0..a3 (lane by lane): row g is a0 of lanes 4g..4g+3
    (k 0..7), then a2 (k 8..15); row g + 8 is a1, then a3."""
    vget, vec = dag.vecs.get, dag.vec
    return [vget(t) or vec(t) for t in
            (lo[i] + lo[i + 1] + lo[i + 2] + lo[i + 3] + hi[i] + hi[i + 1] + hi[i + 2] + hi[i + 3]
             for lo, hi in ((h[0], h[2]), (h[1], h[3])) for i in range(0, 32, 4))]


def _b_cols(dag: Dag, h: list) -> list[Node]:
    """The 8 columns of B from the halves of b0, b1: column g is b0 of lanes 4g..4g+3 (k 0..7), then
    b1 (k 8..15)."""
    vget, vec = dag.vecs.get, dag.vec
    return [vget(t) or vec(t) for t in
            (h[0][i] + h[0][i + 1] + h[0][i + 2] + h[0][i + 3] + h[1][i] + h[1][i + 1] + h[1][i + 2] + h[1][i + 3]
             for i in range(0, 32, 4))]


# Per accumulator register c0..c3, lane by lane: its row of A (g or g + 8) and column of B (2t, 2t + 1).
_MMA_ROWS = [[h + (lane >> 2) for lane in range(32)] for h in (0, 0, 8, 8)]
_MMA_COLS = [[2 * (lane & 3) + odd for lane in range(32)] for odd in (0, 1, 0, 1)]


# ---------------------------------------------------------------------------------------------
# wgmma (sm_90a): run per warp, which is exact: warp w of the warpgroup holds rows 16w .. 16w + 15
# of D and of A, and each element depends on its own A row, B column and accumulator only.


def wgmma(prog: Program, inst: Inst):
    """wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 d, a, b-desc, scale-d, 1, 1[, tnsp-a], tnsp-b
    with A from registers (mma.sync's m16k16 A fragment of the warp's 16 rows) or from a shared-memory
    descriptor, B from one; each element of one k16 step is the node mma.sync's step gives it (the
    assumption wgmma_ptx.cuh states): mma(accumulator, its A row, its B column). D's fragment: register
    4 nt + e of lane l holds row 16w + l / 4 (+ 8 for e >= 2), column 8 nt + 2 (l % 4) + e % 2
    (PTX ISA, "Asynchronous Warpgroup Level Matrix ... Register Fragments"). Descriptors: the 128-byte
    swizzle only (layout type 1, base offset 0), see _sw128."""
    m = re.match(r"^wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.bf16\.bf16$", inst.op)
    if not m:
        raise ExecError(f"{inst.op} not modelled")
    n = int(m.group(1))
    args = inst.args
    d = [dst(prog, t) for t in split_outside(args[0].strip()[1:-1], "{[", "}]")]
    rs = args[1].strip().startswith("{")
    a_regs = [dst(prog, t) for t in split_outside(args[1].strip()[1:-1], "{[", "}]")] if rs else []
    a_desc = None if rs else getter(operand(prog, args[1]))
    rest = args[2:]
    if len(d) != n // 2 or (rs and len(a_regs) != 4) or len(rest) != (5 if rs else 6):
        raise ExecError(f"{inst.op}: operands {len(d)}, {len(a_regs)}, {len(rest)} not modelled")
    b_desc, scale_d = getter(operand(prog, rest[0])), getter(operand(prog, rest[1]))
    imms = [imm(x) for x in rest[2:]]
    if imms[:2] != [1, 1] or (not rs and imms[2] != 0) or imms[-1] not in (0, 1):
        raise ExecError(f"{inst.op} with scales / transposes {rest[2:]} not modelled")
    trans_b = imms[-1]

    def run(cta, wb):
        dag = cta.dag
        P, B = scale_d(cta), b_desc(cta)
        if any(P[wb + i] != 1 for i in range(32)):
            raise ExecError("wgmma with scale-d 0 (D = A B) not modelled")
        bd = _uniform(B, wb, "B descriptor")
        cols = [dag.vec(tuple(_element(cta, bd, trans_b, k, c) for k in range(16))) for c in range(n)]
        if rs:
            R = cta.regs
            halves = [[bf16_halves(v, dag) for v in R[x][wb:wb + 32]] for x in a_regs]
            rows = _a_rows(dag, halves)
        else:
            ad = _uniform(a_desc(cta), wb, "A descriptor")
            w = (wb >> 5) & 3
            rows = [dag.vec(tuple(_element(cta, ad, 0, k, 16 * w + r) for k in range(16)))
                    for r in range(16)]
        R = cta.regs
        for i, di in enumerate(d):
            nt, e = divmod(i, 4)
            acc = R[di]
            out = []
            for lane in range(32):
                c = acc[wb + lane]
                if type(c) is not Node:
                    raise TypeError("a wgmma accumulator that is not an f32 value")
                out.append(dag.mma(c, rows[(lane >> 2) + 8 * (e >> 1)], cols[8 * nt + 2 * (lane & 3) + (e & 1)]))
            cta.dst(di)[wb:wb + 32] = out
    return run


def _uniform(V, wb: int, what: str) -> int:
    v = V[wb]
    if any(V[wb + i] != v for i in range(32)) or type(v) is not int:
        raise ExecError(f"a wgmma {what} that differs across the warp or is not concrete")
    return v


def _sw128(desc: int) -> tuple[int, int, int]:
    """(start, leading byte offset, stride byte offset) of a shared-memory matrix descriptor with the
    128-byte swizzle (bits 0-13 start >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base offset 0,
    62-63 layout 1). Errors: ExecError for another layout."""
    if desc >> 62 != 1 or (desc >> 49) & 7 or desc & ~((0x3FFF) | (0x3FFF << 16) | (0x3FFF << 32) | (3 << 62)):
        raise ExecError(f"wgmma descriptor {desc:#x}: only the 128-byte swizzle with base offset 0 is modelled")
    return (desc & 0x3FFF) << 4, ((desc >> 16) & 0x3FFF) << 4, ((desc >> 32) & 0x3FFF) << 4


def _element(cta, desc: int, trans: int, k: int, mn: int) -> Node:
    """Element (k, mn) of a wgmma operand in shared memory, bf16. K-major (A, or B with tnsp-b 0): row
    mn of 128-byte rows in 8-row groups SBO apart, k contiguous from the start (which must leave the
    step's 32 bytes inside a row); N-major (B with tnsp-b 1): row k, 64 columns a row, column blocks
    LBO apart, 8-row groups SBO apart. The 128-byte swizzle then XORs address bits 4-6 with bits 7-9
    (the address is the shared-memory one, the atoms 1,024-byte aligned)."""
    start, lbo, sbo = _sw128(desc)
    if trans:
        addr = start + (mn >> 6) * lbo + (k >> 3) * sbo + (k & 7) * 128 + 2 * (mn & 63)
    else:
        if (start & 127) + 32 > 128:
            raise ExecError(f"a K-major wgmma operand whose k16 step crosses a 128-byte row (start {start:#x})")
        addr = start + (mn >> 3) * sbo + (mn & 7) * 128 + 2 * k
    addr ^= ((addr >> 7) & 7) << 4
    e = cta.read("shared", addr, 2)
    return half(e[0], e[1], cta.dag)
