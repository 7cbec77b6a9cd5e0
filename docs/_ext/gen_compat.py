"""The engine-patches page: one ``autofunction`` per function :func:`headlab.engine.compat.apply`
calls, in the order it calls them, read from the source (no OpenNMT-py import)."""
from __future__ import annotations

import ast
from pathlib import Path

MODULE = "headlab.engine.compat"


def _names_in(node: ast.AST, functions: set[str], sequences: dict[str, ast.AST]) -> list[str]:
    """Module-level functions ``node`` names, in source order; a module-level tuple or list
    of functions that it names (``for patch in PATCHES``) stands for its elements."""
    found = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            if sub.id in functions:
                found.append((sub.lineno, sub.col_offset, [sub.id]))
            elif sub.id in sequences:
                found.append((sub.lineno, sub.col_offset, _names_in(sequences[sub.id], functions, {})))
    ordered = []
    for _, _, names in sorted(found):
        ordered += [name for name in names if name not in ordered]
    return ordered


def applied_patches(source: Path) -> list[str]:
    tree = ast.parse(source.read_text(encoding="utf-8"))
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    sequences = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign)
                 and isinstance(n.value, (ast.Tuple, ast.List)) for t in n.targets if isinstance(t, ast.Name)}
    apply = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "apply")
    # what runs only when a patch fails (the undo) is not a step of its own
    on_error = {name for handler in ast.walk(apply) if isinstance(handler, ast.ExceptHandler)
                for name in _names_in(handler, functions, sequences)}
    return [name for name in _names_in(apply, functions, sequences) if name not in on_error | {"apply"}]


def compat_page(source: Path) -> str:
    parts = []
    for number, name in enumerate(applied_patches(source), 1):
        # autodoc writes reST, so its directive must sit in reST, not in MyST
        parts.append(f"### {number}. `{name}`\n\n```{{eval-rst}}\n.. autofunction:: {MODULE}.{name}\n```\n")
    return "\n".join(parts)
