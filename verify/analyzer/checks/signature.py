# The chain signature of a CUTLASS sm90 GEMM instantiation, read from its PTX: how each output
# element is evaluated, in terms that do not depend on the tile shape, so that two instantiations
# with equal signatures evaluate every element by the same chain (docs/VERIFICATION.md):
#   k_steps     every k-tile iteration of the consumer issues, per accumulator, one wgmma k16 step
#               per 16 columns of the k-tile in increasing k: the descriptors of consecutive steps
#               advance 32 bytes inside a 128-byte swizzle row, then by the atom stride to the
#               next 64 columns (K-major, 128-byte swizzle: the layout bits are checked);
#   chain_start the first step of a tile has scale-d = 0 (D = A B, no accumulator read), every
#               other step scale-d = 1, all of them constants;
#   k_tiles     the producer's TMA loads put k columns [c, c + 64) of each operand at the atom the
#               consumer reads for them (box j at coordinate c + 64 j, at j atom strides), and c runs
#               from 0 by the k-tile, once per k-tile (the pipeline hands stages over in order:
#               assumption A-pipe);
#   epilogue    the floating-point operations from an accumulator to the stored value (+ the bias
#               element, then the rounding to the output type).
# A pattern that does not match gives an error string instead of a signature (not proven).
from __future__ import annotations

import re

from ..domains.values import ValueInfo, analyze_values
from ..frontend.kir import Function, Inst

_KTILE = re.compile(r"K128")


def _wgmma_groups(func: Function) -> dict[str, list[tuple[str, Inst]]]:
    groups: dict[str, list[tuple[str, Inst]]] = {}
    for b in func.blocks:
        for inst in b.insts:
            if inst.op.startswith("wgmma.mma_async"):
                groups.setdefault(inst.args[0].replace(" ", ""), []).append((b.label, inst))
    return groups


def _scale_d(vi: ValueInfo, inst: Inst) -> int | None:
    iv = vi.wgmma_scale_d.get(id(inst))
    return iv[0] if iv is not None and iv[0] == iv[1] else None


def _atoms(offsets: list[int], steps_per_atom: int = 4) -> int | None:
    """The atom stride of descriptor offsets [0, 2, 4, 6, S, S+2, ...] (16-byte units), or None
    when they are not k16 steps in increasing k."""
    if not offsets or offsets[0] != 0:
        return None
    stride = offsets[steps_per_atom] if len(offsets) > steps_per_atom else 0
    for j, off in enumerate(offsets):
        if off != (j // steps_per_atom) * stride + (j % steps_per_atom) * 2:
            return None
    if len(offsets) > steps_per_atom and stride < 8:
        return None
    return stride


def _mainloop(func: Function, vi: ValueInfo, ktile: int) -> tuple[dict, str]:
    """Checks k_steps and chain_start; returns ({operand: atom stride in bytes}, error)."""
    groups = _wgmma_groups(func)
    if not groups:
        return {}, "no wgmma"
    steps = ktile // 16
    strides: dict[str, set[int]] = {"A": set(), "B": set()}
    for acc, lst in groups.items():
        per_block: dict[str, list[Inst]] = {}
        for lab, inst in lst:
            per_block.setdefault(lab, []).append(inst)
        starts = 0
        for lab, insts in per_block.items():
            if len(insts) != steps:
                return {}, f"block {lab}: {len(insts)} wgmma on one accumulator, the k-tile has {steps} k16 steps"
            scales = [_scale_d(vi, i) for i in insts]
            if None in scales:
                return {}, f"block {lab}: a wgmma's scale-d is not a constant"
            if scales[0] == 0 and all(s == 1 for s in scales[1:]):
                starts += 1
            elif not all(s == 1 for s in scales):
                return {}, f"block {lab}: scale-d sequence {scales}"
            for which, k in (("A", 0), ("B", 1)):
                descs = [vi.desc.get(id(i), [None, None]) for i in insts]
                if any(d is None or len(d) < 2 or d[k] is None for d in descs):
                    return {}, f"block {lab}: {which} descriptors not decoded"
                base = descs[0][k]
                if any((d[k][0] >> 62) != 1 for d in descs):
                    return {}, f"block {lab}: {which} is not a 128-byte swizzle layout"
                offs = [d[k][0] - base[0] for d in descs]
                if any(d[k][1] - base[1] != o for d, o in zip(descs, offs)):
                    return {}, f"block {lab}: {which} descriptor offsets vary between iterations"
                stride = _atoms(offs)
                if stride is None:
                    return {}, f"block {lab}: {which} descriptor offsets {offs} are not k16 steps in increasing k"
                if steps > 4:
                    strides[which].add(stride * 16)
            if any(i.args[1].strip().startswith("{") for i in insts):
                return {}, f"block {lab}: A from registers"
            if not all(re.search(r",\s*1,\s*1,\s*0,\s*0\s*$", i.text) for i in insts):
                return {}, f"block {lab}: scale-a/b or transposition flags differ from 1, 1, 0, 0"
        if starts != 1:
            return {}, f"accumulator {acc[:30]}: {starts} blocks start a chain (scale-d = 0), expected 1"
    for which in ("A", "B"):
        if len(strides[which]) > 1:
            return {}, f"{which} atom strides {sorted(strides[which])} differ between accumulators"
    return {w: next(iter(s)) for w, s in strides.items() if s}, ""


def _producer(func: Function, vi: ValueInfo, ktile: int, atom_bytes: dict) -> str:
    """Checks k_tiles: TMA boxes j at coordinate c + 64 j and destination + j * atom stride, c from
    0 by ktile. Returns an error or ""."""
    defs: dict[str, list[Inst]] = {}
    for b in func.blocks:
        for inst in b.insts:
            for d in inst.dsts:
                defs.setdefault(d, []).append(inst)
    loads = [(b.label, i) for b in func.blocks for i in b.insts
             if i.kind == "copy" and i.op.startswith("cp.async.bulk.tensor") and i.dst_space == "shared"]
    if not loads:
        return "no TMA loads"
    by_block: dict[str, list[Inst]] = {}
    for lab, inst in loads:
        by_block.setdefault(lab, []).append(inst)
    counters = set()
    for lab, insts in by_block.items():
        by_map: dict[str, list[Inst]] = {}
        for inst in insts:
            by_map.setdefault(inst.args[1].split(",")[0].strip("[ "), []).append(inst)
        for tmap, boxes in by_map.items():
            coords = [re.search(r"\{\s*([^,}]+)", b.args[1]).group(1).strip() for b in boxes]
            dsts = [vi.dst_addr.get(id(b)) for b in boxes]
            if any(d is None for d in dsts):
                return f"block {lab}: a TMA destination is not bounded"
            base_c = coords[0]
            for j, (c, d) in enumerate(zip(coords, dsts)):
                if j == 0:
                    continue
                ok = any(i.op.startswith("add") and i.args[1].strip() == base_c and i.args[2].strip() == str(64 * j)
                         for i in defs.get(c, []))
                if not ok or len(defs.get(c, [])) != 1:
                    return f"block {lab}: box {j}'s k coordinate {c} is not {base_c} + {64 * j}"
                delta = d[0] - dsts[0][0]
                if delta not in atom_bytes.values() and len(atom_bytes) > 0:
                    return f"block {lab}: box {j} lands {delta} bytes after box 0, the consumer's atoms are {atom_bytes}"
            if len(boxes) * 64 != ktile:
                return f"block {lab}: {len(boxes)} boxes of 64 columns for a k-tile of {ktile}"
            counters.add(base_c)
    for c in counters:
        kinds = set()
        for i in defs.get(c, []):
            if i.op.startswith("mov") and i.args[1].strip() == "0":
                kinds.add("zero")
            elif i.op.startswith("add") and i.args[1].strip() == c and i.args[2].strip() == str(ktile):
                kinds.add("step")
            else:
                return f"the k coordinate {c} is also set by line {i.line}: {i.text[:60]}"
        if kinds != {"zero", "step"}:
            return f"the k coordinate {c} is not started at 0 and advanced by {ktile}: {sorted(kinds)}"
    return ""


def _epilogue(func: Function, accs: set[str]) -> tuple[tuple, str]:
    """The operations from accumulators to stores, as one canonical tuple (all must agree)."""
    uses: dict[str, list[Inst]] = {}
    for b in func.blocks:
        for inst in b.insts:
            for s in inst.srcs:
                uses.setdefault(s, []).append(inst)
    chains = set()
    for acc in accs:
        for u in uses.get(acc, []):
            if u.op.startswith("wgmma") or u.op.startswith("mov.f32"):
                continue
            chain = []
            cur = u
            for _ in range(4):
                if cur.op.startswith("add.f32") or cur.op.startswith("add.rn.f32"):
                    chain.append("add.f32 (+ the bias element)")
                elif cur.op.startswith("cvt.rn.bf16x2.f32"):
                    chain.append("cvt.rn.bf16x2.f32")
                elif cur.kind == "store" or cur.op.startswith("stmatrix"):
                    chain.append("store")
                    break
                else:
                    chain.append(cur.op)
                    break
                nxt = [x for d in cur.dsts for x in uses.get(d, [])]
                if len(nxt) != 1:
                    chain.append(f"{len(nxt)} uses")
                    break
                cur = nxt[0]
            chains.add(tuple(chain))
    if len(chains) != 1:
        return (), f"accumulators reach stores by {len(chains)} different chains: {sorted(chains)[:3]}"
    return next(iter(chains)), ""


def signature(func: Function, tile_name: str) -> dict | str:
    vi = analyze_values(func)
    ktile = 128 if _KTILE.search(tile_name) else 64
    atoms, err = _mainloop(func, vi, ktile)
    if err:
        return err
    err = _producer(func, vi, ktile, atoms)
    if err:
        return err
    accs = {r.strip() for g in _wgmma_groups(func) for r in g.strip("{}").split(",")}
    epi, err = _epilogue(func, accs)
    if err:
        return err
    out_kind = "bf16" if "cvt.rn.bf16x2.f32" in epi else "f32"
    return {f"{out_kind}: k_steps": "k16 steps in increasing k, 64-column atoms in order",
            f"{out_kind}: chain_start": "scale-d 0 on a tile's first step, 1 after",
            f"{out_kind}: k_tiles": "k coordinate from 0 by the k-tile",
            f"{out_kind}: epilogue": " -> ".join(epi)}


def tile_signatures(paths: list[str], cache) -> dict[str, dict | str]:
    """CUTLASS tile (file stem) -> merged signature of its kernels, or the first error."""
    out: dict[str, dict | str] = {}
    for path in paths:
        name = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        sig: dict | str = {}
        for func in cache.functions(path):
            s = signature(func, name)
            if isinstance(s, str):
                sig = f"{func.name[:40]}...: {s}"
                break
            sig.update(s)
        out[name] = sig
    return out
