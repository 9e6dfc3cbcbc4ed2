"""The house's limits on src/ttsperf (issue 35, item 8): no function over 80 lines, and no import
cycle anywhere. import-linter keeps plan's and engine's modules acyclic (pyproject.toml); this walk
covers every package, so a cycle elsewhere (or across packages) fails here first."""

from __future__ import annotations

import ast
from pathlib import Path

import ttsperf

PACKAGE = Path(ttsperf.__file__).resolve().parent  # the tree these tests import
MAX_FUNCTION_LINES = 80


def modules() -> dict[str, tuple[Path, ast.Module]]:
    """Every module under the package, by dotted name (a package by its own name)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ["ttsperf", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = (path, ast.parse(path.read_text(encoding="utf-8")))
    return out


def long_functions(tree: ast.Module, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    spans = [(fn.name, fn.end_lineno - fn.lineno + 1) for fn in functions]
    return [(name, n) for name, n in spans if n > limit]


def import_graph(mods: dict[str, tuple[Path, ast.Module]]) -> dict[str, set[str]]:
    """Module -> the ttsperf modules it imports (TYPE_CHECKING imports too: import-linter counts them,
    and a cycle only typing needs is still two modules that cannot be read apart)."""
    graph: dict[str, set[str]] = {}
    for name, (path, tree) in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph[name] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, up level - 1
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]  # a name may be a module
            else:
                continue
            for target in targets:
                while target and target not in mods:  # the deepest module the import names
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
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
                    work.append((child, iter(sorted(graph[child]))))
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


def test_no_function_over_80_lines():
    over = [
        f"{path.relative_to(PACKAGE.parent)}:{fn} ({n} lines)"
        for path, tree in modules().values()
        for fn, n in long_functions(tree)
    ]
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines: {over}"


def test_no_import_cycle_in_src():
    assert cycles(import_graph(modules())) == []


def test_the_walks_catch_what_they_look_for():
    # a planted long function and a planted cycle are found, so the two tests above can fail
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(ast.parse(f"def f():\n{body}\n")) == [("f", MAX_FUNCTION_LINES + 1)]
    assert long_functions(ast.parse(f"async def f():\n{body[: body.rindex(chr(10))]}\n")) == []
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
