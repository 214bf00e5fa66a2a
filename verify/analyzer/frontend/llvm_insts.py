# The LLVM IR instruction classifier of the front end (llvm.py): one line of a function body ->
# kir.Inst, by a table of opcode -> reader (and, for calls, a table of callee -> reader). What
# each reader records: the registers defined and read (data operands and address operands apart),
# memory accesses, branch targets, and whether the instruction is floating-point arithmetic.
# reg_types (register -> "fp" | "int") grows as definitions are read.
from __future__ import annotations

import re

from .kir import Inst
from .llvm_types import split_top

_FP_TYPE = re.compile(r"^(?:<\d+ x )?(half|bfloat|float|double|x86_fp80|fp128)>?$")
_VALUE = re.compile(r"%[\w.$-]+")
_LIBM = {"sqrtf", "sqrt", "cosf", "sinf", "expf", "logf", "powf", "tanhf", "cos", "sin", "exp", "log", "pow"}
FP_OPS = {"fadd", "fsub", "fmul", "fdiv", "frem", "fneg", "fptrunc", "fpext", "sitofp", "uitofp", "fptosi", "fptoui"}
_INT_OPS = {"add", "sub", "mul", "and", "or", "xor", "shl", "lshr", "ashr", "udiv", "sdiv", "urem", "srem"}
_FLAGS = {"fast", "nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc", "nuw", "nsw", "exact", "disjoint"}
_CASTS = {"sitofp", "uitofp", "fptrunc", "fpext", "fptosi", "fptoui", "trunc", "zext", "sext", "ptrtoint", "inttoptr"}


def is_fp(t: str) -> bool:
    """Whether an IR type is floating point (or a vector of it)."""
    return bool(_FP_TYPE.match(t.strip()))


def parse_inst(s: str, reg_types: dict[str, str]) -> Inst:
    """One instruction (comment stripped, "%dst = " included) as a kir.Inst."""
    dst = None
    m = re.match(r"^(%[\w.$-]+)\s*=\s*(.*)$", s)
    if m:
        dst, s = m.group(1), m.group(2)
    words = s.split()
    op = words[0] if words else ""
    if op in ("tail", "musttail", "notail"):
        op = words[1]
        s = s.split(None, 1)[1]
    inst = Inst(op=op, kind="arith")
    if dst:
        inst.dsts = [dst]
    values = [v for v in _VALUE.findall(s) if v != dst]
    return _READERS.get(op, _value)(inst, s, dst, values, reg_types)


def _define(reg_types: dict[str, str], dst: str | None, fp: bool) -> None:
    if dst:
        reg_types[dst] = "fp" if fp else "int"


# ---- control flow ----

def _br(inst: Inst, s: str, dst, values, reg_types) -> Inst:
    inst.kind = "branch"
    inst.targets = ["%" + x for x in re.findall(r"label %([\w.$-]+)", s)]
    cond = re.match(r"^br i1 (%[\w.$-]+),", s)
    if cond:
        inst.pred = cond.group(1)
    return inst


def _switch(inst: Inst, s: str, dst, values, reg_types) -> Inst:
    inst.kind = "branch"
    inst.targets = ["%" + x for x in re.findall(r"label %([\w.$-]+)", s)]
    inst.pred = values[0] if values else None
    return inst


def _end(inst: Inst, s: str, dst, values, reg_types) -> Inst:
    inst.kind = "ret"  # op "ret": a normal return; "unreachable", "resume": an abort or a throw
    return inst


# ---- memory ----

def _load(inst: Inst, s: str, dst, values, reg_types) -> Inst:
    inst.kind = "load"
    inst.space = "global"
    ty = s.split()[1].rstrip(",")
    inst.fp_dst = is_fp(ty)
    inst.addr = values
    if dst:
        reg_types[dst] = "fp" if inst.fp_dst else "int"
        if "*" in ty or ty == "ptr" or "ptr>" in ty:
            inst.op = "load ptr"
    return inst


def _store(inst: Inst, s: str, dst, values, reg_types) -> Inst:
    inst.kind = "store"
    inst.space = "global"
    parts = split_top(s[len("store"):])
    inst.srcs = _VALUE.findall(parts[0]) if parts else []
    inst.addr = _VALUE.findall(parts[1]) if len(parts) > 1 else []
    return inst


def _atomic(inst: Inst, s: str, dst, values, reg_types) -> Inst:
    inst.kind = "atomic"
    inst.space = "global"
    inst.fp = "fadd" in s or "fsub" in s or "fmax" in s or "fmin" in s
    parts = split_top(s.split(None, 1)[1] if " " in s else "")
    inst.addr = _VALUE.findall(parts[0]) if parts else []
    inst.srcs = [v for p in parts[1:] for v in _VALUE.findall(p)]
    return inst


def _pointer(inst: Inst, s: str, dst, values, reg_types) -> Inst:
    """getelementptr, bitcast, addrspacecast: pointer provenance (a bitcast may be of floats)."""
    inst.kind = "move"
    inst.srcs = [v for v in values if not re.match(r"^%\"?(class|struct|union)\.", v)]
    if dst:
        reg_types[dst] = "int" if inst.op == "getelementptr" else ("fp" if is_fp(s.split(" to ")[-1]) else "int")
    return inst


def _alloca(inst: Inst, s: str, dst, values, reg_types) -> Inst:
    inst.kind = "move"  # a stack object: the root of the addresses into it
    inst.symbols = [dst] if dst else []
    _define(reg_types, dst, False)
    return inst


# ---- calls: by callee ----

def _call(inst: Inst, s: str, dst, values, reg_types) -> Inst:
    cm = re.search(r"@([\w.$-]+)\(", s)
    im = re.search(r"(%[\w.$-]+)\(", s)
    inst.callee = cm.group(1) if cm else ("indirect:" + im.group(1) if im else "?")
    ty = re.match(r"^call\s+(?:[\w]+\s+)*?([^@]+?)\s+@", s)
    rty = ty.group(1).strip() if ty else ""
    for prefixes, reader in _CALLEES:
        if inst.callee.startswith(prefixes):
            return reader(inst, values, rty, dst, reg_types)
    if inst.callee in _LIBM:  # a function of its operands (sqrt: IEEE; the others: the one libm, assumed)
        return _libm(inst, values, rty, dst, reg_types)
    if inst.callee.startswith(("llvm.", "__")):
        return _intrinsic(inst, values, rty, dst, reg_types)
    inst.kind = "call"
    inst.srcs = values
    if inst.op == "invoke":  # a call that ends the block: normal and unwind successors
        inst.targets = ["%" + x for x in re.findall(r"label %([\w.$-]+)", s)]
        inst.srcs = [a for a in values if a.lstrip("%") not in {t.lstrip("%") for t in inst.targets}]
    _define(reg_types, dst, is_fp(rty))
    return inst


def _memcpy(inst: Inst, args, rty, dst, reg_types) -> Inst:
    inst.kind = "copy"
    inst.dst_addr = args[:1]
    inst.addr = args[1:2]
    inst.srcs = args[2:]
    inst.space = inst.dst_space = "global"
    return inst


def _memset(inst: Inst, args, rty, dst, reg_types) -> Inst:
    inst.kind = "store"
    inst.space = "global"
    inst.addr = args[:1]
    inst.srcs = args[1:]
    return inst


def _hint(inst: Inst, args, rty, dst, reg_types) -> Inst:
    inst.kind = "other"  # prefetch, lifetime, assume, noalias: no value moves
    inst.srcs = []
    return inst


def _masked_load(inst: Inst, args, rty, dst, reg_types) -> Inst:
    inst.kind = "load"
    inst.space = "global"
    inst.addr = args[:1]
    inst.srcs = args[1:]
    inst.fp_dst = is_fp(rty)
    _define(reg_types, dst, inst.fp_dst)
    return inst


def _masked_store(inst: Inst, args, rty, dst, reg_types) -> Inst:
    inst.kind = "store"
    inst.space = "global"
    inst.srcs = args[:1] + args[2:]
    inst.addr = args[1:2]
    return inst


def _libm(inst: Inst, args, rty, dst, reg_types) -> Inst:
    inst.kind = "arith"
    inst.op = "call @" + inst.callee
    inst.srcs = args
    inst.fp = inst.fp_dst = True
    _define(reg_types, dst, True)
    return inst


def _intrinsic(inst: Inst, args, rty, dst, reg_types) -> Inst:
    inst.kind = "arith"
    inst.op = "call @" + inst.callee
    inst.srcs = args
    inst.fp = is_fp(rty) or any(reg_types.get(a) == "fp" for a in args)
    inst.fp_dst = is_fp(rty)
    _define(reg_types, dst, inst.fp_dst)
    return inst


# callee prefixes -> reader, tried in order before libm, the other intrinsics and plain calls
_CALLEES = ((("llvm.memcpy", "llvm.memmove"), _memcpy), (("llvm.memset",), _memset),
            (("llvm.prefetch", "llvm.lifetime", "llvm.assume", "llvm.experimental.noalias"), _hint),
            (("llvm.masked.load",), _masked_load), (("llvm.masked.store",), _masked_store))


# ---- everything else computes a value from values ----

def _value(inst: Inst, s: str, dst, values, reg_types) -> Inst:
    op = inst.op
    inst.srcs = values
    rty = _RESULT_TYPE.get(op, lambda s: "")(s)
    inst.fp_dst = is_fp(rty)
    inst.fp = op in FP_OPS or (op == "select" and inst.fp_dst)
    _define(reg_types, dst, inst.fp_dst)
    return inst


def _operation_type(s: str) -> str:
    """The type after the opcode and its flags (add nsw i64 ..., fadd fast <8 x float> ...)."""
    parts = s.split()
    k = 1
    while k < len(parts) and parts[k] in _FLAGS:
        k += 1
    rty = parts[k].rstrip(",") if k < len(parts) else ""
    if rty.startswith("<"):
        rty = " ".join(parts[k:k + 3]).rstrip(",")
    return rty


def _select_type(s: str) -> str:
    parts = split_top(s[len("select"):])
    return parts[1].strip().rsplit(" ", 1)[0] if len(parts) > 1 else ""


def _extract_type(s: str) -> str:
    rty = s.split()[1]
    if rty.startswith("<"):
        rty = re.match(r"^extractelement\s+<\d+ x (\w+)>", s).group(1)
    return rty


def _vector_type(s: str) -> str:
    m = re.match(r"^\w+\s+(<[^>]+>)", s)
    return m.group(1) if m else ""


# The result type an instruction's fp-ness is read from (the conversions in FP_OPS read the type
# after the opcode, their source's: the order of the first reader's cases, kept as it was).
_RESULT_TYPE = {op: (lambda s: s.split(" to ")[-1].strip()) for op in _CASTS}
_RESULT_TYPE.update({op: _operation_type for op in ("phi", "fneg", "freeze") + tuple(FP_OPS | _INT_OPS)})
_RESULT_TYPE.update({"select": _select_type, "extractelement": _extract_type, "insertelement": _vector_type,
                     "shufflevector": _vector_type, "fcmp": lambda s: "i1", "icmp": lambda s: "i1"})

_READERS = {"br": _br, "switch": _switch, "ret": _end, "unreachable": _end, "resume": _end, "load": _load,
            "store": _store, "atomicrmw": _atomic, "cmpxchg": _atomic, "getelementptr": _pointer,
            "bitcast": _pointer, "addrspacecast": _pointer, "call": _call, "invoke": _call, "alloca": _alloca}
