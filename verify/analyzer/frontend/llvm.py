# LLVM IR front end: parses the textual IR clang emits for the CPU kernels (the build's flags:
# -O3 -march=x86-64-v3 -ffp-contract=off, no fast-math) into kir.Function, one per `define`.
# SSA values are registers; phi operands are data operands (the control flow that picks them is
# what flow.py's regions see); getelementptr/bitcast carry pointer provenance; loads, stores and
# llvm.masked.* / memcpy intrinsics are memory accesses; llvm.fma / x86 vector intrinsics on float
# types are floating-point arithmetic.
from __future__ import annotations

import re

from .kir import Block, Function, Inst, split_outside

_FP_TYPE = re.compile(r"^(?:<\d+ x )?(half|bfloat|float|double|x86_fp80|fp128)>?$")
_VALUE = re.compile(r"%[\w.$-]+")
_LIBM = {"sqrtf", "sqrt", "cosf", "sinf", "expf", "logf", "powf", "tanhf", "cos", "sin", "exp", "log", "pow"}
_FP_OPS = {"fadd", "fsub", "fmul", "fdiv", "frem", "fneg", "fptrunc", "fpext", "sitofp", "uitofp", "fptosi",
           "fptoui"}


def _is_fp(t: str) -> bool:
    return bool(_FP_TYPE.match(t.strip()))


def parse_llvm(path: str) -> list[Function]:
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    types: dict[str, str] = {}
    for ln in lines:
        tm = re.match(r"^(%[\w.\"\\:()\-<> ]+?) = type (.*)$", ln)
        if tm:
            types[tm.group(1)] = tm.group(2).strip()
    funcs = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("define "):
            m = re.match(r"^define .*?@([\w.$\"-]+)\(", line)
            if not m:
                i += 1
                continue
            name = m.group(1).strip('"')
            params, ptypes = [], {}
            for p in split_top(balanced(line, m.end() - 1)):
                pm = re.search(r"(%[\w.$-]+)\s*$", p.strip())
                if pm:
                    params.append(pm.group(1))
                    ptypes[pm.group(1)] = p.strip().split()[0]
            j = i + 1
            body = []
            while j < len(lines) and lines[j] != "}":
                if lines[j].lstrip().startswith("to label") and body:  # an invoke's continuation
                    body[-1] = (body[-1][0], body[-1][1] + " " + lines[j].strip())
                else:
                    body.append((j + 1, lines[j]))
                j += 1
            f = _parse_body(name, params, ptypes, body, path)
            _field_offsets(f, types)
            funcs.append(f)
            i = j + 1
            continue
        i += 1
    return funcs


def balanced(s: str, open_at: int) -> str:
    """The text inside the parenthesis that opens at s[open_at] (a define's parameter list, which
    a personality clause after it may follow)."""
    depth = 0
    for i in range(open_at, len(s)):
        depth += {"(": 1, ")": -1}.get(s[i], 0)
        if depth == 0:
            return s[open_at + 1:i]
    return s[open_at + 1:]


def split_top(s: str) -> list[str]:
    """s split at the commas outside any (), [], {} or <>, items stripped."""
    return split_outside(s, "([{<", ")]}>")


def _parse_body(name, params, ptypes, body, path) -> Function:
    blocks = [Block("%entry")]
    reg_types: dict[str, str] = {p: ("fp" if _is_fp(t) else "int") for p, t in ptypes.items()}
    for ln, raw in body:
        s = raw.split(";")[0].rstrip() if not raw.strip().startswith(";") else ""
        if not s.strip():
            continue
        lm = re.match(r"^([\w.$-]+):", s)
        if lm:
            blocks.append(Block("%" + lm.group(1)))
            continue
        inst = _parse_inst(s.strip(), reg_types)
        inst.line = ln
        inst.text = s.strip()
        blocks[-1].insts.append(inst)
    if not blocks[0].insts and len(blocks) > 1:
        blocks = blocks[1:] if False else blocks
    for bi, b in enumerate(blocks):
        succs: list[str] = []
        for inst in b.insts:
            if inst.kind == "branch" or (inst.kind == "call" and inst.targets):
                succs += inst.targets
        if not b.insts or b.insts[-1].kind not in ("branch", "ret") and not b.insts[-1].targets:
            if bi + 1 < len(blocks):
                succs.append(blocks[bi + 1].label)
        b.succs = list(dict.fromkeys(succs))
    return Function(name, params, blocks, path, "llvm", reg_types)


def _parse_inst(s: str, reg_types: dict[str, str]) -> Inst:
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
    if op == "br":
        inst.kind = "branch"
        labels = re.findall(r"label %([\w.$-]+)", s)
        inst.targets = ["%" + x for x in labels]
        cond = re.match(r"^br i1 (%[\w.$-]+),", s)
        if cond:
            inst.pred = cond.group(1)
        return inst
    if op == "switch":
        inst.kind = "branch"
        inst.targets = ["%" + x for x in re.findall(r"label %([\w.$-]+)", s)]
        inst.pred = values[0] if values else None
        return inst
    if op in ("ret", "unreachable", "resume"):
        inst.kind = "ret"
        inst.op = op  # "ret": a normal return; "unreachable", "resume": an abort or a throw
        return inst
    if op == "load":
        inst.kind = "load"
        inst.space = "global"
        ty = s.split()[1].rstrip(",")
        inst.fp_dst = _is_fp(ty)
        inst.addr = values
        if dst:
            reg_types[dst] = "fp" if inst.fp_dst else "int"
            if "*" in ty or ty == "ptr" or "ptr>" in ty:
                inst.op = "load ptr"
        return inst
    if op == "store":
        inst.kind = "store"
        inst.space = "global"
        parts = split_top(s[len("store"):])
        inst.srcs = _VALUE.findall(parts[0]) if parts else []
        inst.addr = _VALUE.findall(parts[1]) if len(parts) > 1 else []
        return inst
    if op in ("atomicrmw", "cmpxchg"):
        inst.kind = "atomic"
        inst.space = "global"
        inst.fp = "fadd" in s or "fsub" in s or "fmax" in s or "fmin" in s
        parts = split_top(s.split(None, 1)[1] if " " in s else "")
        inst.addr = _VALUE.findall(parts[0]) if parts else []
        inst.srcs = [v for p in parts[1:] for v in _VALUE.findall(p)]
        return inst
    if op == "getelementptr" or op == "bitcast" or op == "addrspacecast":
        inst.kind = "move"
        inst.op = op
        inst.srcs = [v for v in values if not re.match(r"^%\"?(class|struct|union)\.", v)]
        if dst:
            reg_types[dst] = "int" if op == "getelementptr" else ("fp" if _is_fp(s.split(" to ")[-1]) else "int")
        return inst
    if op == "call" or op == "invoke":
        cm = re.search(r"@([\w.$-]+)\(", s)
        im = re.search(r"(%[\w.$-]+)\(", s)
        callee = cm.group(1) if cm else ("indirect:" + im.group(1) if im else "?")
        inst.callee = callee
        args = values
        ty = re.match(r"^call\s+(?:[\w]+\s+)*?([^@]+?)\s+@", s)
        rty = ty.group(1).strip() if ty else ""
        if callee.startswith("llvm.memcpy") or callee.startswith("llvm.memmove"):
            inst.kind = "copy"
            inst.dst_addr = args[:1]
            inst.addr = args[1:2]
            inst.srcs = args[2:]
            inst.space = inst.dst_space = "global"
            return inst
        if callee.startswith("llvm.memset"):
            inst.kind = "store"
            inst.space = "global"
            inst.addr = args[:1]
            inst.srcs = args[1:]
            return inst
        if callee.startswith("llvm.prefetch") or callee.startswith("llvm.lifetime") or \
                callee.startswith("llvm.assume") or callee.startswith("llvm.experimental.noalias"):
            inst.kind = "other"
            inst.srcs = []
            return inst
        if callee.startswith("llvm.masked.load"):
            inst.kind = "load"
            inst.space = "global"
            inst.addr = args[:1]
            inst.srcs = args[1:]
            inst.fp_dst = _is_fp(rty)
            if dst:
                reg_types[dst] = "fp" if inst.fp_dst else "int"
            return inst
        if callee.startswith("llvm.masked.store"):
            inst.kind = "store"
            inst.space = "global"
            inst.srcs = args[:1] + args[2:]
            inst.addr = args[1:2]
            return inst
        if callee in _LIBM:  # a function of its operands (sqrt: IEEE; the others: the one libm, assumed)
            inst.kind = "arith"
            inst.op = "call @" + callee
            inst.srcs = args
            inst.fp = inst.fp_dst = True
            if dst:
                reg_types[dst] = "fp"
            return inst
        if callee.startswith("llvm.") or callee.startswith("__"):
            inst.kind = "arith"
            inst.op = "call @" + callee
            inst.srcs = args
            inst.fp = _is_fp(rty) or any(reg_types.get(a) == "fp" for a in args)
            inst.fp_dst = _is_fp(rty)
            if dst:
                reg_types[dst] = "fp" if inst.fp_dst else "int"
            return inst
        inst.kind = "call"
        inst.srcs = args
        if op == "invoke":  # a call that ends the block: normal and unwind successors
            inst.targets = ["%" + x for x in re.findall(r"label %([\w.$-]+)", s)]
            inst.srcs = [a for a in args if a.lstrip("%") not in {t.lstrip("%") for t in inst.targets}]
        if dst:
            reg_types[dst] = "fp" if _is_fp(rty) else "int"
        return inst
    if op == "alloca":  # a stack object: the root of the addresses into it
        inst.kind = "move"
        inst.symbols = [dst] if dst else []
        if dst:
            reg_types[dst] = "int"
        return inst
    # Everything else computes a value from values.
    inst.srcs = values
    rty = ""
    if op in ("phi", "select", "fneg", "freeze") or op in _FP_OPS or op in ("add", "sub", "mul", "and", "or", "xor",
                                                                             "shl", "lshr", "ashr", "udiv", "sdiv",
                                                                             "urem", "srem"):
        parts = s.split()
        if op == "select":
            rty = split_top(s[len("select"):])[1].strip().rsplit(" ", 1)[0] if len(split_top(s[len("select"):])) > 1 else ""
        else:
            k = 1
            while k < len(parts) and parts[k] in ("fast", "nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc",
                                                     "nuw", "nsw", "exact", "disjoint"):
                k += 1
            rty = parts[k].rstrip(",") if k < len(parts) else ""
            if rty.startswith("<"):
                rty = " ".join(parts[k:k + 3]).rstrip(",")
    elif op in ("extractelement",):
        rty = s.split()[1]
        if rty.startswith("<"):
            rty = re.match(r"^extractelement\s+<\d+ x (\w+)>", s).group(1)
    elif op in ("insertelement", "shufflevector"):
        rty = re.match(r"^\w+\s+(<[^>]+>)", s).group(1) if re.match(r"^\w+\s+(<[^>]+>)", s) else ""
    elif op in ("sitofp", "uitofp", "fptrunc", "fpext", "fptosi", "fptoui", "trunc", "zext", "sext", "ptrtoint",
                "inttoptr"):
        rty = s.split(" to ")[-1].strip()
    elif op == "fcmp" or op == "icmp":
        rty = "i1"
    inst.fp_dst = _is_fp(rty)
    inst.fp = op in _FP_OPS or (inst.fp_dst and op in ("phi", "select") and False)
    if op == "select" and inst.fp_dst:
        inst.fp = True
    if dst:
        reg_types[dst] = "fp" if inst.fp_dst else "int"
    return inst


def _field_offsets(f: Function, types: dict[str, str]) -> None:
    """Byte offsets of pointers into stack objects: inst.offset of each getelementptr with constant
    indices (relative to its base pointer; inst.args[0] = "const" then), and inst.width of every
    load and store (the bytes it moves). Used by flow.py for field-sensitive stack cells."""
    from ..symbolic import dag
    for b in f.blocks:
        for inst in b.insts:
            t = inst.text
            try:
                if inst.op == "getelementptr":
                    body = re.sub(r"^.*?getelementptr (inbounds )?", "", t)
                    parts = split_top(body)
                    cur, off, const = parts[0], 0, True
                    for k, idx in enumerate(parts[2:]):
                        v = idx.rsplit(" ", 1)[1]
                        if not re.match(r"^-?\d+$", v):
                            const = False
                            break
                        i = int(v)
                        if k == 0:
                            off += i * dag.type_size(cur, types)
                            continue
                        tt = types.get(cur, cur)
                        am = re.match(r"^\[(\d+) x (.+)\]$", tt)
                        sm = re.match(r"^<?\{(.*)\}>?$", tt)
                        if am:
                            cur = am.group(2)
                            off += i * dag.type_size(cur, types)
                        elif sm:
                            fields = split_top(sm.group(1))
                            off += dag.field_offsets(tt, types)[i]  # fields at their alignment
                            cur = fields[i]
                        else:
                            const = False
                            break
                    if const:
                        inst.offset = off
                        inst.args = ["const", parts[1].rsplit(" ", 1)[1]]  # the base pointer
                elif inst.kind in ("load", "store") and not inst.op.startswith("call"):
                    ty = t.split("load ", 1)[1].split(",")[0] if inst.kind == "load" else \
                        split_top(t.split("store ", 1)[1])[0].rsplit(" ", 1)[0]
                    inst.width = dag.type_size(ty.strip(), types)
            except (dag.Unsupported, IndexError, ValueError, KeyError):
                pass
