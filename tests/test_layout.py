"""The package's import graph (issue 20): no import circle anywhere, lazy imports inside
functions included, and data flows one way: ``data`` imports none of the other rooms and only
``app`` imports ``app``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("app", "collectors", "classifier", "kernels_bench", "data")


def _modules() -> dict[str, Path]:
    mods = {}
    for room in ROOMS:
        for f in (ROOT / room).rglob("*.py"):
            parts = f.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            mods[name] = f
    return mods


def _graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (at any depth of its code)."""
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        pkg = m if f.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".") if pkg else []
                    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                    target = ".".join([*base, *([node.module] if node.module else [])])
                elif (node.module or "").startswith("tealeaves."):
                    target = node.module.removeprefix("tealeaves.")
                else:
                    continue
                for a in node.names:
                    for cand in (f"{target}.{a.name}" if target else a.name, target):
                        if cand in mods:
                            edges[m].add(cand)
                            break
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root, targets in edges.items():
        if root in index:
            continue
        work = [(root, iter(sorted(targets)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.append(x)
                        if x == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
            elif w == v:
                continue
            elif w not in index:
                index[w] = low[w] = counter
                counter += 1
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(edges[w]))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return out


def test_the_walker_sees_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_anywhere():
    edges = _graph()
    assert len(edges) > 50 and "app.dashboard.views" in edges["app.dashboard.live"]
    assert _cycles(edges) == []


def test_data_flows_one_way():
    edges = _graph()
    for m, targets in edges.items():
        room = m.split(".")[0]
        for t in targets:
            other = t.split(".")[0]
            if room == "data":
                assert other == "data", f"{m} imports {t}: data imports no other room"
            if other == "app":
                assert room == "app", f"{m} imports {t}: only app imports app"


def test_every_relative_import_resolves():
    """A relative import inside a function is only checked when it runs; after a module moves,
    a stale ``from ..x import y`` must fail here, not in front of a user."""
    mods = _modules()
    bad = []
    for m, f in mods.items():
        pkg = m if f.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = pkg.split(".") if pkg else []
                if node.level - 1 > len(base):
                    bad.append(f"{f.relative_to(ROOT)}:{node.lineno} climbs above the package")
                    continue
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join([*base, *([node.module] if node.module else [])])
                if target in mods or (target == "" and node.module is None):
                    continue
                if all(f"{target}.{a.name}" in mods for a in node.names):
                    continue
                bad.append(f"{f.relative_to(ROOT)}:{node.lineno} imports {target or '.'}, "
                           "which is no module of the package")
    assert bad == []


#: The longest a function of app/ may be (issue 20): longer ones hide several jobs.
MAX_APP_FUNCTION_LINES = 100
_JS = ("function(", "function (", "=> {", "=>{", "window.dash_clientside", "document.query",
       "const ", "let ")


def _app_files() -> list[Path]:
    return sorted((ROOT / "app").rglob("*.py"))


def test_no_function_in_app_over_100_lines():
    long = []
    for f in _app_files():
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_APP_FUNCTION_LINES:
                    long.append(f"{f.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)")
    assert long == []


def test_no_javascript_inside_python_strings():
    """Browser code lives in app/**/assets/*.js, called through ``ClientsideFunction``."""
    found = []
    for f in _app_files():
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                hits = [p for p in _JS if p in node.value]
                if hits and any(p in node.value for p in ("{", "=>", "return")):
                    found.append(f"{f.relative_to(ROOT)}:{node.lineno} {hits}")
    assert found == []


def test_the_javascript_checks_see_what_they_look_for():
    src = 'x = """function(v) { return v; }"""\n'
    node = ast.parse(src).body[0].value
    assert any(p in node.value for p in _JS)


def test_every_package_is_installed():
    """pyproject.toml lists the packages by name: a new subpackage left out works in an
    editable install and is missing from a wheel."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {"tealeaves." + ".".join(f.parent.relative_to(ROOT).parts)
             for room in ROOMS for f in (ROOT / room).rglob("__init__.py")}
    assert found - listed == set()
