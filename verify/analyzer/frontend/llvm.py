# LLVM IR front end: the one reader of the textual IR clang emits for the CPU kernels (the build's
# flags: -O3 -march=x86-64-v3 -ffp-contract=off, no fast-math). LlvmModule reads a .ll file once:
# its named types, its constant globals (by element, for the symbolic execution's loads from
# constant tables) and each `define`'s parameters and body lines (comments stripped; an invoke's
# `to label` line and a switch's case lines joined to their instruction). parse_llvm turns each
# function into kir.Function for the information-flow analysis: SSA values are registers; phi
# operands are data operands (the control flow that picks them is what flow.py's regions see);
# getelementptr/bitcast carry pointer provenance; loads, stores and llvm.masked.* / memcpy
# intrinsics are memory accesses; llvm.fma / x86 vector intrinsics on float types are
# floating-point arithmetic (llvm_insts.py classifies the instructions).
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .kir import Block, Function
from .llvm_insts import is_fp, parse_inst
from .llvm_types import Unsupported, balanced, field_offsets, split_top, split_typed, type_size

_TYPE = re.compile(r"^(%[\w.\"\\:()\-<> ]+?) = type (.*)$")
_GLOBAL = re.compile(r"^(@[\w.$-]+) = .*?\bconstant (.*?)(?:, align \d+)?$")
_DEFINE = re.compile(r"^define .*?@([\w.$\"-]+)\(")


@dataclass
class LlvmFunction:
    """One `define`: its parameters (%0, %1 ... in order, with their types) and its body lines
    (line number, text)."""

    name: str
    params: list[str]
    param_types: dict[str, str]
    lines: list[tuple[int, str]] = field(default_factory=list)

    @property
    def body(self) -> list[str]:
        return [text for _, text in self.lines]


class LlvmModule:
    """One .ll file: named types, constant globals and defined functions."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.types: dict[str, str] = {}
        self.globals: dict[str, str] = {}  # @name -> "type initializer" of a constant
        self.funcs: dict[str, LlvmFunction] = {}
        self._flat: dict[str, dict[int, tuple[int, object]]] = {}
        lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
        i = 0
        while i < len(lines):
            ln = lines[i]
            tm = _TYPE.match(ln)
            if tm:
                self.types[tm.group(1)] = tm.group(2).strip()
            gm = _GLOBAL.match(ln)
            if gm:
                self.globals[gm.group(1)] = gm.group(2)
            m = _DEFINE.match(ln) if ln.startswith("define ") else None
            if m:
                f = _header(m.group(1).strip('"'), ln, m.end() - 1)
                i = _read_body(lines, i + 1, f.lines)
                self.funcs[f.name] = f
            i += 1

    def global_element(self, name: str, off: int, size: int):
        """The constant at byte `off` of global `name` (an element of `size` bytes), or raises."""
        if name not in self._flat:
            if name not in self.globals:
                raise Unsupported(f"load from {name}, not a constant global of the module")
            flat: dict[int, tuple[int, object]] = {}
            ty, init = split_typed(self.globals[name])
            self._flatten(ty, init, 0, flat)
            self._flat[name] = flat
        got = self._flat[name].get(off)
        if got is None or got[0] != size:
            raise Unsupported(f"load of {size} bytes at {name}+{off}: not an element of its initializer")
        return got[1]

    def _flatten(self, ty: str, init: str, base: int, out: dict) -> None:
        """The elements of a constant initializer: byte offset -> (bytes, int or pointer or None)."""
        ty, init = ty.strip(), init.strip()
        t = self.types.get(ty, ty)
        if init == "zeroinitializer":
            out[base] = (type_size(ty, self.types), 0)  # only whole-element reads of it succeed
            return
        if ty.endswith("*") or ty == "ptr":
            if init == "null":
                out[base] = (8, None)
            elif init.startswith("@"):
                out[base] = (8, ("ptr", init, 0))
            else:
                raise Unsupported(f"initializer {init[:40]}")
            return
        if re.match(r"^i\d+$", ty):
            out[base] = (type_size(ty, self.types), int(init))
            return
        am = re.match(r"^\[(\d+) x (.+)\]$", t)
        sm = re.match(r"^<?\{(.*)\}>?$", t)
        if am and init.startswith("["):
            step = type_size(am.group(2), self.types)
            for j, item in enumerate(split_top(init[1:-1])):
                self._flatten(*split_typed(item), base + j * step, out)
            return
        if sm and init.startswith("{"):
            for off, item in zip(field_offsets(t, self.types), split_top(init[1:-1])):
                self._flatten(*split_typed(item), base + off, out)
            return
        raise Unsupported(f"constant of type {ty[:40]}")


def _header(name: str, line: str, open_at: int) -> LlvmFunction:
    params, ptypes = [], {}
    for p in split_top(balanced(line, open_at)):
        pm = re.search(r"(%[\w.$-]+)\s*$", p.strip())
        if pm:
            params.append(pm.group(1))
            ptypes[pm.group(1)] = p.strip().split()[0]
    return LlvmFunction(name, params, ptypes)


def _read_body(lines: list[str], i: int, out: list[tuple[int, str]]) -> int:
    """Appends the body lines from lines[i] to the closing "}"; returns that line's index."""
    while i < len(lines) and lines[i] != "}":
        raw = lines[i]
        s = raw.split(";")[0].rstrip() if not raw.strip().startswith(";") else ""
        if raw.lstrip().startswith("to label") and out:  # an invoke's continuation
            out[-1] = (out[-1][0], out[-1][1] + " " + raw.strip())
        elif out and out[-1][1].lstrip().startswith("switch") and not out[-1][1].rstrip().endswith("]"):
            out[-1] = (out[-1][0], out[-1][1] + " " + s.strip())  # a switch's case list, one case a line
        elif s.strip():
            out.append((i + 1, s))
        i += 1
    return i


def parse_llvm(path: str) -> list[Function]:
    """Every defined function of a .ll file as kir.Function."""
    module = LlvmModule(path)
    funcs = []
    for f in module.funcs.values():
        func = _function(f, path)
        _field_offsets(func, module.types)
        funcs.append(func)
    return funcs


def _function(f: LlvmFunction, path: str) -> Function:
    blocks = [Block("%entry")]
    reg_types: dict[str, str] = {p: ("fp" if is_fp(t) else "int") for p, t in f.param_types.items()}
    for ln, s in f.lines:
        lm = re.match(r"^([\w.$-]+):", s)
        if lm:
            blocks.append(Block("%" + lm.group(1)))
            continue
        inst = parse_inst(s.strip(), reg_types)
        inst.line = ln
        inst.text = s.strip()
        blocks[-1].insts.append(inst)
    for bi, b in enumerate(blocks):
        succs: list[str] = []
        for inst in b.insts:
            if inst.kind == "branch" or (inst.kind == "call" and inst.targets):
                succs += inst.targets
        if not b.insts or b.insts[-1].kind not in ("branch", "ret") and not b.insts[-1].targets:
            if bi + 1 < len(blocks):
                succs.append(blocks[bi + 1].label)
        b.succs = list(dict.fromkeys(succs))
    return Function(f.name, f.params, blocks, path, "llvm", reg_types)


def _gep_offset(text: str, types: dict[str, str]) -> tuple[int, str] | None:
    """(byte offset, base pointer) of a getelementptr whose indices are all constants, else None."""
    parts = split_top(re.sub(r"^.*?getelementptr (inbounds )?", "", text))
    cur, off = parts[0], 0
    for k, idx in enumerate(parts[2:]):
        v = idx.rsplit(" ", 1)[1]
        if not re.match(r"^-?\d+$", v):
            return None
        i = int(v)
        if k == 0:
            off += i * type_size(cur, types)
            continue
        tt = types.get(cur, cur)
        am = re.match(r"^\[(\d+) x (.+)\]$", tt)
        sm = re.match(r"^<?\{(.*)\}>?$", tt)
        if am:
            cur = am.group(2)
            off += i * type_size(cur, types)
        elif sm:
            off += field_offsets(tt, types)[i]  # fields at their alignment
            cur = split_top(sm.group(1))[i]
        else:
            return None
    return off, parts[1].rsplit(" ", 1)[1]


def _field_offsets(f: Function, types: dict[str, str]) -> None:
    """Byte offsets of pointers into stack objects: inst.offset of each getelementptr with constant
    indices (relative to its base pointer; inst.args[0] = "const" then), and inst.width of every
    load and store (the bytes it moves). Used by flow.py for field-sensitive stack cells."""
    for b in f.blocks:
        for inst in b.insts:
            t = inst.text
            try:
                if inst.op == "getelementptr":
                    got = _gep_offset(t, types)
                    if got is not None:
                        inst.offset = got[0]
                        inst.args = ["const", got[1]]  # the base pointer
                elif inst.kind in ("load", "store") and not inst.op.startswith("call"):
                    ty = t.split("load ", 1)[1].split(",")[0] if inst.kind == "load" else \
                        split_top(t.split("store ", 1)[1])[0].rsplit(" ", 1)[0]
                    inst.width = type_size(ty.strip(), types)
            except (Unsupported, IndexError, ValueError, KeyError):
                pass
