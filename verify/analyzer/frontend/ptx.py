# PTX front end: parses the PTX that nvcc emitted for the shipped build (kept beside the objects,
# build/ptx/<target>/*.ptx) into kir.Function, one per .entry. Every instruction is classified by
# its opcode (ISA 8.x): loads, stores, asynchronous copies (cp.async, TMA), atomics, branches,
# floating-point arithmetic and rounding, tensor-core instructions (mma.sync, wgmma) and the
# integer/predicate operations that compute addresses and control.
# Inline-asm scopes ({ .reg .pred p; ... }) get their local registers renamed per scope.
# Device functions (.func) called from an entry are not inlined: a call is reported by flow.py.
from __future__ import annotations

import re

from .kir import Block, Function, Inst, split_outside

_FLOAT_TYPES = ("f16", "f16x2", "bf16", "bf16x2", "f32", "f64", "tf32", "e4m3", "e5m2", "e4m3x2", "e5m2x2")
_REG_RE = re.compile(r"%[A-Za-z_$][\w$]*(?:\.[xyzw])?|[A-Za-z_$][\w$]*")
_SPECIAL = re.compile(
    r"^%(tid|ntid|laneid|warpid|nwarpid|ctaid|nctaid|smid|nsmid|gridid|clusterid|nclusterid|cluster_ctaid|"
    r"cluster_nctaid|cluster_ctarank|cluster_nctarank|is_explicit_cluster|lanemask_\w+|clock|clock64|"
    r"globaltimer\w*|pm\d|envreg\d+|total_smem_size|dynamic_smem_size|aggr_smem_size|reserved_smem\w*)"
    r"(\.[xyz])?$"
)
_ARITH_BASES = {
    "add", "sub", "mul", "mad", "fma", "div", "rem", "abs", "neg", "min", "max", "sqrt", "rsqrt", "rcp", "ex2",
    "lg2", "sin", "cos", "tanh", "and", "or", "xor", "not", "shl", "shr", "cvt", "cvta", "setp", "selp", "slct",
    "set", "popc", "clz", "brev", "bfe", "bfi", "prmt", "shf", "lop3", "dp4a", "dp2a", "mul24", "mad24", "sad",
    "testp", "copysign", "fns", "bmsk", "szext", "mma", "wgmma", "shfl", "vote", "match", "redux", "activemask",
    "mapa", "getctarank", "isspacep", "istypep", "elect", "movmatrix", "cnot", "madc", "addc", "subc", "mul.hi",
}


def _split_operands(s: str) -> list[str]:
    """A PTX operand list split at the commas outside {} and [] (vectors, addresses)."""
    return split_outside(s, "{[", "}]")


def _is_float_type(t: str) -> bool:
    return t in _FLOAT_TYPES


class _Scope:
    def __init__(self) -> None:
        self.stack: list[dict[str, str]] = []
        self.counter = 0

    def rename(self, name: str) -> str:
        for frame in reversed(self.stack):
            if name in frame:
                return frame[name]
        return name


def _regs_in(operand: str, scope: _Scope) -> list[str]:
    """Registers (or scoped names) in one operand, renamed for inline-asm scopes."""
    regs = []
    for tok in re.findall(r"%[A-Za-z_$][\w$]*(?:\.[xyzw])?|\b[A-Za-z_$][\w$]*\b", operand):
        if tok.startswith("%") or scope.rename(tok) != tok:
            regs.append(scope.rename(tok))
    return regs


def _mem_operand(operand: str, scope: _Scope):
    """[base+off] -> (registers, symbol, offset)."""
    inner = operand.strip()[1:-1].strip()
    m = re.match(r"^([%\w$.]+)\s*(?:\+\s*(-?\d+))?$", inner)
    if m:
        base, off = m.group(1), int(m.group(2) or 0)
        if base.startswith("%") or scope.rename(base) != base:
            return [scope.rename(base)], None, off
        return [], base, off
    return _regs_in(inner, scope), None, 0


def parse_ptx(path: str) -> tuple[list[Function], dict[str, str]]:
    """Every .entry of a PTX file, and the module's symbols with their state space."""
    text = open(path, encoding="utf-8", errors="replace").read()
    lines = text.split("\n")
    module_symbols: dict[str, str] = {}
    funcs: list[Function] = []
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i].strip()
        m = re.match(r"^(?:\.extern\s+)?(?:\.visible\s+|\.weak\s+)?\.(shared|global|const|local)\s+.*?([\w$]+)(\[|;|\s*=)", line)
        if m and not line.startswith(".entry"):
            module_symbols[m.group(2)] = m.group(1)
        if re.match(r"^(\.visible\s+|\.weak\s+)?\.entry\s", line):
            name = re.match(r"^.*\.entry\s+([\w$]+)", line).group(1)
            params: list[str] = []
            ntid = None
            j = i + 1
            while not lines[j].strip().startswith("{"):
                pm = re.search(r"\.param\s+.*?([\w$]+)(\[\d+\])?\s*,?\s*$", lines[j].strip())
                if pm and ".param" in lines[j]:
                    params.append(pm.group(1))
                nm = re.match(r"^\.(?:maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", lines[j].strip())
                if nm:
                    ntid = tuple(int(g or 1) for g in nm.groups())
                j += 1
            body_start = j + 1
            depth = 1
            k = body_start
            while k < n and depth > 0:
                s = lines[k].strip()
                if s == "{":
                    depth += 1
                elif s == "}":
                    depth -= 1
                k += 1
            f = _parse_body(name, params, lines, body_start, k - 1, path, module_symbols)
            f.ntid = ntid
            funcs.append(f)
            i = k
            continue
        i += 1
    return funcs, module_symbols


def _scoped_labels(lines, start, end) -> dict[int, dict[str, str]]:
    """Labels declared inside inline-asm scopes ({ ... }), which are local to their scope:
    line -> {label: unique name} for every line inside such a scope."""
    out: dict[int, dict[str, str]] = {}
    stack: list[tuple[int, dict[str, str]]] = []
    counter = 0
    frames = []
    for ln in range(start, end):
        st = lines[ln].split("//")[0].strip()
        for piece in [t.strip() for t in st.split(";")] if st else []:
            pass
        if st.startswith("{"):
            counter += 1
            frame: dict[str, str] = {}
            stack.append((counter, frame))
            frames.append(frame)
        if stack:
            m = re.match(r"^([A-Za-z_$][\w$]*):$", st)
            if m:
                stack[-1][1][m.group(1)] = f"{m.group(1)}#a{stack[-1][0]}"
            out[ln] = stack[-1][1]
        if st.endswith("}") and stack:
            stack.pop()
    return out


def _parse_body(name, params, lines, start, end, path, module_symbols) -> Function:
    scope = _Scope()
    scoped_labels = _scoped_labels(lines, start, end)
    reg_types: dict[str, str] = {}
    blocks: list[Block] = [Block("entry")]
    local_symbols = dict(module_symbols)
    anon = 0
    need_ret_block = False
    for ln in range(start, end):
        raw = lines[ln]
        s = raw.split("//")[0].strip()
        if not s:
            continue
        if s == "{":
            scope.stack.append({})
            continue
        if s == "}":
            if scope.stack:
                scope.stack.pop()
            continue
        if s.endswith(":") and not s.startswith("."):
            label = scoped_labels.get(ln, {}).get(s[:-1], s[:-1])
            blocks.append(Block(label))
            continue
        for stmt in [t.strip() for t in s.split(";") if t.strip()]:
            if stmt in ("{", "}"):
                if stmt == "{":
                    scope.stack.append({})
                elif scope.stack:
                    scope.stack.pop()
                continue
            if stmt.startswith("{"):
                scope.stack.append({})
                stmt = stmt[1:].strip()
                if not stmt:
                    continue
            if stmt.startswith(".reg"):
                rm = re.match(r"^\.reg\s+\.(\w+)\s+(.*)$", stmt)
                if rm:
                    rtype = rm.group(1)
                    for decl in rm.group(2).split(","):
                        decl = decl.strip()
                        base = re.match(r"^(%?[\w$]+)", decl).group(1)
                        if scope.stack and not decl.startswith("%"):
                            scope.counter += 1
                            scope.stack[-1][base] = f"{base}#s{scope.counter}"
                            reg_types[f"{base}#s{scope.counter}"] = rtype
                        elif scope.stack and decl.startswith("%") and "<" not in decl:
                            scope.counter += 1
                            scope.stack[-1][base] = f"{base}#s{scope.counter}"
                            reg_types[f"{base}#s{scope.counter}"] = rtype
                        else:
                            reg_types[base.rstrip("<")] = rtype  # %f<3>: prefix %f
                continue
            if stmt.startswith(".local") or stmt.startswith(".shared"):
                sm = re.search(r"([\w$]+)\s*(\[|$)", stmt.split(".b8")[-1] if ".b8" in stmt else stmt)
                if sm:
                    local_symbols[sm.group(1)] = "local" if stmt.startswith(".local") else "shared"
                continue
            if stmt.startswith("."):
                continue  # .loc, .pragma, .maxnreg ...
            inst = _parse_inst(stmt, scope, local_symbols)
            if inst.kind == "branch" and ln in scoped_labels:
                inst.targets = [scoped_labels[ln].get(t, t) for t in inst.targets]
            inst.line = ln + 1
            inst.text = stmt
            if inst.kind == "ret" and inst.pred is not None:  # @p ret: a branch to the exit
                inst.kind = "branch"
                inst.targets = ["$__ret"]
                need_ret_block = True
            blocks[-1].insts.append(inst)
            if inst.kind in ("branch", "ret"):  # a block ends at every branch
                anon += 1
                blocks.append(Block(f"$__fall{anon}"))
    if need_ret_block:
        blocks.append(Block("$__ret", [Inst(op="ret", kind="ret")]))
    blocks = [b for b in blocks if b.insts or b.label.startswith("$L") or b.label == "entry" or not
              b.label.startswith("$__fall")]
    # Successors: fall-through unless the block ends in an unconditional branch or ret.
    for bi, b in enumerate(blocks):
        succs: list[str] = []
        fall = True
        for inst in b.insts:
            if inst.kind == "branch":
                succs.extend(inst.targets)
                if inst.pred is None:
                    fall = False
            if inst.kind == "ret" and inst.pred is None:
                fall = False
        if fall and bi + 1 < len(blocks):
            succs.append(blocks[bi + 1].label)
        b.succs = list(dict.fromkeys(succs))
    f = Function(name, params, blocks, path, "ptx", {})
    f.symbols = dict(local_symbols)
    f.symbols.update({p: "param" for p in params})
    f.reg_types = _expand_types(reg_types)
    _resolve_param_addresses(f, set(params))
    return f


def _resolve_param_addresses(f: Function, params: set[str]) -> None:
    """ld.param [%rd+off] where %rd holds a parameter's address (mov.b64 %rd, NAME_param_0; add;
    cvta.param): record (param, offset) as for [NAME_param_0+off]."""
    at: dict[str, tuple[str, int]] = {}
    for _ in range(3):
        for b in f.blocks:
            for inst in b.insts:
                base = inst.op.split(".")[0]
                if inst.kind == "move" and inst.symbols and inst.symbols[0] in params and inst.dsts:
                    at[inst.dsts[0]] = (inst.symbols[0], 0)
                elif base in ("cvta", "mov") and inst.srcs and inst.srcs[0] in at and inst.dsts:
                    at[inst.dsts[0]] = at[inst.srcs[0]]
                elif base == "add" and inst.dsts and len(inst.srcs) == 1 and inst.srcs[0] in at:
                    m = re.search(r",\s*(-?\d+)\s*$", inst.text)
                    if m:
                        p, off = at[inst.srcs[0]]
                        at[inst.dsts[0]] = (p, off + int(m.group(1)))
    for b in f.blocks:
        for inst in b.insts:
            if inst.kind == "load" and inst.space == "param" and not inst.params and inst.addr:
                r = inst.addr[0]
                if r in at:
                    m = re.search(r"\[\s*[%\w$]+\s*\+\s*(-?\d+)\s*\]", inst.text)
                    p, off = at[r]
                    inst.params.append((p, off + (int(m.group(1)) if m else 0)))
                else:
                    inst.params.append(("<unknown param>", -1))


def _expand_types(reg_types: dict[str, str]) -> dict[str, str]:
    return reg_types  # prefixes (%f) and scoped names; reg_type() below resolves a register


def reg_type(func: Function, reg: str) -> str:
    t = func.reg_types.get(reg)
    if t:
        return t
    m = re.match(r"^(%[A-Za-z_]+)\d+$", reg)
    if m:
        return func.reg_types.get(m.group(1), "")
    return ""


def _types_of(op: str) -> list[str]:
    return [p for p in op.split(".")[1:] if re.match(r"^(b|s|u|f|bf)\d+(x\d+)?$|^pred$|^tf32$|^e[45]m[23](x2)?$", p)]


def _rename_all(operand: str, scope: _Scope) -> str:
    if not scope.stack:
        return operand.strip()
    return re.sub(r"%?[A-Za-z_$][\w$]*", lambda m: scope.rename(m.group(0)), operand.strip())


_VEC = re.compile(r"\.v(\d)\.")


def _access_width(op: str) -> int:
    """Bytes one load/store moves (vector count x element size); 0 when not a plain access.
    ldmatrix/stmatrix: each thread's address names one 16-byte row of an 8x8 b16 matrix."""
    if op.startswith("ldmatrix") or op.startswith("stmatrix"):
        return 16
    t = _types_of(op)
    if not t:
        return 0
    m = re.match(r"^[a-z]+?(\d+)", t[-1])
    bits = int(m.group(1)) if m else 0
    if "x" in t[-1]:
        bits *= int(t[-1].split("x")[1])
    v = _VEC.search(op + ".")
    return bits // 8 * (int(v.group(1)) if v else 1)


def _parse_inst(stmt: str, scope: _Scope, symbols: dict[str, str]) -> Inst:
    pred = None
    neg = False
    pm = re.match(r"^@(!?)(%?[\w$]+)\s+(.*)$", stmt)
    if pm:
        pred = scope.rename(pm.group(2))
        neg = pm.group(1) == "!"
        stmt = pm.group(3)
    parts = stmt.split(None, 1)
    op = parts[0]
    rest = parts[1] if len(parts) > 1 else ""
    ops = _split_operands(rest)
    base = op.split(".")[0]
    inst = Inst(op=op, kind="other", pred=pred)
    inst.pred_neg = neg
    types = _types_of(op)
    any_float = any(_is_float_type(t) for t in types)

    def regs(o: str) -> list[str]:
        return _regs_in(o, scope)

    def memory(o: str):
        rs, sym, off = _mem_operand(o, scope)
        if sym:
            inst.symbols.append(sym)
        return rs, sym, off

    inst.args = [_rename_all(o, scope) for o in ops]
    inst.width = _access_width(op)

    def space_of(sym: str | None, default: str) -> str:
        for sp in ("shared::cluster", "shared::cta", "shared", "global", "local", "param", "const"):
            if f".{sp}" in op:
                return sp.split("::")[0]
        if sym and sym in symbols:
            return symbols[sym]
        return default

    if base in ("bra", "brx"):
        inst.kind = "branch"
        inst.targets = [t.strip() for t in ops if t.strip().startswith("$") or re.match(r"^[\w$]+$", t.strip())]
        return inst
    if base in ("ret", "exit", "trap"):
        inst.kind = "ret"
        return inst
    if base in ("bar", "barrier", "membar", "fence", "griddepcontrol", "setmaxnreg", "nanosleep", "pmevent",
                "prefetch", "prefetchu", "discard", "applypriority", "createpolicy", "tensormap", "wgmma.fence"):
        inst.kind = "barrier"
        for o in ops:
            if o.startswith("["):
                memory(o)
            else:
                inst.srcs += regs(o)
        if base == "createpolicy":  # a cache policy: a hint, moves no value
            inst.kind = "other"
            inst.dsts = regs(ops[0]) if ops else []
            inst.srcs = []
        return inst
    if op.startswith("wgmma.fence") or op.startswith("wgmma.commit_group") or op.startswith("wgmma.wait_group"):
        inst.kind = "barrier"
        return inst
    if base == "call":
        inst.kind = "call"
        m = re.search(r"([\w$]+)\s*,?\s*\(", rest) or re.search(r"\b([\w$]+)\b", rest)
        inst.callee = m.group(1) if m else "?"
        inst.srcs = [r for o in ops for r in regs(o)]
        return inst
    if base in ("ld", "ldu", "ldmatrix", "tex", "tld4", "suld"):
        inst.kind = "load"
        inst.dsts = regs(ops[0])
        rs, sym, off = memory(ops[1])
        inst.addr = rs
        inst.offset = off
        inst.mem_sym = sym or ""
        inst.space = space_of(sym, "generic")
        if inst.space == "param" and sym:
            inst.params.append((sym, off))
        inst.fp_dst = any_float
        return inst
    if base in ("st", "stmatrix", "sust"):
        inst.kind = "store"
        rs, sym, off = memory(ops[0])
        inst.addr = rs
        inst.offset = off
        inst.mem_sym = sym or ""
        inst.space = space_of(sym, "generic")
        inst.srcs = [r for o in ops[1:] for r in regs(o)]
        return inst
    if base in ("atom", "red") or op.startswith("cp.reduce"):
        inst.kind = "atomic"
        inst.fp = any_float
        if base == "atom":
            inst.dsts = regs(ops[0])
            rs, sym, off = memory(ops[1])
            inst.srcs = [r for o in ops[2:] for r in regs(o)]
        else:
            rs, sym, off = memory(ops[0])
            inst.srcs = [r for o in ops[1:] for r in regs(o)]
        inst.addr = rs
        inst.offset = off
        inst.mem_sym = sym or ""
        inst.space = space_of(sym, "global")
        return inst
    if base == "mbarrier" or op.startswith("cp.async.mbarrier") or base == "elect" and False:
        inst.kind = "other"
        if ops and not ops[0].startswith("["):
            inst.dsts = regs(ops[0])
            for o in ops[1:]:
                if o.startswith("["):
                    memory(o)
        inst.special = ["%mbarrier_phase"]  # completion state: timing, not data
        return inst
    if base == "cp":  # cp.async / cp.async.bulk(.tensor): memory to memory
        if op.startswith("cp.async.commit_group") or op.startswith("cp.async.wait") or \
                op.startswith("cp.async.bulk.commit_group") or op.startswith("cp.async.bulk.wait_group"):
            inst.kind = "barrier"
            return inst
        inst.kind = "copy"
        mem_ops = [o for o in ops if o.startswith("[")]
        other = [o for o in ops if not o.startswith("[")]
        dst = mem_ops[0] if mem_ops else ""
        src = mem_ops[1] if len(mem_ops) > 1 else ""
        drs, dsym, doff = memory(dst) if dst else ([], None, 0)
        inst.dst_addr = drs
        inst.dst_offset = doff
        srs, ssym, soff = memory(src) if src else ([], None, 0)
        inst.addr = srs
        inst.offset = soff
        m_size = re.match(r"^\s*(\d+)\s*$", other[0]) if other else None
        inst.width = int(m_size.group(1)) if m_size and op.startswith("cp.async.c") else 0
        # cp.async.ca/cg.shared.global [dst], [src], size{, src-size}: src-size 0 zero-fills: data.
        if op.startswith("cp.async.ca") or op.startswith("cp.async.cg"):
            inst.srcs = [r for o in other[1:] for r in regs(o)]
        else:  # bulk / tensor: multicast masks, cache hints, byte counts: addresses and hints
            inst.addr = srs + [r for o in other for r in regs(o)]
        m = re.match(r"^cp\.(?:async\.)?(?:bulk\.)?(?:tensor\.\w+\.)?(?:[\w:]+\.)?", op)
        spaces = re.findall(r"\.(shared::cluster|shared::cta|shared|global)", op)
        inst.dst_space = spaces[0].split("::")[0] if spaces else "shared"
        inst.space = spaces[1].split("::")[0] if len(spaces) > 1 else "global"
        inst.mem_sym = ssym or ""
        inst.dst_sym = dsym or ""
        return inst
    if base == "mov" and len(ops) == 2:
        inst.kind = "move"
        inst.dsts = regs(ops[0])
        src = ops[1].strip()
        sp = _SPECIAL.match(src)
        if sp:
            inst.special.append(src)
        elif src.startswith("%") or scope.rename(src) != src:
            inst.srcs = regs(src)
        elif re.match(r"^[A-Za-z_$][\w$]*$", src):
            inst.symbols.append(src)  # the address of a symbol
        elif src.startswith("{"):
            inst.srcs = regs(src)
        inst.fp_dst = any_float
        return inst
    # Everything else computes registers from registers.
    inst.kind = "arith"
    if base in ("mma", "wgmma"):
        inst.fp = True
        inst.fp_dst = True
        inst.dsts = regs(ops[0])
        for idx, o in enumerate(ops[1:], start=1):
            rs = regs(o)
            if base == "wgmma" and not o.startswith("{") and idx <= 2:
                # wgmma's shared-memory matrix descriptors: addresses of the operand tiles.
                inst.addr += rs
                inst.ignored_srcs += rs
            else:
                inst.srcs += rs
        if base == "wgmma" and ".sync" in op and "mma_async" in op:
            inst.srcs += inst.dsts  # the accumulator is read (scale-d) and written
        return inst
    dst_ops = ops[:1]
    src_ops = ops[1:]
    if base in ("setp", "set") and dst_ops and "|" in dst_ops[0]:
        dst_ops = [d for d in dst_ops[0].split("|")]
    inst.dsts = [r for o in dst_ops for r in regs(o)]
    for o in src_ops:
        sp = _SPECIAL.match(o.strip())
        if sp:
            inst.special.append(o.strip())
        else:
            inst.srcs += regs(o)
            for tok in re.findall(r"\b[A-Za-z_$][\w$]*\b", o):
                if tok in symbols:
                    inst.symbols.append(tok)
    if base == "activemask":
        inst.special.append("%activemask")
    if base == "cvta":
        inst.kind = "move"
    # Floating-point arithmetic and rounding: its result's bits depend on the operation order.
    if any_float and base not in ("setp", "set", "testp", "selp", "slct", "mov", "shfl", "prmt"):
        inst.fp = True
    if base == "cvt" and any_float:
        inst.fp = True
    inst.fp_dst = any_float and base not in ("setp", "set", "testp")
    if base in ("selp", "slct") and any_float:
        inst.fp = True  # a floating-point choice: its predicate shapes the value
    return inst
