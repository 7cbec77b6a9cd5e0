"""headlab's own source files: which ones a module runs, and digests of their contents.

Two things need to know what code made an output, where Snakemake's ``code`` trigger (a
rule's own text) does not reach: the rules that render or score
(:mod:`headlab.workflow.code_digest`) and a trained model's record of the code that trained
it (:mod:`headlab.engine.trained_code`). Both follow imports (:func:`module_files`: every
``headlab`` module a module imports, in function bodies too, transitively) and digest
contents only (relative paths and bytes), so a fresh clone, another machine or a touched
file gives the same digest. Standard library only: every layer may use it."""
from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path

#: the package whose files are digested (``src/headlab``)
SOURCE = Path(__file__).resolve().parent


def module_file(name: str, root: Path = SOURCE) -> Path | None:
    """The source file of headlab module ``name`` under ``root`` (a package: its __init__)."""
    parts = name.split(".")[1:]
    candidates = ([root.joinpath(*parts).with_suffix(".py")] if parts else []) + [root.joinpath(*parts, "__init__.py")]
    return next((path for path in candidates if path.is_file()), None)


def imported_modules(path: Path, name: str) -> set[str]:
    """The headlab modules ``path`` (module ``name``) imports anywhere, function bodies too
    (the CLI's modules import lazily): ``from headlab.x import y`` names headlab.x and, where
    y is a module, headlab.x.y."""
    return _parsed_imports(path.read_bytes(), name if path.name == "__init__.py" else name.rpartition(".")[0])


@functools.lru_cache(maxsize=None)
def _parsed_imports(source: bytes, package: str) -> frozenset[str]:
    """:func:`imported_modules` of one source text (each file is parsed once per process: the
    Snakefile digests six studies' overlapping closures)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:                # from . import x, from ..y import z
                parents = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parents + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return frozenset(module for module in found if module.startswith("headlab."))


def _within(name: str, packages) -> bool:
    return any(name == package or name.startswith(package + ".") for package in packages)


def module_files(modules, root: Path = SOURCE, skip=()) -> list[Path]:
    """The source files of ``modules`` and of every headlab module they import, transitively,
    but for the modules of the packages ``skip`` names. The package's own ``__init__`` (its
    version and warning filters) renders, scores and trains nothing and is left out: a
    version bump changes no digest."""
    seen, files, todo = set(), set(), list(modules)
    while todo:
        name = todo.pop()
        if name in seen or _within(name, skip):
            continue
        seen.add(name)
        path = module_file(name, root)
        if path is None:
            continue                      # a name imported from a module, not a module
        files.add(path)
        todo.extend(imported_modules(path, name))
        while name.count(".") > 1:        # importing a.b.c runs a/b/__init__ first
            name = name.rpartition(".")[0]
            todo.append(name)
    return sorted(files)


def file_digest(path: Path) -> str:
    """sha256 (16 hex digits) of one file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def digest(files: list[Path], root: Path = SOURCE) -> str:
    """sha256 (16 hex digits) over ``files``' paths relative to ``root`` and their bytes."""
    hasher = hashlib.sha256()
    for path in files:
        hasher.update(path.relative_to(root).as_posix().encode() + b"\0")
        hasher.update(path.read_bytes() + b"\0")
    return hasher.hexdigest()[:16]
