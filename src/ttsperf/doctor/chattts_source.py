"""Two of the official ChatTTS package's traps, recognised in its source (read, never imported:
importing it needs torchaudio and takes seconds; reading its code is all a check needs).

- `Chat.infer(..., params_infer_code=InferCodeParams())`: a default argument is evaluated once,
  so every call that relies on it shares one mutable object (docs/reference/chattts.md: a
  multi-sentence call writes a reference voice into it that leaks into later calls).
- `select_device` chooses the GPU with the most total-minus-*own*-reserved memory: in a fresh
  process that is the same for identical GPUs, so every process picks cuda:0.

Each function answers True (trap present), False (the code is there and differs) or None (the
file or function is not where version 0.2.5 keeps it: we cannot tell).
"""

from __future__ import annotations

import ast
from pathlib import Path

_PARAM_CLASSES = ("InferCodeParams", "RefineTextParams")


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None


def _functions(tree: ast.AST, name: str) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]


def _call_name(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def shared_default_params(core: Path) -> bool | None:
    """Does `infer` construct a params object as a default argument value?"""
    tree = _parse(core)
    if tree is None:
        return None
    infers = _functions(tree, "infer")
    if not infers:
        return None
    return any(
        _call_name(d) in _PARAM_CLASSES
        for fn in infers
        for d in (*fn.args.defaults, *fn.args.kw_defaults)
        if d
    )


def select_device_ignores_others(package: Path) -> bool | None:
    """Does `select_device` rank GPUs by this process's reserved memory instead of the device's
    free memory (`mem_get_info`, which sees other processes)?"""
    for path in sorted(package.rglob("*.py")):
        tree = _parse(path)
        for fn in _functions(tree, "select_device") if tree else []:
            names = {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute)}
            return "memory_reserved" in names and "mem_get_info" not in names
    return None
