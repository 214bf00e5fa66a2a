# The analyzer's kill table: compiles the planted violations (mutants/planted.cu, with nvcc, into
# build/ptx/mutants/) and requires vosti-analyze to reject each one along its expected axis, and to
# prove the clean control kernel. The CPU mutant is the backend's own planted split-K
# (matmul_part_columns_split_k_by_row_count in build/llvm/matmul_avx2.ll).
#   python3 verify/analyzer/mutants.py [--build build]
# Ends with "analyzer mutants: N killed, M not"; exits 1 if any survives or the clean one fails.
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import spec as specmod  # noqa: E402
import vosti_analyze  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    args = ap.parse_args()
    out_dir = os.path.join(args.build, "ptx", "mutants")
    os.makedirs(out_dir, exist_ok=True)
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    ptx = os.path.join(out_dir, "planted.ptx")
    if os.path.exists(nvcc):
        r = subprocess.run([nvcc, "-O3", "-std=c++20", "--generate-code=arch=compute_90a,code=compute_90a", "-ptx",
                            os.path.join(HERE, "mutants", "planted.cu"), "-o", ptx], capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stderr)
            return 1
    errs = vosti_analyze.emit_llvm(args.build, os.path.join(HERE, "..", ".."))
    if errs:
        print("\n".join(errs))
        return 1
    path = os.path.join(HERE, "mutants", "mutants.toml")
    sp = specmod.load_spec(path)
    expect = {k["name"]: k.get("expect", "") for k in tomllib.load(open(path, "rb"))["kernel"]}
    cache = vosti_analyze.ArtifactCache()
    killed = survived = 0
    for ks in sp.kernels:
        if ks.artifacts[0].startswith("ptx:") and not os.path.exists(ptx):
            print(f"  skip  {ks.name} (no nvcc)")
            continue
        res = vosti_analyze.analyze_kernel(sp, ks, args.build, cache, set())
        want = expect[ks.name]
        if res.errors:
            print(f"  FAIL  {ks.name}: {res.errors}")
            survived += 1
        elif not want:
            ok = res.proven()
            print(f"  {'ok   ' if ok else 'FAIL '} clean control '{ks.name}' {'proven' if ok else 'NOT proven'}")
            survived += 0 if ok else 1
        else:
            v = vosti_analyze.verdict(res, want)
            ok = v == "NOT PROVEN"
            first = res.violations[0][1] if res.violations else None
            where = f"line {first.line}: {first.text[:60]}" if first else ""
            print(f"  {'ok   ' if ok else 'FAIL '} mutant '{ks.name}' {'rejected' if ok else 'SURVIVED'} "
                  f"[{want}] {where}")
            killed += 1 if ok else 0
            survived += 0 if ok else 1
    print(f"analyzer mutants: {killed} killed, {survived} not")
    return 0 if survived == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
