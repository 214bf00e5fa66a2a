# LLVM IR text as clang prints it: operand lists split at their top-level commas, "TYPE VALUE"
# pairs, and the x86-64 layout of its types (sizes, alignments, struct field offsets), for the
# LLVM reader (llvm.py) and the symbolic execution of the IR (symbolic/dag.py).
# Errors: Unsupported, for a type or an initializer this reader does not lay out.
from __future__ import annotations

import re

from .kir import split_outside

_TYPE_SIZES = {"float": 4, "double": 8, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "i1": 1, "half": 2, "bfloat": 2}


class Unsupported(Exception):
    """IR the analyzer does not model (a type, an instruction, a run outside its semantics): what
    depends on it is then not proven, and the message names it."""


def split_top(s: str) -> list[str]:
    """s split at the commas outside any (), [], {} or <>, items stripped."""
    return split_outside(s, "([{<", ")]}>")


def balanced(s: str, open_at: int) -> str:
    """The text inside the parenthesis that opens at s[open_at] (a define's parameter list, which
    a personality clause after it may follow)."""
    depth = 0
    for i in range(open_at, len(s)):
        depth += {"(": 1, ")": -1}.get(s[i], 0)
        if depth == 0:
            return s[open_at + 1:i]
    return s[open_at + 1:]


def split_typed(s: str) -> tuple[str, str]:
    """'TYPE VALUE' -> (TYPE, VALUE): the value is an aggregate in [] or {} at the end, or the
    last token."""
    s = s.strip()
    if s and s[-1] in "]}>":
        close, opening = s[-1], {"]": "[", "}": "{", ">": "<"}[s[-1]]
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += {close: 1, opening: -1}.get(s[i], 0)
            if depth == 0:
                return s[:i].strip(), s[i:]
        raise Unsupported(f"initializer {s[:40]}")
    head, _, tok = s.rpartition(" ")
    return head.strip(), tok


def type_size(t: str, types: dict[str, str]) -> int:
    """Bytes of a type (types: the module's named types)."""
    t = t.strip()
    if t.endswith("*") or t == "ptr":
        return 8
    if t in _TYPE_SIZES:
        return _TYPE_SIZES[t]
    m = re.match(r"^<(\d+) x (.+)>$", t)
    if m:
        return int(m.group(1)) * type_size(m.group(2), types)
    m = re.match(r"^\[(\d+) x (.+)\]$", t)
    if m:
        return int(m.group(1)) * type_size(m.group(2), types)
    if t in types:
        return type_size(types[t], types)
    m = re.match(r"^<?\{(.*)\}>?$", t)
    if m:
        fields = split_top(m.group(1))
        if not fields:
            return 0
        last = field_offsets(t, types)[-1] + type_size(fields[-1], types)
        a = 1 if t.startswith("<{") else type_align(t, types)
        return (last + a - 1) // a * a
    raise Unsupported(f"size of type {t}")


def type_align(t: str, types: dict[str, str]) -> int:
    """The ABI alignment of a type (x86-64: natural for scalars, the element's for arrays, the
    widest field's for structs)."""
    t = t.strip()
    if t.endswith("*") or t == "ptr":
        return 8
    if t in _TYPE_SIZES:
        return _TYPE_SIZES[t]
    m = re.match(r"^<(\d+) x (.+)>$", t)
    if m:
        return type_size(t, types)
    m = re.match(r"^\[(\d+) x (.+)\]$", t)
    if m:
        return type_align(m.group(2), types)
    if t in types:
        return type_align(types[t], types)
    if t.startswith("<{"):
        return 1
    m = re.match(r"^\{(.*)\}$", t)
    if m:
        return max([type_align(x, types) for x in split_top(m.group(1))] or [1])
    raise Unsupported(f"alignment of type {t}")


def field_offsets(t: str, types: dict[str, str]) -> list[int]:
    """Byte offsets of a struct type's fields (each at its alignment; packed: none)."""
    t = types.get(t.strip(), t.strip())
    packed = t.startswith("<{")
    fields = split_top(t[2:-2] if packed else t[1:-1])
    out, off = [], 0
    for f in fields:
        if not packed:
            a = type_align(f, types)
            off = (off + a - 1) // a * a
        out.append(off)
        off += type_size(f, types)
    return out
