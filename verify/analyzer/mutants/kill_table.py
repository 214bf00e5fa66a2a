# The analyzer's kill table: compiles the planted violations (mutants/planted.cu, with nvcc, into
# build/ptx/mutants/) and requires vosti-analyze to reject each one along its expected axis, and to
# prove the clean control kernel. The CPU mutant is the test-only planted split-K
# (tests/support/planted_matmul.h, through mutants/planted_matmul.cc into
# build/llvm/mutants/planted_matmul.ll); the one-row matmul's
# comparisons (rowkernels.py) get mutants/planted_rows.cc, compiled with clang into
# build/llvm/mutants/ as a clean control and two planted differences. The mma.sync GEMM's chain
# comparison (gemm_chains.py) gets mutants/gemm_chains_planted.cu, compiled with nvcc to sm_80 PTX:
# a clean copy of the kernel and two planted chain orders; the tensor-core attention's split-path
# comparison (attention_chains.py) gets mutants/attention_chains_planted.cu (the real kernels and
# planted copies of the folded kernel, the merge kernel and the decode kernel), likewise.
#   python3 verify/analyzer/mutants.py [--build build]
# Ends with "analyzer mutants: N killed, M not"; exits 1 if any survives or the clean one fails.
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tomllib

from ..checks.kernels import analyze_kernel, verdict
from ..frontend.artifacts import ArtifactCache, clang, emit_llvm, source_options
from ..spec import loader as specmod

HERE = os.path.dirname(os.path.abspath(__file__))  # the planted sources and mutants.toml
REPO = os.path.join(os.path.dirname(HERE), "..", "..")  # verify/analyzer/../..


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    args = ap.parse_args()
    out_dir = os.path.join(args.build, "ptx", "mutants")
    os.makedirs(out_dir, exist_ok=True)
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    ptx = os.path.join(out_dir, "planted.ptx")
    if os.path.exists(nvcc):
        r = subprocess.run([nvcc, "-O3", "-std=c++20", "--generate-code=arch=compute_90a,code=compute_90a", "-ptx",
                            os.path.join(HERE, "planted.cu"), "-o", ptx], capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stderr)
            return 1
    art = specmod.load_artifacts()
    errs = emit_llvm(args.build, REPO, art.llvm_sources, art.cmake)
    errs += planted_cpu_matmul(args.build)
    if errs:
        print("\n".join(errs))
        return 1
    path = os.path.join(HERE, "mutants.toml")
    sp = specmod.load_spec(path)
    expect = {k["name"]: k.get("expect", "") for k in tomllib.load(open(path, "rb"))["kernel"]}
    cache = ArtifactCache()
    killed = survived = 0
    for ks in sp.kernels:
        if ks.artifacts[0].startswith("ptx:") and not os.path.exists(ptx):
            print(f"  skip  {ks.name} (no nvcc)")
            continue
        res = analyze_kernel(sp, ks, args.build, cache, set())
        want = expect[ks.name]
        if res.errors:
            print(f"  FAIL  {ks.name}: {res.errors}")
            survived += 1
        elif not want:
            ok = res.proven()
            print(f"  {'ok   ' if ok else 'FAIL '} clean control '{ks.name}' {'proven' if ok else 'NOT proven'}")
            survived += 0 if ok else 1
        else:
            v = verdict(res, want)
            ok = v == "NOT PROVEN"
            first = res.violations[0][1] if res.violations else None
            where = f"line {first.line}: {first.text[:60]}" if first else ""
            print(f"  {'ok   ' if ok else 'FAIL '} mutant '{ks.name}' {'rejected' if ok else 'SURVIVED'} "
                  f"[{want}] {where}")
            killed += 1 if ok else 0
            survived += 0 if ok else 1
    k, s = row_mutants(args.build)
    killed += k
    survived += s
    k, s = chain_mutants(args.build, nvcc)
    killed += k
    survived += s
    k, s = attention_mutants(args.build, nvcc)
    killed += k
    survived += s
    print(f"analyzer mutants: {killed} killed, {survived} not")
    return 0 if survived == 0 else 1


def planted_cpu_matmul(build: str) -> list[str]:
    """Compiles mutants/planted_matmul.cc (the test-only split-K matmul) to
    build/llvm/mutants/planted_matmul.ll, the CPU mutant's artifact; the errors (none: done)."""
    cc = clang()
    if not cc:
        return ["no clang: the CPU mutant cannot be compiled"]
    out_dir = os.path.join(build, "llvm", "mutants")
    os.makedirs(out_dir, exist_ok=True)
    r = subprocess.run([cc, "-O3", "-DNDEBUG", "-march=x86-64-v3", "-ffp-contract=off", "-std=c++20", f"-I{REPO}/src",
                        f"-I{REPO}", "-S", "-emit-llvm", "-o", os.path.join(out_dir, "planted_matmul.ll"),
                        os.path.join(HERE, "planted_matmul.cc")], capture_output=True, text=True)
    return [f"clang on mutants/planted_matmul.cc: {r.stderr[:300]}"] if r.returncode != 0 else []


# (name, -D defines, AVX-512 build?, the comparison that must differ: "groups", "paths", or "" for a
# control). An AVX-512 variant is compared, as another build of the one-row path, with the first.
ROW_MUTANTS = [("CPU one-row matmul, clean copy", ["PLANTED_ROWS=0"], False, ""),
               ("a one-row column group accumulating its blocks in two halves", ["PLANTED_ROWS=1"], False, "groups"),
               ("a one-row path summing its lanes in order, not by hsum8's tree", ["PLANTED_ROWS=2"], False, "paths"),
               ("CPU one-row matmul, AVX-512 build with a Q4_0 table decoder", ["PLANTED_AVX512=1"], True, ""),
               ("an AVX-512 Q4_0 table of d * q - 8d, not d * (q - 8)", ["PLANTED_AVX512=2"], True, "paths")]


def row_mutants(build: str) -> tuple[int, int]:
    """(killed, survived) of the one-row matmul mutants."""
    from ..checks import rowkernels
    cc = clang()
    art = specmod.load_artifacts()
    quant = os.path.join(build, "llvm", art.decoders)
    if not cc or not os.path.exists(quant):
        print(f"  skip  CPU one-row matmul mutants (no clang or no {art.decoders})")
        return 0, 0
    out_dir = os.path.join(build, "llvm", "mutants")
    os.makedirs(out_dir, exist_ok=True)
    killed = survived = 0
    reference = ""
    avx512 = source_options(REPO, art.avx512_rows, art.cmake)
    for variant, (name, defines, is_avx512, want) in enumerate(ROW_MUTANTS):
        ll = os.path.join(out_dir, f"planted_rows_{variant}.ll")
        r = subprocess.run([cc, "-O3", "-DNDEBUG", "-march=x86-64-v3", *(avx512 if is_avx512 else []),
                            "-ffp-contract=off", "-std=c++20", f"-I{REPO}/src", f"-I{REPO}",
                            *[f"-D{d}" for d in defines], "-S", "-emit-llvm", "-o", ll,
                            os.path.join(HERE, "planted_rows.cc")], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"  FAIL  {name}: clang: {r.stderr[:300]}")
            survived += 1
            continue
        reference = reference or ll  # the clean copy: the AVX2 build the AVX-512 variants are compared with
        others = ((ll, "planted_row_columns_avx512"),) if is_avx512 else ()
        out = rowkernels.compare(reference if is_avx512 else ll, quant, [8, 13, 64],
                                 "decode_plain|f16_to_f32|block_layout", others)
        done, paths = out["done"], out["paths"]
        groups = [g for f, gs in out["groups"].items() for g in gs]
        if not want:
            ok = bool(done) and not groups and not paths
            print(f"  {'ok   ' if ok else 'FAIL '} clean control '{name}' {'proven' if ok else 'NOT proven'}"
                  f"{'' if ok else ': ' + '; '.join((groups + paths)[:2])}")
            survived += 0 if ok else 1
            continue
        found = {"groups": groups, "paths": paths}
        ok = bool(found[want]) and not any(v for key, v in found.items() if key != want)
        axis = "threads" if want == "groups" else "rows"
        print(f"  {'ok   ' if ok else 'FAIL '} mutant '{name}' {'rejected' if ok else 'SURVIVED'} [{axis}] "
              f"{(found[want] or ['nothing found'])[0][:90]}")
        killed += 1 if ok else 0
        survived += 0 if ok else 1
    return killed, survived


# (kPlant of gemm_chains_planted.cu, name, planted?): the chain comparison's kill table.
CHAIN_MUTANTS = [(0, "mma.sync GEMM, clean copy", False),
                 (1, "a split plan's last CTA summing the partials in reverse segment order", True),
                 (2, "a BM = 16 chain taking each k-block's first k16 step last", True)]
# The plans they run under: one class (S = 3, 3 k-blocks a segment) with every instantiation and a split.
CHAIN_CLASSES = {(3, 3): {(16, 1), (16, 3), (64, 1), (128, 1)}}


def _planted_ptx(build: str, nvcc: str, name: str) -> tuple[str, str]:
    """Compiles mutants/NAME.cu to compute_80 PTX under build/ptx/mutants: (path, nvcc's error or "")."""
    ptx = os.path.join(build, "ptx", "mutants", f"{name}.ptx")
    repo = REPO
    r = subprocess.run([nvcc, "-O3", "-DNDEBUG", "-std=c++20", f"-I{repo}/src", f"-I{repo}",
                        "--generate-code=arch=compute_80,code=compute_80", "-ptx",
                        os.path.join(HERE, f"{name}.cu"), "-o", ptx],
                       capture_output=True, text=True)
    return ptx, (r.stderr[:300] or "failed") if r.returncode != 0 else ""


def _report(name: str, planted: bool, reasons: list[str], refused: list[str], tag: str) -> bool:
    """Prints one chain comparison's verdict; whether it is the expected one: a clean copy proven, a
    planted variant rejected for its DAGs (not refused by the executor)."""
    if not planted:
        ok = not reasons
        print(f"  {'ok   ' if ok else 'FAIL '} clean control '{name}' {'proven' if ok else 'NOT proven'}"
              f"{'' if ok else ': ' + reasons[0][:200]}")
    else:
        ok = bool(reasons) and not refused
        print(f"  {'ok   ' if ok else 'FAIL '} mutant '{name}' {'rejected' if ok else 'SURVIVED'} [{tag}] "
              f"{(reasons or ['nothing found'])[0][:200]}")
    return ok


def chain_mutants(build: str, nvcc: str) -> tuple[int, int]:
    """(killed, survived) of the mma.sync chain mutants: each planted variant must be reported as a
    plan storing another DAG than the contract's, the clean copy must pass."""
    from ..checks import gemm_chains
    if not os.path.exists(nvcc):
        print("  skip  mma.sync chain mutants (no nvcc)")
        return 0, 0
    ptx, error = _planted_ptx(build, nvcc, "gemm_chains_planted")
    if error:
        print(f"  FAIL  mma.sync chain mutants: nvcc: {error}")
        return 0, len(CHAIN_MUTANTS)
    killed = survived = 0
    for plant, name, planted in CHAIN_MUTANTS:
        source = gemm_chains.Source(ptx, gemm_chains.ENTRY.replace("EEEv", f"ELi{plant}EEEv"))
        verdict = gemm_chains.compare(source, specmod.DEFAULT_SPEC, CHAIN_CLASSES)
        refused = [w for w in verdict.reasons if "not executed" in w or "not run" in w]
        ok = _report(name, planted, verdict.reasons, refused, "plan")
        killed += 1 if ok and planted else 0
        survived += 0 if ok else 1
    return killed, survived


# (name, the planted kernels (path -> entry), the paths compared, planted?): the split-path kill table.
# Planted folded kernels and merges run against the real decode kernel per split, the planted decode
# kernel (folding a row's splits itself) against the real folded kernel.
_FOLD = "planted_fold_kernelILi{{hd}}E{{out}}Li{}EEEv"
_MERGE = "planted_merge_kernelI{{out}}Li{}EEEv"
_DECODE = "planted_decode_kernelILi{{hd}}E{{out}}Li{}EEEv"
ATTENTION_MUTANTS = [
    ("attention split paths, clean copies of the folded and merge kernels",
     {"folded": _FOLD.format(0), "merge": _MERGE.format(0)}, ("folded", "decode"), False),
    ("a folded kernel summing each lane's l in decreasing j",
     {"folded": _FOLD.format(1), "merge": _MERGE.format(0)}, ("folded", "decode"), True),
    ("a folded kernel skipping the O rescale where alpha > 0.99, not only where it is 1",
     {"folded": _FOLD.format(2), "merge": _MERGE.format(0)}, ("folded", "decode"), True),
    ("a merge folding the splits last to first",
     {"folded": _FOLD.format(0), "merge": _MERGE.format(3)}, ("folded", "decode"), True),
    ("attention split paths, clean copy of the decode kernel folding a row's splits",
     {"decode_fold": _DECODE.format(0)}, ("folded", "decode_fold"), False),
    ("a decode kernel folding each lane's l before the row's quad sum",
     {"decode_fold": _DECODE.format(4)}, ("folded", "decode_fold"), True)]


def attention_mutants(build: str, nvcc: str) -> tuple[int, int]:
    """(killed, survived) of the split-path mutants: each planted variant must be reported as a path
    storing another DAG than the others, the clean copies must pass."""
    from ..checks import attention_chains
    if not os.path.exists(nvcc):
        print("  skip  attention split-path mutants (no nvcc)")
        return 0, 0
    ptx, error = _planted_ptx(build, nvcc, "attention_chains_planted")
    if error:
        print(f"  FAIL  attention split-path mutants: nvcc: {error}")
        return 0, len(ATTENTION_MUTANTS)
    killed = survived = 0
    for name, entries, paths, planted in ATTENTION_MUTANTS:
        case = attention_chains.Case(64, 4, 1, 2 * attention_chains.TILE + 37, 1, 1, paths=paths)
        verdict = attention_chains.compare(ptx, specmod.DEFAULT_SPEC, 1, [case], entries)
        refused = [w for w in verdict.reasons if "not executed" in w or "not compared" in w]
        ok = _report(name, planted, verdict.reasons, refused, "split paths")
        killed += 1 if ok and planted else 0
        survived += 0 if ok else 1
    return killed, survived


if __name__ == "__main__":
    sys.exit(main())
