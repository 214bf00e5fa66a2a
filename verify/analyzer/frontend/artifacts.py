# The artifacts the analyzer reads from a build directory: the PTX nvcc kept (build/ptx/), and the
# LLVM IR of the CPU kernels, which the analyzer compiles itself with clang (build/llvm/, with the
# build's flags: the IR is not a by-product of the g++ build), each file parsed once (ArtifactCache).
from __future__ import annotations

import glob
import os
import re

from .kir import Function
from .llvm import parse_llvm
from .ptx import parse_ptx


def artifact_files(build: str, pattern: str) -> list[str]:
    """The files of a kernel entry's artifact glob ("ptx:dir/*.ptx" or "llvm:name.ll")."""
    kind, _, glob_pat = pattern.partition(":")
    root = os.path.join(build, "ptx" if kind == "ptx" else "llvm")
    return sorted(glob.glob(os.path.join(root, glob_pat)))


class ArtifactCache:
    """Each artifact file parsed once: path -> its functions (PTX entries or LLVM defines)."""

    def __init__(self) -> None:
        self.funcs: dict[str, list[Function]] = {}

    def functions(self, path: str) -> list[Function]:
        if path not in self.funcs:
            self.funcs[path] = parse_ptx(path)[0] if path.endswith(".ptx") else parse_llvm(path)
        return self.funcs[path]


def source_options(repo: str, srcf: str, cmake: str) -> list[str]:
    """The per-file COMPILE_OPTIONS the CMake file `cmake` (relative to repo) gives srcf (the
    AVX-512 build of the one-row matmul: -mavx512f ...), so that its IR is compiled as the build
    compiles it."""
    try:
        text = open(os.path.join(repo, cmake), encoding="utf-8").read()
    except OSError:
        return []
    rel = os.path.relpath(srcf, os.path.dirname(cmake)) if os.path.dirname(cmake) else srcf
    m = re.search(r"set_source_files_properties\(\S*" + re.escape(rel) +
                  r"\s+PROPERTIES\s+COMPILE_OPTIONS\s+\"([^\"]*)\"", text)
    return m.group(1).split(";") if m else []


def _up_to_date(out: str, source: str) -> bool:
    """Whether out is newer than source and every file clang's depfile (out.d) lists for it."""
    if not os.path.exists(out) or not os.path.exists(out + ".d"):
        return False
    deps = open(out + ".d", encoding="utf-8", errors="replace").read().replace("\\\n", " ").split(":", 1)[-1].split()
    newest = max([os.path.getmtime(source)] + [os.path.getmtime(d) if os.path.exists(d) else float("inf")
                                               for d in deps])
    return os.path.getmtime(out) >= newest


def clang() -> str | None:
    import shutil
    return shutil.which("clang++-14") or shutil.which("clang++")


def emit_llvm(build: str, repo: str, sources: list[str], cmake: str) -> list[str]:
    """LLVM IR of the CPU kernels' sources (relative to repo) with the build's flags, into
    build/llvm/<stem>.ll; rewritten only when the source or a header it includes is newer.
    Errors: a message per failure."""
    import subprocess
    cc = clang()
    if not cc:
        return ["clang++ not found (scripts/setup --test installs clang)"]
    out_dir = os.path.join(build, "llvm")
    os.makedirs(out_dir, exist_ok=True)
    errors = []
    for srcf in sources:
        full = os.path.join(repo, srcf)
        out = os.path.join(out_dir, os.path.basename(srcf).replace(".cc", ".ll"))
        if _up_to_date(out, full):
            continue
        cmd = [cc, "-O3", "-DNDEBUG", "-march=x86-64-v3", *source_options(repo, srcf, cmake), "-ffp-contract=off",
               "-std=c++20", f"-I{repo}/src", f"-I{repo}", "-MD", "-MF", out + ".d", "-S", "-emit-llvm", "-o", out,
               full]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            errors.append(f"clang failed on {srcf}: {r.stderr[:400]}")
    return errors
