# What a spec entry (loader.py) says about one compiled function's inputs, for the information-flow
# analysis (checks/flow.py): the labels of its parameters and struct fields, of values loaded
# through its pointers, of the special registers; the constants and ranges a launch plan fixes;
# its extents; and the check that every ld.param reads a declared struct field whole and with its
# declared type.
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..domains.labels import EMPTY
from .loader import SIZES, KernelSpec, PlanSpec, Spec


# Special registers: the CTA's place and the grid's size vary with the batch unless an entry says
# otherwise; scheduling state always varies; the thread's place in its fixed CTA does not.
DEFAULT_SPECIAL = {
    "%tid.x": frozenset(f"tid{i}" for i in range(10)),
    "%tid": frozenset({"thread"}),  # .y, .z
    "%laneid": frozenset(f"tid{i}" for i in range(5)),
    "%lanemask_eq": frozenset({"thread"}),
    "%lanemask_le": frozenset({"thread"}),
    "%lanemask_lt": frozenset({"thread"}),
    "%lanemask_ge": frozenset({"thread"}),
    "%lanemask_gt": frozenset({"thread"}),
    "%ctaid": frozenset({"row"}),
    "%nctaid": frozenset({"rows", "padding"}),
    "%clusterid": frozenset({"row"}),
    "%cluster_ctaid": frozenset({"row"}),
    "%nclusterid": frozenset({"rows", "padding"}),
    "%warpid": frozenset({"schedule"}),
    "%nwarpid": frozenset({"schedule"}),
    "%smid": frozenset({"schedule"}),
    "%nsmid": frozenset({"schedule"}),
    "%clock": frozenset({"schedule"}),
    "%clock64": frozenset({"schedule"}),
    "%globaltimer": frozenset({"schedule"}),
    "%activemask": frozenset({"schedule"}),
    "%mbarrier_phase": frozenset({"schedule"}),
}


@dataclass
class Sources:
    """What the spec entry says about one function's inputs."""

    param_labels: dict[tuple[str, int], frozenset[str]] = field(default_factory=dict)  # (param, offset) -> axes
    param_default: frozenset[str] = EMPTY  # any other ld.param
    load_labels: dict[tuple, frozenset[str]] = field(default_factory=dict)  # cell root -> axes of loaded values
    address_ok: set[tuple] = field(default_factory=set)  # cells whose addresses may vary (inout rows)
    special: dict[str, frozenset[str]] = field(default_factory=dict)  # "%ctaid.x" -> axes
    assume_false: set[str] = field(default_factory=set)  # (unused: plans give constants instead)
    consts: dict[tuple[str, int], int] = field(default_factory=dict)  # (param, offset) -> value (a plan)
    special_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)  # "%ctaid.z" -> (0, 0) (a plan)
    extents: set[tuple[str, int]] = field(default_factory=set)  # (param, offset) of row/column counts
    pure_calls: str = ""  # regex of callees that only read memory (their result: their inputs' labels)
    elem_labels: dict[tuple, tuple] = field(default_factory=dict)  # pointer root -> (size, field labels, default)


def _elem_table(spec: Spec, struct: str) -> tuple[int, dict[int, frozenset[str]], frozenset[str]]:
    """(element size, byte offset -> labels of the field there, labels of any other byte)."""
    if struct not in spec.structs:
        raise ValueError(f"unknown struct {struct}")
    placed = spec.struct_offsets[struct]
    size = max(off + SIZES.get(f.type, 8) for off, f in placed)
    return size, {off: f.value_axes for off, f in placed}, spec.struct_defaults.get(struct, EMPTY)


def sources_for(spec: Spec, ks: KernelSpec, param_names: list[str], kind: str,
                plan: PlanSpec | None = None) -> Sources:
    """The information-flow sources of one compiled function under its spec entry.
    Errors: ValueError when the entry does not list exactly the function's parameters."""
    if len(ks.params) != len(param_names):
        raise ValueError(f"spec entry '{ks.name}' lists {len(ks.params)} parameters, the compiled function has "
                         f"{len(param_names)}: list every parameter (with @axes where it varies)")
    src = Sources()
    src.pure_calls = ks.pure_calls
    src.special = dict(DEFAULT_SPECIAL)
    src.special.update(ks.special)
    named: dict[str, tuple[str, int]] = {}
    for p, pname in zip(ks.params, param_names):
        if p.type in spec.structs:
            if p.type in spec.struct_defaults:
                src.param_default = src.param_default | spec.struct_defaults[p.type]
            for off, f in spec.struct_offsets[p.type]:
                named[f"{p.name}.{f.name}"] = (pname, off)
                src.param_labels[(pname, off)] = f.value_axes
                if f.extent:
                    src.extents.add((pname, off))
                if f.load_axes:
                    src.load_labels[("param", pname, off)] = f.load_axes
                if f.inout:
                    src.address_ok.add(("param", pname, off))
                if f.points_to:
                    src.elem_labels[("param", pname, off)] = _elem_table(spec, f.points_to)
        else:
            named[p.name] = (pname, 0)
            if p.extent:
                src.extents.add((pname, 0))
            src.param_labels[(pname, 0)] = p.value_axes
            if p.load_axes:
                src.load_labels[("param", pname, 0)] = p.load_axes
            if p.inout:
                src.address_ok.add(("param", pname, 0))
            if p.deep_axes:
                src.load_labels[("param", pname, "*")] = p.deep_axes
            if p.deep_inout:
                src.address_ok.add(("param", pname, "*"))
            if p.points_to:
                src.elem_labels[("param", pname, 0)] = _elem_table(spec, p.points_to)
    if plan is not None:
        for name, value in plan.consts.items():
            if name not in named:
                raise ValueError(f"plan '{plan.name}' of '{ks.name}' fixes {name}, which is not a parameter or field")
            src.consts[named[name]] = int(value)
            src.param_labels[named[name]] = EMPTY  # fixed by the plan: a constant, not a variation
        src.special_ranges.update(plan.ranges)
        for reg, (lo, hi) in plan.ranges.items():
            if lo == hi:
                src.special[reg] = EMPTY
    return src


_LD_TYPE = re.compile(r"^ld\.param(?:\.v(\d))?\.(\w+)$")
_DECLARED = {"f32": {"f32", "b32"}, "i32": {"u32", "s32", "b32"}, "u8": {"u8", "s8", "b8"},
             "ptr": {"u64", "s64", "b64"}, "i64": {"u64", "s64", "b64"}}


def check_param_types(spec: Spec, ks: KernelSpec, func) -> None:
    """Every ld.param that touches a declared struct field reads it whole and with its declared
    type (a field at a wrong offset, e.g. a CUTLASS Params layout that differs, shows up here).
    Errors: ValueError naming the field and the load."""
    structs = {p.name: p.type for p in ks.params if p.type in spec.structs}
    if not structs:
        return
    pname_of = dict(zip(func.params, [p.name for p in ks.params]))
    for b in func.blocks:
        for inst in b.insts:
            if inst.kind != "load" or inst.space != "param" or not inst.params:
                continue
            m = _LD_TYPE.match(inst.op)
            if not m:
                continue
            n, ty = int(m.group(1) or 1), m.group(2)
            size = inst.width // n if inst.width else 0
            p, off = inst.params[0]
            st = structs.get(pname_of.get(p, ""))
            if st is None or size == 0:
                continue
            for k in range(n):
                lo, hi = off + k * size, off + (k + 1) * size
                for foff, f in spec.struct_offsets[st]:
                    fsize = SIZES.get(f.type, 8)
                    if foff < hi and lo < foff + fsize:
                        ok = (lo, hi) == (foff, foff + fsize) and ty in _DECLARED.get(f.type, {ty})
                        if not ok:
                            raise ValueError(
                                f"spec entry '{ks.name}': field {f.name} ({f.type} at byte {foff}) is read as "
                                f"{ty} bytes [{lo}, {hi}) by line {inst.line}: {inst.text[:80]} (wrong layout?)")
