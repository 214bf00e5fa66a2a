# The GEMM launch-plan check of vosti-analyze: runs the real plan rule (vosti_gemm_plans, which
# links src/kernels/cuda/gemm/gemm_schedule.cc) over every m in 1..max_m for every weight shape of the
# deployment's model families on every GPU of shapes.toml, and requires that every plan it selects
# runs kernels the analysis proved, under that plan, and that all of them evaluate each element by
# the same chain (signature.py: the k order of the tensor-core steps, the accumulator's start, the
# epilogue), so that the choice among them, made from m, moves no bits.
from __future__ import annotations

import os
import re
import subprocess
import tomllib
from dataclasses import dataclass, field

from ..spec import loader as specmod


@dataclass
class PlanRow:
    """One report row: the plans of one GPU over all families."""

    name: str
    proven: bool = True
    reasons: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def weight_shapes(fam: dict) -> list[tuple[str, int, int]]:
    """(role, n, k) of one model family, as src/model/cuda/cuda_model.cc lays them out."""
    def r8(x: int) -> int:
        return (x + 7) // 8 * 8

    def r64(x: int) -> int:
        return (x + 63) // 64 * 64
    h, hd = fam["hidden"], fam["head_dim"]
    return [("qkv", r8((fam["heads"] + 2 * fam["kv_heads"]) * hd), h), ("o", h, r64(fam["heads"] * hd)),
            ("gate_up", 2 * r64(fam["intermediate"]), h), ("down", h, r64(fam["intermediate"])),
            ("lm_head", r8(fam["vocab"]), h)]


def run_plan_tool(tool: str, lines: list[str]) -> tuple[dict[int, tuple[str, int]], list[tuple[dict, list]]]:
    """Tiles (index -> (enum name, segments)) and, per input line, its schedule and plans.
    Errors: RuntimeError with the tool's message."""
    r = subprocess.run([tool], input="\n".join(lines) + "\n", capture_output=True, text=True)
    tiles: dict[int, tuple[str, int]] = {}
    out: list[tuple[dict, list]] = []
    for ln in r.stdout.splitlines():
        f = ln.split()
        if f[0] == "tile":
            tiles[int(f[1])] = (f[2], int(f[3]))
        elif f[0] == "schedule":
            out.append(({"n": int(f[1]), "k": int(f[2]), "sms": int(f[3]), "instruction": f[4],
                         "segments": int(f[5]), "k_blocks": int(f[6])}, []))
        elif f[0] == "plan":
            out[-1][1].append((int(f[1]), int(f[2]), f[3], [int(x) for x in f[4:]]))
        elif f[0] == "error":
            raise RuntimeError(ln)
    if r.returncode != 0 or len(out) != len(lines):
        raise RuntimeError(f"vosti_gemm_plans failed ({r.returncode}): {r.stderr.strip()[:300]}")
    return tiles, out


def _verdicts(results) -> tuple[dict[str, list[str]], dict[tuple[int, str], list[str]]]:
    """From the kernel results: CUTLASS tile name -> reasons it is not proven ([] = proven), and
    (mma.sync BM, plan name) -> reasons."""
    tma: dict[str, list[str]] = {}
    mma: dict[tuple[int, str], list[str]] = {}
    for r in results:
        if r.spec.name.startswith("cuda gemm sm90"):
            for (fname, func, _plan), vs in r.per_plan.items():
                tile = fname.rsplit(".", 1)[0]
                why = tma.setdefault(tile, [])
                if vs:
                    why.append(f"{r.spec.name}: {vs[0].why} (line {vs[0].line}: {vs[0].text[:60]})")
            for e in r.errors:
                if "no compiled function" not in e:
                    tma.setdefault("<all>", []).append(e)
        elif r.spec.name.startswith("cuda gemm mma.sync"):
            for (fname, func, plan), vs in r.per_plan.items():
                m = re.search(r"gemm_bf16_kernelILi(\d+)E", func)
                if not m:
                    continue
                why = mma.setdefault((int(m.group(1)), plan), [])
                if vs:
                    why.append(f"{fname}: [{','.join(sorted(vs[0].axes))}] {vs[0].why} (line {vs[0].line})")
    return tma, mma


def check_plans(build: str, results, shapes_path: str, art: specmod.Artifacts, spec_path: str,
                signatures: dict | None = None) -> list[PlanRow]:
    """One PlanRow per GPU of shapes.toml. signatures: CUTLASS tile -> its chain signature (or an
    error string), from signature.py; None skips that comparison (and says so)."""
    tool = os.path.join(build, art.gemm_plans)
    cfg = tomllib.load(open(shapes_path, "rb"))
    rows = []
    if not os.path.exists(tool):
        row = PlanRow("cuda gemm launch plans", False, [f"{tool} not built (build with -DVOSTI_TESTS=ON)"])
        return [row]
    tma, mma = _verdicts(results)
    max_m = int(cfg.get("max_m", 16384))
    for gpu in cfg["gpu"]:
        row = PlanRow(f"cuda gemm plans, {gpu['name']}")
        lines, labels = [], []
        for fam in cfg["family"]:
            for role, n, k in weight_shapes(fam):
                lines.append(f"{n} {k} {gpu['sms']} {1 if gpu['wgmma'] else 0} {max_m}")
                labels.append(f"{fam['name']} {role} [{n}, {k}]")
        try:
            tiles, per_shape = run_plan_tool(tool, lines)
        except RuntimeError as e:
            row.proven = False
            row.reasons.append(str(e))
            rows.append(row)
            continue
        used_tiles: set[str] = set()
        used_mma: set[tuple[int, int]] = set()
        mma_classes: dict[tuple[int, int], set[tuple[int, int]]] = {}  # (S, k-blocks a segment) -> plans
        for label, (sched, plans) in zip(labels, per_shape):
            for m0, m1, kind, vals in plans:
                where = f"{label} m={m0}..{m1}"
                if kind == "tma":
                    tile, segs, split_n, tail, tail_segs = vals
                    for t, s in ((tile, segs), (tail, tail_segs)) if split_n else ((tile, segs),):
                        name = tiles[t][0]
                        used_tiles.add(name)
                        if s != sched["segments"]:
                            row.reasons.append(f"{where}: {name} evaluates {s} k segments, the schedule {sched['segments']}")
                else:
                    block_m, groups = vals
                    used_mma.add((block_m, groups))
                    mma_classes.setdefault((sched["segments"], sched["k_blocks"] // sched["segments"]),
                                           set()).add((block_m, groups))
                    if sched["segments"] % groups:
                        row.reasons.append(f"{where}: {groups} groups do not divide {sched['segments']} segments")
        for name in sorted(used_tiles):
            why = tma.get(name)
            if why is None:
                row.reasons.append(f"{name}: selected, but no analysed PTX (build/ptx/{art.cutlass}/{name}.ptx)")
            elif why:
                row.reasons.append(f"{name}: not proven: {why[0]}")
        if used_tiles:
            row.summary.append(f"CUTLASS instantiations selected: {', '.join(sorted(used_tiles))}")
            row.reasons += _compare_signatures(sorted(used_tiles), signatures)
        for block_m, groups in sorted(used_mma):
            plan = "one CTA per tile (num_groups = 1)" if groups == 1 else "k segments split over CTAs (num_groups > 1)"
            why = mma.get((block_m, plan))
            if why is None:
                row.reasons.append(f"mma.sync BM={block_m}: selected, but no analysed instantiation")
            elif why:
                row.reasons.append(f"mma.sync BM={block_m}, {groups} k-groups: not proven: {why[0]}")
        if used_mma:
            row.summary.append("mma.sync plans selected (BM, k-groups): " +
                               ", ".join(f"({b}, {g})" for b, g in sorted(used_mma)))
            row.summary.append("mma.sync classes (S segments, k-blocks a segment): " +
                               ", ".join(f"({s}, {kbs})" for s, kbs in sorted(mma_classes)))
            # The plans differ in the m-tile height and the k-group count: every one must store the
            # contract's DAG in every element (gemm_chains.py, symbolic execution of the sm_80 PTX).
            from . import gemm_chains
            chains = gemm_chains.compare(gemm_chains.Source(os.path.join(build, "ptx", art.gemm_chains)), spec_path,
                                         mma_classes)
            row.summary += chains.summary
            row.reasons += chains.reasons
        row.proven = not row.reasons
        rows.append(row)
    return rows


def _compare_signatures(tiles: list[str], signatures: dict | None) -> list[str]:
    if signatures is None:
        return ["the instantiations' chains were not compared (signature.py not run)"]
    out = []
    ref_name, ref = None, None
    for name in tiles:
        sig = signatures.get(name)
        if sig is None:
            out.append(f"{name}: no chain signature")
            continue
        if isinstance(sig, str):
            out.append(f"{name}: chain signature not extracted: {sig}")
            continue
        if ref is None:
            ref_name, ref = name, sig
        elif sig != ref:
            diff = [k for k in sorted(set(sig) | set(ref)) if sig.get(k) != ref.get(k)]
            out.append(f"{name} and {ref_name} evaluate elements differently: " +
                       "; ".join(f"{k}: {sig.get(k)} vs {ref.get(k)}" for k in diff[:3]))
    return out


def check_attention_plans(build: str, art: specmod.Artifacts, spec_path: str) -> list[PlanRow]:
    """A-plan on the real planner (vosti_attention_plans): the assumption the tensor-core attention
    entries make about the work items; and, where the build has the attention's PTX, the comparison of
    the paths a row's splits may take (attention_chains.py: the folded kernels, mma.sync and wgmma,
    against the per-split kernels with the merge)."""
    tool = os.path.join(build, art.attention_plans)
    row = PlanRow("cuda attention plans (A-plan)")
    rows = [row]
    from . import attention_chains
    ptx = os.path.join(build, "ptx", art.attention_chains)
    if os.path.isdir(os.path.join(build, "ptx", art.cuda)):  # a CUDA build: its PTX must be there
        chains = attention_chains.compare(ptx, spec_path, ptx_sm90=os.path.join(build, "ptx", art.attention_chains_sm90))
        rows.append(PlanRow("cuda attention: split paths", not chains.reasons, chains.reasons, chains.summary))
    if not os.path.exists(tool):
        row.proven = False
        row.reasons.append(f"{tool} not built (build with -DVOSTI_TESTS=ON)")
        return rows
    r = subprocess.run([tool], capture_output=True, text=True)
    row.summary.append(r.stdout.strip())
    if r.returncode != 0:
        row.proven = False
        row.reasons.append(r.stdout.strip() or r.stderr.strip()[:300])
    return rows


def cpu_matmul_paths(outcome: tuple[list[str], list[str]] | None) -> list[PlanRow]:
    """The CPU matmul's choice between its one-row and tiled paths (by m): rowkernels.py's
    comparison of every element the tiled path stores with the one-row path's DAG of it.
    outcome: (what was compared, the differences), None if it was not run."""
    row = PlanRow("cpu matmul: one-row and tiled paths")
    if outcome is None:
        row.proven = False
        row.reasons.append("not compared (no LLVM IR of matmul_avx2.cc and quant_blocks.cc, or no entry with "
                           "compared_calls in the spec)")
        return [row]
    done, paths = outcome
    row.reasons += paths
    if not done:
        row.reasons.append("nothing compared")
    row.summary.append("m = 1 runs cpu_rows::row_columns (weights decoded in registers; on AVX-512 machines the "
                       "build of it in matmul_rows_avx512.cc, with table decoders for Q4_0 and Q4_1), m >= 2 decodes "
                       "columns into a tile and runs the micro-kernels: every element of tiled_columns (m = 2, and "
                       "m = 5 on 5 columns at k <= 80) has the DAG the AVX2 dot_row<Codec, 1> gives it, weight "
                       "decoding included, and so has the AVX-512 dot_row<Codec, 1> (the table decoders equal code "
                       "by code: a case split over the four index bits), at every k of the one-row comparison: "
                       + ", ".join(done))
    row.proven = not row.reasons
    return [row]
