"""The package's import graph (issues 20 and 39): no import circle anywhere, lazy imports inside
functions included; data flows one way, ``collectors -> data <- classifier <- app`` with
``data`` at the bottom (``ALLOWED``); every import inside the package is absolute
(``from tealeaves.data.schema import X``) and names something that exists."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

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
            if isinstance(node, ast.Import):  # import tealeaves.data.store [as store]
                for a in node.names:
                    name = a.name.removeprefix("tealeaves.")
                    while name and name not in mods:
                        name = name.rpartition(".")[0]
                    if a.name.startswith("tealeaves.") and name:
                        edges[m].add(name)
            elif isinstance(node, ast.ImportFrom):
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
    assert len(edges) > 50 and "app.figures.series.downsample" in edges["app.dashboard.live"]
    assert _cycles(edges) == []


#: The rooms each room may import besides itself (issue 39): ``collectors -> data <- classifier
#: <- app``, with ``data`` at the bottom.  The collectors produce samples and server signals and
#: the classifier reads them, both through ``data`` (its parsers of saved formats), so neither
#: imports the other and a bare GPU host runs ``collect`` without the classifier or the dashboard;
#: ``kernels_bench`` never imports ``app``; only ``app`` imports ``app``.
ALLOWED: dict[str, frozenset[str]] = {
    "data": frozenset(),
    "collectors": frozenset({"data", "kernels_bench"}),
    "classifier": frozenset({"data", "kernels_bench"}),
    "kernels_bench": frozenset({"data", "collectors", "classifier"}),
    "app": frozenset({"data", "collectors", "classifier", "kernels_bench"}),
}


def _wrong_way(edges: dict[str, set[str]]) -> list[str]:
    """Every import in ``edges`` (module -> modules, as ``_graph`` gives) that goes against
    ``ALLOWED``, as ``"a.b imports c.d: <room> never imports <room>"``."""
    bad = []
    for m, targets in sorted(edges.items()):
        room = m.split(".")[0]
        for t in sorted(targets):
            other = t.split(".")[0]
            if other != room and other not in ALLOWED[room]:
                bad.append(f"{m} imports {t}: {room} never imports {other}")
    return bad


def test_rooms_import_the_way_data_flows():
    edges = _graph()
    assert "data.server_metrics" in edges["classifier.server_balance"]  # the graph sees rooms
    assert _wrong_way(edges) == []


def test_the_flow_check_allows_the_flow():
    edges = {"collectors.nvml": {"data.schema"}, "classifier.rules": {"data.schema"},
             "app.cli": {"classifier.rules", "collectors.nvml", "data.schema"},
             "kernels_bench.workload": {"data.traces"}, "data.schema": set(),
             "data.traces": {"data.schema"}}
    assert _wrong_way(edges) == []


_WRONG_WAY = [(room, other) for room in ROOMS for other in ROOMS
              if other != room and other not in ALLOWED[room]]


def test_the_flow_check_names_each_forbidden_pair():
    assert set(ALLOWED) == set(ROOMS)
    assert {("data", "collectors"), ("data", "classifier"), ("data", "app"),
            ("data", "kernels_bench"), ("classifier", "collectors"), ("classifier", "app"),
            ("collectors", "classifier"), ("collectors", "app"),
            ("kernels_bench", "app")} <= set(_WRONG_WAY)


@pytest.mark.parametrize(("room", "other"), _WRONG_WAY)
def test_the_flow_check_fails_on_an_arrow_the_wrong_way(room, other):
    """A synthetic graph, legal but for one import against the flow: that import, and only it,
    is named (a lazy import inside a function is an edge like any other, see ``_graph``)."""
    edges = {f"{room}.a": {f"{room}.b", "data.schema"}, f"{room}.b": {f"{other}.z"},
             "data.schema": set(), f"{other}.z": set()}
    if room == "data":
        edges[f"{room}.a"] = {f"{room}.b"}
    assert _wrong_way(edges) == [f"{room}.b imports {other}.z: {room} never imports {other}"]


def test_the_graph_sees_plain_imports_of_the_package(tmp_path, monkeypatch):
    """``import tealeaves.collectors.nvml`` is an edge as ``from ... import`` is."""
    for room in ROOMS:
        (tmp_path / room).mkdir()
        (tmp_path / room / "__init__.py").write_text("")
    (tmp_path / "collectors" / "nvml.py").write_text("")
    (tmp_path / "classifier" / "rules.py").write_text(
        "def f():\n    import tealeaves.collectors.nvml as nvml\n    return nvml\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    edges = _graph()
    assert edges["classifier.rules"] == {"collectors.nvml"}
    assert _wrong_way(edges) == [
        "classifier.rules imports collectors.nvml: classifier never imports collectors"]


def _relative_imports(src: str, where: str) -> list[str]:
    """``where:line`` of every relative import in ``src`` (inside functions too)."""
    return [f"{where}:{node.lineno} from {'.' * node.level}{node.module or ''} import ..."
            for node in ast.walk(ast.parse(src, where))
            if isinstance(node, ast.ImportFrom) and node.level]


def test_no_relative_import_inside_the_package():
    """Imports are absolute (issue 39): ``from tealeaves.app.cli.common import fail``, never
    ``from .common import fail``; a module reads the same wherever it is moved or copied."""
    found = []
    for f in _modules().values():
        found += _relative_imports(f.read_text(), str(f.relative_to(ROOT)))
    assert found == []


def test_the_relative_import_check_sees_a_lazy_one():
    src = "from tealeaves.data import schema\n\n\ndef f():\n    from ..data import store\n"
    assert _relative_imports(src, "x.py") == ["x.py:5 from ..data import ..."]
    assert _relative_imports("from . import y\n", "x.py") == ["x.py:1 from . import ..."]
    assert _relative_imports("from tealeaves.data import schema\n", "x.py") == []


def _top_level_names(f: Path) -> set[str] | None:
    """The names a module defines or imports at its top level (inside ``if``/``try`` too);
    None when it may define more (a module ``__getattr__``, a star import)."""
    names: set[str] = set()
    todo = list(ast.parse(f.read_text(), str(f)).body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If | ast.Try):
            todo += [*node.body, *node.orelse, *getattr(node, "finalbody", [])]
            todo += [x for h in getattr(node, "handlers", []) for x in h.body]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == "__getattr__":
                return None
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any(a.name == "*" for a in node.names):
                return None
            names |= {a.asname or a.name.split(".")[0] for a in node.names}
    return names


def _stale_imports(mods: dict[str, Path]) -> list[str]:
    """Every ``from tealeaves.x import y`` in ``mods`` whose module or name does not exist."""
    bad = []
    for f in mods.values():
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if not (isinstance(node, ast.ImportFrom) and not node.level
                    and (node.module or "").startswith("tealeaves.")):
                continue
            target = node.module.removeprefix("tealeaves.")
            where = f"{f.relative_to(ROOT)}:{node.lineno}"
            if target not in mods:
                bad.append(f"{where} imports {node.module}, which is no module of the package")
                continue
            names = _top_level_names(mods[target])
            missing = [a.name for a in node.names if f"{target}.{a.name}" not in mods
                       and names is not None and a.name not in names]
            if missing:
                bad.append(f"{where} imports {', '.join(missing)} from {node.module}, which "
                           f"defines no such name")
    return bad


def test_every_package_import_resolves():
    """A lazy import inside a function is only checked when it runs; after a module or a name
    moves, a stale ``from tealeaves.x import y`` must fail here, not in front of a user."""
    assert _stale_imports(_modules()) == []


def test_the_stale_import_check_sees_a_moved_name(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "schema.py").write_text("X = 1\n")
    (tmp_path / "data" / "use.py").write_text(
        "def f():\n    from tealeaves.data.schema import X, Y\n"
        "    from tealeaves.data.gone import Z\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    mods = {"data.schema": tmp_path / "data" / "schema.py",
            "data.use": tmp_path / "data" / "use.py"}
    assert _stale_imports(mods) == [
        "data/use.py:2 imports Y from tealeaves.data.schema, which defines no such name",
        "data/use.py:3 imports tealeaves.data.gone, which is no module of the package"]


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


#: Issue 39's sizes: no module over this many lines, no function over ``MAX_FUNCTION_LINES``,
#: outside the GPU kernels (``KERNEL_MODULES``: Triton/Gluon kernels are written whole).
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
KERNEL_MODULES = frozenset({"kernels_bench/verify_gluon.py", "kernels_bench/verify_triton.py"})


def _oversized(files) -> list[str]:
    """``path (N lines)`` and ``path:line name (N lines)`` for each module or function over
    the sizes above."""
    out = []
    for f in files:
        src = f.read_text()
        rel = f.relative_to(ROOT).as_posix()
        if rel in KERNEL_MODULES:
            continue
        if src.count("\n") > MAX_MODULE_LINES:
            out.append(f"{rel} ({src.count(chr(10))} lines)")
        for node in ast.walk(ast.parse(src, str(f))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    out.append(f"{rel}:{node.lineno} {node.name} ({n} lines)")
    return out


def test_no_module_over_600_lines_and_no_function_over_80():
    assert _oversized(_modules().values()) == []


def test_the_size_check_sees_a_long_function_and_a_long_module(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    body = "\n".join(f"    x{i} = {i}" for i in range(81))
    (tmp_path / "long.py").write_text(f"def f():\n{body}\n" + "\n" * 600)
    got = _oversized([tmp_path / "long.py"])
    assert got == ["long.py (682 lines)", "long.py:1 f (82 lines)"]


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
