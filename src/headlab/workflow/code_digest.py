"""The code behind outputs that no model holds, as digests the rules take as params.

A study's tables, figures, claims (``effects.csv``) and README, and the scores computed from
translations (BLEU, compare-mt, the contrastive suites), come from Python code and a paper's
reference numbers. Snakemake reruns a rule when its shell command, params, inputs or software
environment change, but its ``code`` trigger covers the rule's own text only, never a module
its command imports: a corrected claim, reference number or scorer left every existing output
as it was, and the tables no longer showed what the code says. As a param, a digest of that
code reruns exactly what it renders or scores (seconds each) and nothing else.

* :func:`study_digest`: the code behind one study's rendered outputs: its own package
  (reference tables included), the packages of the other studies it imports, the shared study
  modules (``headlab/studies/*.py``), the report layer that writes the files
  (``headlab/report``), the statistics and scorers (``headlab/eval``) and the path helpers
  (``naming``, ``io``, ``errors``). Chosen by folder, not by import closure: the studies'
  registry imports every study, so a closure would rerun all of them for any one's change.
* :func:`module_digest`: a ``headlab`` command's module and every headlab module it imports,
  transitively (for the scorers, whose closure stays small: ``bleu`` reads 7 files).

Not covered, on purpose: a change to a model's code (the engine, a head kind) retrains
nothing, and the commands that run a model (translate, score, export-attention, the atlas,
profile-heads) are not rerun for it either; a model's path names its options, not its code
(docs/configuration.md). Content only (sorted relative paths and their bytes): a fresh
clone, another machine or a touched file gives the same digest."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

#: the package whose files are digested (``src/headlab``)
SOURCE = Path(__file__).resolve().parents[1]
#: shared by every study's rendering: (folder under SOURCE, file pattern)
SHARED = (("studies", "*.py"), ("report", "*.py"), ("eval", "*.py"), (".", "naming.py"), (".", "io.py"),
          (".", "errors.py"))
_IMPORTED_STUDY = re.compile(rb"headlab\.studies\.(\w+)")


def _package_files(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file() and "__pycache__" not in path.parts
            and path.suffix != ".pyc"]


def _studies_imported(package: Path, root: Path) -> set[str]:
    """The other study packages ``package`` names in an import (one level: what they import
    in turn is theirs, and is in the shared modules if several studies need it)."""
    names = set()
    for path in package.rglob("*.py"):
        names.update(name.decode() for name in _IMPORTED_STUDY.findall(path.read_bytes()))
    return {name for name in names if (root / "studies" / name).is_dir() and name != package.name}


def code_files(study: str | None, root: Path = SOURCE) -> list[Path]:
    """The files :func:`study_digest` reads, sorted; ``study`` None: the shared ones only
    (what the cross-study summary is rendered by)."""
    files = {path for folder, pattern in SHARED for path in (root / folder).glob(pattern)}
    if study is not None:
        package = root / "studies" / study
        if not package.is_dir():
            raise ValueError(f"no study package {package}")
        for name in {study} | _studies_imported(package, root):
            files.update(_package_files(root / "studies" / name))
    return sorted(files)


def _digest(files: list[Path], root: Path) -> str:
    """sha256 (16 hex digits) over ``files``' paths relative to ``root`` and their bytes."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def study_digest(study: str | None, root: Path = SOURCE) -> str:
    """The digest of the code behind ``study``'s rendered outputs (:func:`code_files`)."""
    return _digest(code_files(study, root), root)


def _module_file(name: str, root: Path) -> Path | None:
    """The source file of headlab module ``name`` under ``root`` (a package: its __init__)."""
    parts = name.split(".")[1:]
    candidates = ([root.joinpath(*parts).with_suffix(".py")] if parts else []) + [root.joinpath(*parts, "__init__.py")]
    return next((path for path in candidates if path.is_file()), None)


def _imports(path: Path, name: str) -> set[str]:
    """The headlab modules ``path`` (module ``name``) imports anywhere, function bodies too
    (the CLI's modules import lazily): ``from headlab.x import y`` names headlab.x and, where
    y is a module, headlab.x.y."""
    import ast

    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:                # from . import x, from ..y import z
                parents = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parents + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {module for module in found if module == "headlab" or module.startswith("headlab.")}


def module_files(modules, root: Path = SOURCE) -> list[Path]:
    """The source files of ``modules`` and of every headlab module they import, transitively."""
    seen, files, todo = set(), set(), list(modules)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = _module_file(name, root)
        if path is None:
            continue                      # a name imported from a module, not a module
        files.add(path)
        todo.extend(_imports(path, name))
        while "." in name:                # importing a.b.c runs a/__init__ and a/b/__init__ first
            name = name.rpartition(".")[0]
            todo.append(name)
    return sorted(files)


def module_digest(module: str, root: Path = SOURCE) -> str:
    """The digest of headlab module ``module`` (a ``headlab`` command's, e.g.
    ``headlab.eval.bleu``) and the headlab modules it imports."""
    if _module_file(module, root) is None:
        raise ValueError(f"no headlab module {module!r} under {root}")
    return _digest(module_files([module], root), root)
