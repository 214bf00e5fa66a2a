# The analyzer's program form: one function of a compiled artifact (a PTX entry or an LLVM IR
# function) as basic blocks of instructions, each reduced to what the information-flow analysis
# needs: the registers it defines and reads (data operands and address operands apart), its
# guard predicate, whether it is floating-point arithmetic, a memory access (space and address
# roots) or a branch. ptx.py and llvm.py build it; flow.py analyses it.
# Invariant: every register name is unique within its function; blocks list their successors.
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Inst:
    op: str  # the full opcode ("fma.rn.f32", "load", "call @llvm.fma.v8f32")
    kind: str  # arith | move | load | store | copy | atomic | branch | ret | call | barrier | other
    dsts: list[str] = field(default_factory=list)
    srcs: list[str] = field(default_factory=list)  # data operands
    addr: list[str] = field(default_factory=list)  # registers that form a memory address
    pred: str | None = None  # guard predicate (PTX @%p): the instruction runs only where it holds
    pred_neg: bool = False  # @!%p: runs where the predicate is false
    fp: bool = False  # floating-point arithmetic or rounding (its result's bits depend on order)
    fp_dst: bool = False  # defines a floating-point register
    space: str = ""  # memory space of a load/store/copy: global | shared | local | param | const
    dst_space: str = ""  # copy only: the destination's space (cp.async: shared <- global)
    dst_addr: list[str] = field(default_factory=list)  # copy only: the destination address registers
    targets: list[str] = field(default_factory=list)  # branch targets (block labels)
    special: list[str] = field(default_factory=list)  # special registers read (%ctaid.x ...)
    params: list[tuple[str, int]] = field(default_factory=list)  # ld.param (param, byte offset)
    symbols: list[str] = field(default_factory=list)  # address symbols (shared arrays, globals)
    callee: str = ""
    ignored_srcs: list[str] = field(default_factory=list)  # operands that are addresses in disguise
    args: list[str] = field(default_factory=list)  # PTX: every operand as written, registers renamed
    offset: int = 0  # immediate byte offset of the memory operand ([%r+off]); copies: of the source
    dst_offset: int = 0  # copies: immediate offset of the destination operand
    mem_sym: str = ""  # the symbol of the memory operand (loads, stores; a copy's source)
    dst_sym: str = ""  # copies: the symbol of the destination operand
    width: int = 0  # bytes a load/store/copy moves at its address (0: unknown)
    line: int = 0
    text: str = ""


@dataclass
class Block:
    label: str
    insts: list[Inst] = field(default_factory=list)
    succs: list[str] = field(default_factory=list)


@dataclass
class Function:
    name: str
    params: list[str]  # parameter names in order (PTX: NAME_param_i; LLVM: %0, %1 ...)
    blocks: list[Block]
    source: str = ""  # the artifact it came from
    kind: str = "ptx"  # ptx | llvm
    reg_types: dict[str, str] = field(default_factory=dict)  # register -> type ("f32", "b32" ...)
    symbols: dict[str, str] = field(default_factory=dict)  # PTX: symbol -> state space (shared, local, param ...)
    ntid: tuple[int, int, int] | None = None  # PTX .maxntid/.reqntid: the most threads per CTA

    def block(self, label: str) -> Block:
        for b in self.blocks:
            if b.label == label:
                return b
        raise KeyError(label)


def split_outside(s: str, opens: str, closes: str) -> list[str]:
    """s split at the commas outside the brackets `opens`/`closes`, items stripped (empty tail
    dropped): operand lists of PTX and LLVM IR text."""
    if not any(c in s for c in opens) and not any(c in s for c in closes):  # no brackets: a plain split
        out = [p.strip() for p in s.split(",")]
        if out and not out[-1]:
            out.pop()
        return out
    out, depth, cur = [], 0, []
    for ch in s:
        if ch in opens:
            depth += 1
        elif ch in closes:
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out
