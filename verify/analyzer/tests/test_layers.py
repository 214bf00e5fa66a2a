# The package's shape (README.md): imports point one way, front end <- domains <- {spec, symbolic}
# <- checks <- cli <- mutants, with no cycle between modules; files under 600 lines and functions
# under 80 (STYLE.md).
import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # verify/analyzer
RANK = {"frontend": 0, "domains": 1, "spec": 2, "symbolic": 2, "checks": 3, "cli": 4, "__main__": 5, "mutants": 5,
        "tests": 6}


def _modules() -> dict[str, str]:
    """Dotted module name (under the package) -> its file."""
    out = {}
    for dirpath, _, files in os.walk(ROOT):
        for name in files:
            if name.endswith(".py") and dirpath != ROOT or name in ("cli.py", "__main__.py", "__init__.py"):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                out[rel.removesuffix(".__init__") if rel != "__init__" else ""] = path
    return out


def _imports(module: str, path: str) -> set[str]:
    """The package modules `module` imports, at any level (a function's imports too)."""
    tree = ast.parse(open(path).read())
    package = module.split(".")[:-1] if not path.endswith("__init__.py") else module.split(".")
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.level:
            base = package[:len(package) - (n.level - 1)] if n.level > 1 else package
            target = ".".join(base + ([n.module] if n.module else []))
            names = [target + "." + a.name for a in n.names] + [target]
            out |= {t.strip(".") for t in names}
        elif isinstance(n, ast.ImportFrom) and (n.module or "").startswith("analyzer."):
            out.add(n.module.removeprefix("analyzer."))
    return out


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: {t for t in _imports(m, p) if t in mods and t != m} for m, p in mods.items() if m}


def test_imports_point_down():
    wrong = []
    for m, targets in _graph().items():
        top = m.split(".")[0]
        for t in targets:
            t_top = t.split(".")[0]
            if t_top != top and RANK[t_top] >= RANK[top]:
                wrong.append(f"{m} imports {t}")
    assert wrong == []


def test_no_import_cycles():
    graph = _graph()
    seen, on_stack, cycles = set(), [], []

    def visit(m):
        seen.add(m)
        on_stack.append(m)
        for t in graph.get(m, ()):
            if t in on_stack:
                cycles.append(on_stack[on_stack.index(t):] + [t])
            elif t not in seen:
                visit(t)
        on_stack.pop()
    for m in graph:
        if m not in seen:
            visit(m)
    assert cycles == []


def test_every_layer_has_modules():
    tops = {m.split(".")[0] for m in _graph()}
    assert {"frontend", "domains", "symbolic", "spec", "checks", "cli", "mutants", "tests"} <= tops


def test_sizes():
    long = []
    for m, path in _modules().items():
        text = open(path).read()
        if text.count("\n") > 600:
            long.append(f"{m}: {text.count(chr(10))} lines")
        for n in ast.walk(ast.parse(text)):
            if isinstance(n, ast.FunctionDef) and n.end_lineno - n.lineno + 1 > 80:
                long.append(f"{m}.{n.name}: {n.end_lineno - n.lineno + 1} lines")
    assert long == []
