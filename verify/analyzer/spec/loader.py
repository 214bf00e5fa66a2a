# The spec entries (kernels.toml): for each shipped kernel, where its compiled code is, which of
# its parameters (and struct fields) and grid coordinates carry which variation axes, and which
# loads return batch-variant values. Everything not named is a deployment constant: the entry must
# list every parameter, so that a new parameter cannot slip in unlabelled.
from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field

from ..domains.labels import EMPTY

SPEC_DIR = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SPEC = os.path.join(SPEC_DIR, "kernels.toml")  # the kernel entries
DEFAULT_SHAPES = os.path.join(SPEC_DIR, "shapes.toml")  # the deployment's GEMM shapes and GPUs

AXES = ("rows", "row", "chunk", "pages", "plan", "threads", "padding", "schedule", "thread") + tuple(
    f"tid{i}" for i in range(10))

SIZES = {"ptr": 8, "i64": 8, "u64": 8, "i32": 4, "u32": 4, "f32": 4, "u8": 1, "i8": 1, "u16": 2, "i16": 2,
          "f64": 8, "bool": 1}


@dataclass
class ParamSpec:
    name: str
    type: str = ""  # a struct name, or a scalar type for struct fields
    value_axes: frozenset[str] = EMPTY  # "@axes": the value itself varies
    load_axes: frozenset[str] = EMPTY  # "*@axes": values loaded through it vary
    inout: bool = False  # row-local in place: rows read and write only their own elements
    deep_axes: frozenset[str] = EMPTY  # "**@axes" (LLVM struct by reference): values read through its pointers
    extent: bool = False  # "extent": a count of rows or columns (m, n) that coordinates are compared with
    deep_inout: bool = False  # "**inout": the data behind its pointers is row-local, read and written in place
    points_to: str = ""  # "->Struct": an array of Struct; a load's field (by byte offset) gives its labels


@dataclass
class PlanSpec:
    """One launch plan (or class of plans) a kernel entry is analysed under: parameter values the
    plan fixes (by name, "p.split" for a struct field) and special-register ranges ("ctaid.z")."""

    name: str
    consts: dict[str, int] = field(default_factory=dict)
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass
class KernelSpec:
    name: str
    entry: str  # regex on the compiled function's name
    artifacts: list[str]  # globs of artifact files (PTX or LLVM IR) that hold it
    params: list[ParamSpec]
    special: dict[str, frozenset[str]] = field(default_factory=dict)
    assume_false: list[str] = field(default_factory=list)
    outputs: str = ""
    note: str = ""
    shipped: bool = True
    opaque: str = ""  # what the analysis cannot see inside (printed)
    group: str = ""  # report row (kernels of one family share a row)
    allowed_calls: str = ""  # regex of callees analysed as entries of their own (a leaf kernel's spec)
    pure_calls: str = ""  # regex of callees that only read memory (checked on their definition)
    dispatch: str = ""  # a constant table of functions an indirect call picks from (compared by dag.py)
    compared_calls: str = ""  # direct callees the entry picks among by batch-variant branches (rowkernels.py)
    indirect_calls: str = ""  # what the entry's indirect calls are (treated as opaque, printed as assumed)
    plans: list[PlanSpec] = field(default_factory=list)  # none: one analysis with nothing fixed
    struct_of: dict[str, str] = field(default_factory=dict)  # parameter name -> struct name


def _parse_param(text: str) -> ParamSpec:
    m = re.match(r"^\s*([\w.]+)\s*(?::\s*([\w]+))?\s*(.*)$", text)
    if not m:
        raise ValueError(f"bad parameter spec {text!r}")
    p = ParamSpec(m.group(1), m.group(2) or "")
    rest = m.group(3)
    for tok in re.findall(r"\*{0,2}@[\w,]+|\*\*inout|inout|extent|->\w+", rest):
        if tok.startswith("->"):
            p.points_to = tok[2:]
        elif tok == "**inout":
            p.deep_inout = True
        elif tok == "inout":
            p.inout = True
        elif tok == "extent":
            p.extent = True
        elif tok.startswith("**@"):
            p.deep_axes = p.deep_axes | _axes(tok[3:])
        elif tok.startswith("*@"):
            p.load_axes = p.load_axes | _axes(tok[2:])
        else:
            p.value_axes = p.value_axes | _axes(tok[1:])
    return p


def _axes(s: str) -> frozenset[str]:
    out = frozenset(a for a in s.split(",") if a)
    bad = out - set(AXES)
    if bad:
        raise ValueError(f"unknown variation axis {sorted(bad)}; known: {AXES}")
    return out


@dataclass
class Spec:
    kernels: list[KernelSpec]
    structs: dict[str, list[ParamSpec]]
    struct_offsets: dict[str, list[tuple[int, ParamSpec]]]
    struct_defaults: dict[str, frozenset[str]] = field(default_factory=dict)  # labels of unlisted bytes


def load_spec(path: str) -> Spec:
    data = tomllib.load(open(path, "rb"))
    structs: dict[str, list[ParamSpec]] = {}
    offsets: dict[str, list[tuple[int, ParamSpec]]] = {}
    defaults: dict[str, frozenset[str]] = {}
    for name, s in data.get("struct", {}).items():
        fields = [_parse_param(f) for f in s["fields"]]
        structs[name] = fields
        at = 0
        placed = []
        for f in fields:
            if "offset" in s and f.name in s["offset"]:
                at = s["offset"][f.name]
            size = SIZES.get(f.type, 8)
            at = (at + size - 1) // size * size
            placed.append((at, f))
            at += size
        offsets[name] = placed
        if "default" in s:
            defaults[name] = _axes(s["default"].replace(" ", ","))
    kernels = []
    for k in data.get("kernel", []):
        special = {("%" + key if not key.startswith("%") else key): _axes(v.replace(" ", ","))
                   for key, v in k.get("grid", {}).items()}
        kernels.append(KernelSpec(
            name=k["name"], entry=k["entry"], artifacts=k["artifacts"] if isinstance(k["artifacts"], list)
            else [k["artifacts"]], params=[_parse_param(p) for p in k.get("params", [])], special=special,
            assume_false=k.get("assume_false", []), outputs=k.get("outputs", ""), note=k.get("note", ""),
            shipped=k.get("shipped", True), opaque=k.get("opaque", ""), group=k.get("group", k["name"]),
            allowed_calls=k.get("allowed_calls", ""), pure_calls=k.get("pure_calls", ""),
            dispatch=k.get("dispatch", ""), indirect_calls=k.get("indirect_calls", ""),
            compared_calls=k.get("compared_calls", ""),
            plans=[PlanSpec(pl["name"], dict(pl.get("consts", {})),
                            {("%" + g if not g.startswith("%") else g): tuple(r) for g, r in pl.get("grid", {}).items()})
                   for pl in k.get("plan", [])]))
    return Spec(kernels, structs, offsets, defaults)


DEFAULT_ARTIFACTS = os.path.join(SPEC_DIR, "artifacts.toml")  # where the analyzer finds what it reads


@dataclass
class Artifacts:
    """artifacts.toml: sources relative to the repository, PTX to build/ptx, LLVM IR to build/llvm,
    tools to the build directory."""

    llvm_sources: list[str]  # the CPU kernels (and decoders) compiled to LLVM IR
    cmake: str  # where per-file compile options are set
    decoders: str  # the decoders' IR the one-row comparison executes
    avx512_rows: str  # the source whose flags the planted AVX-512 rows get
    cuda: str  # a build has CUDA when this PTX directory holds PTX
    complete: list[str]  # PTX directories whose every kernel needs an entry
    cutlass: str  # the CUTLASS instantiations' PTX directory
    gemm_chains: str  # the mma.sync GEMM's PTX
    attention_chains: str  # the tensor-core attention's PTX (compute_80)
    attention_chains_sm90: str  # ... and its compute_90a PTX (the wgmma kernel)
    gemm_plans: str
    attention_plans: str


def load_artifacts(path: str = DEFAULT_ARTIFACTS) -> Artifacts:
    """Errors: OSError, KeyError (a missing key), tomllib.TOMLDecodeError."""
    d = tomllib.load(open(path, "rb"))
    llvm, ptx, tools = d["llvm"], d["ptx"], d["tools"]
    return Artifacts(list(llvm["sources"]), llvm["cmake"], llvm["decoders"], llvm["avx512_rows"], ptx["cuda"],
                     list(ptx["complete"]), ptx["cutlass"], ptx["gemm_chains"], ptx["attention_chains"],
                     ptx["attention_chains_sm90"], tools["gemm_plans"], tools["attention_plans"])
