# PTX front end: the one reader of the PTX that nvcc emitted for the shipped build (kept beside the
# objects, build/ptx/<target>/*.ptx). PtxModule reads a file once: its lines, its module-level
# symbols (shared, global, const, local) with their state space, each .entry's parameters,
# .maxntid/.reqntid and body lines, and the .shared/.local declarations the symbolic execution
# lays out; parse_ptx turns every entry into kir.Function (function() one entry alone). Every
# instruction is classified by its opcode (ptx_insts.py). Inline-asm scopes ({ .reg .pred p;
# ... }) get their local registers and labels renamed per scope. Device functions (.func) called
# from an entry are not inlined: a call is reported by flow.py.
from __future__ import annotations

import re
from dataclasses import dataclass

from .kir import Block, Function, Inst
from .ptx_insts import Scope, parse_inst

_SYMBOL = re.compile(r"^(?:\.extern\s+)?(?:\.visible\s+|\.weak\s+)?\.(shared|global|const|local)\s+.*?([\w$]+)(\[|;|\s*=)")
_SHARED = re.compile(r"\.shared\s+\.align\s+(\d+)\s+\.[a-z]+(\d+)\s+([\w$]+)(?:\[(\d*)\])?\s*;")
_LOCAL = re.compile(r"\.local\s+\.align\s+\d+\s+\.b8\s+([\w$]+)\[(\d+)\]")


@dataclass
class PtxEntry:
    """One .entry: its name, parameters, thread bound, body lines [start, end) and the module's
    symbols declared before it."""

    name: str
    params: list[str]
    ntid: tuple[int, int, int] | None
    start: int
    end: int
    symbols: dict[str, str]


class PtxModule:
    """One .ptx file, read once; entries are parsed into kir.Function on request (and kept)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.text = open(path, encoding="utf-8", errors="replace").read()
        self.lines = self.text.split("\n")
        self.symbols: dict[str, str] = {}  # module-level symbol -> state space
        self.entries: list[PtxEntry] = []
        self._parsed: dict[str, Function] = {}
        lines, n, i = self.lines, len(self.lines), 0
        while i < n:
            line = lines[i].strip()
            m = _SYMBOL.match(line)
            if m and not line.startswith(".entry"):
                self.symbols[m.group(2)] = m.group(1)
            if re.match(r"^(\.visible\s+|\.weak\s+)?\.entry\s", line):
                entry = _entry_header(lines, i, dict(self.symbols))
                self.entries.append(entry)
                i = entry.end + 1
                continue
            i += 1

    def function(self, name: str) -> Function:
        """The entry `name` as kir.Function. Errors: KeyError."""
        if name not in self._parsed:
            e = next(e for e in self.entries if e.name == name)
            f = _parse_body(e.name, e.params, self.lines, e.start, e.end, self.path, e.symbols)
            f.ntid = e.ntid
            self._parsed[name] = f
        return self._parsed[name]

    def functions(self) -> list[Function]:
        return [self.function(e.name) for e in self.entries]

    def shared_declarations(self) -> dict[str, tuple[int, int, int]]:
        """Every .shared symbol: name -> (alignment, bytes or -1 for an extern [], order)."""
        out = {}
        for m in _SHARED.finditer(self.text):
            align, bits, name, count = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4)
            size = -1 if count == "" else bits // 8 * (int(count) if count else 1)
            out[name] = (align, size, len(out))
        return out

    def local_declarations(self) -> dict[str, int]:
        """Every .local .b8 array (an entry's __local_depot): name -> bytes."""
        return {m.group(1): int(m.group(2)) for m in _LOCAL.finditer(self.text)}


def parse_ptx(path: str) -> tuple[list[Function], dict[str, str]]:
    """Every .entry of a PTX file, and the module's symbols with their state space."""
    module = PtxModule(path)
    return module.functions(), module.symbols


def _entry_header(lines: list[str], i: int, symbols: dict[str, str]) -> PtxEntry:
    """The .entry at lines[i]: its parameters and thread bound up to its "{", and its body's extent
    (the matching "}")."""
    name = re.match(r"^.*\.entry\s+([\w$]+)", lines[i].strip()).group(1)
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
    depth, k = 1, j + 1
    while k < len(lines) and depth > 0:
        s = lines[k].strip()
        if s == "{":
            depth += 1
        elif s == "}":
            depth -= 1
        k += 1
    return PtxEntry(name, params, ntid, j + 1, k - 1, symbols)


def _scoped_labels(lines, start, end) -> dict[int, dict[str, str]]:
    """Labels declared inside inline-asm scopes ({ ... }), which are local to their scope:
    line -> {label: unique name} for every line inside such a scope."""
    out: dict[int, dict[str, str]] = {}
    stack: list[tuple[int, dict[str, str]]] = []
    counter = 0
    for ln in range(start, end):
        st = lines[ln].split("//")[0].strip()
        if st.startswith("{"):
            counter += 1
            stack.append((counter, {}))
        if stack:
            m = re.match(r"^([A-Za-z_$][\w$]*):$", st)
            if m:
                stack[-1][1][m.group(1)] = f"{m.group(1)}#a{stack[-1][0]}"
            out[ln] = stack[-1][1]
        if st.endswith("}") and stack:
            stack.pop()
    return out


def _declare_regs(stmt: str, scope: Scope, reg_types: dict[str, str]) -> None:
    """.reg .type names: their types; inside an inline-asm scope, each a unique name."""
    rm = re.match(r"^\.reg\s+\.(\w+)\s+(.*)$", stmt)
    if not rm:
        return
    rtype = rm.group(1)
    for decl in rm.group(2).split(","):
        decl = decl.strip()
        base = re.match(r"^(%?[\w$]+)", decl).group(1)
        if scope.stack and (not decl.startswith("%") or "<" not in decl):
            scope.counter += 1
            scope.stack[-1][base] = f"{base}#s{scope.counter}"
            reg_types[f"{base}#s{scope.counter}"] = rtype
        else:
            reg_types[base.rstrip("<")] = rtype  # %f<3>: prefix %f


def _parse_body(name, params, lines, start, end, path, module_symbols) -> Function:
    scope = Scope()
    scoped_labels = _scoped_labels(lines, start, end)
    reg_types: dict[str, str] = {}
    blocks: list[Block] = [Block("entry")]
    local_symbols = dict(module_symbols)
    anon = 0
    need_ret_block = False
    for ln in range(start, end):
        s = lines[ln].split("//")[0].strip()
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
            blocks.append(Block(scoped_labels.get(ln, {}).get(s[:-1], s[:-1])))
            continue
        for stmt in [t.strip() for t in s.split(";") if t.strip()]:
            inst = _statement(stmt, scope, reg_types, local_symbols)
            if inst is None:
                continue
            if inst.kind == "branch" and ln in scoped_labels:
                inst.targets = [scoped_labels[ln].get(t, t) for t in inst.targets]
            inst.line = ln + 1
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
    _successors(blocks)
    f = Function(name, params, blocks, path, "ptx", {})
    f.symbols = dict(local_symbols)
    f.symbols.update({p: "param" for p in params})
    f.reg_types = reg_types  # prefixes (%f) and scoped names; reg_type() below resolves a register
    _resolve_param_addresses(f, set(params))
    return f


def _statement(stmt: str, scope: Scope, reg_types: dict[str, str], symbols: dict[str, str]) -> Inst | None:
    """One statement of a body: an instruction, or None for a scope brace or a directive (.reg
    and .local/.shared declarations are recorded)."""
    if stmt in ("{", "}"):
        if stmt == "{":
            scope.stack.append({})
        elif scope.stack:
            scope.stack.pop()
        return None
    if stmt.startswith("{"):
        scope.stack.append({})
        stmt = stmt[1:].strip()
        if not stmt:
            return None
    if stmt.startswith(".reg"):
        _declare_regs(stmt, scope, reg_types)
        return None
    if stmt.startswith(".local") or stmt.startswith(".shared"):
        sm = re.search(r"([\w$]+)\s*(\[|$)", stmt.split(".b8")[-1] if ".b8" in stmt else stmt)
        if sm:
            symbols[sm.group(1)] = "local" if stmt.startswith(".local") else "shared"
        return None
    if stmt.startswith("."):
        return None  # .loc, .pragma, .maxnreg ...
    inst = parse_inst(stmt, scope, symbols)
    inst.text = stmt
    return inst


def _successors(blocks: list[Block]) -> None:
    """Successors: fall-through unless the block ends in an unconditional branch or ret."""
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


def reg_type(func: Function, reg: str) -> str:
    """A register's declared type ("f32", "b64", "pred" ...), by its name or its prefix (%f<3>)."""
    t = func.reg_types.get(reg)
    if t:
        return t
    m = re.match(r"^(%[A-Za-z_]+)\d+$", reg)
    if m:
        return func.reg_types.get(m.group(1), "")
    return ""
