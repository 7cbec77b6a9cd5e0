"""The code behind outputs that no model holds, as digests the rules take as params.

A study's tables, figures, claims (``effects.csv``) and README, and the scores computed from
translations (BLEU, compare-mt, the contrastive suites), come from Python code and a paper's
reference numbers. Snakemake reruns a rule when its shell command, params, inputs or software
environment change, but its ``code`` trigger covers the rule's own text only, never a module
its command imports: a corrected claim, reference number or scorer left every existing output
as it was, and the tables no longer showed what the code says. As a param, a digest of that
code reruns exactly what it renders or scores (seconds each) and nothing else.

Both digests follow imports (:func:`module_files`: every ``headlab`` module a module imports,
in function bodies too, transitively):

* :func:`study_digest`: from the report layer's entry (``headlab.report.build``), the shared
  study modules (``headlab/studies/*.py``) and the study's own package, whose other files
  (the paper's reference tables) count too. Other studies' packages are not followed (the
  studies' registry imports all of them, which would rerun every study for any one's change)
  unless the study's own package imports them. The closure reaches what the renderers read
  with (the statistics, the syntax profile, the training-log reader, the export loaders), so a
  change there rerenders every study: a minute or two of rendering, never a training.
* :func:`module_digest`: a ``headlab`` command's module (the scorers').

Not covered, on purpose: a change to a model's code (the engine, a head kind) retrains
nothing, and the commands that run a model (translate, score, export-attention, the atlas,
profile-heads) are not rerun for it either; a model's path names its options, not its code
(docs/configuration.md). Content only (sorted relative paths and their bytes): a fresh
clone, another machine or a touched file gives the same digest."""
from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path

#: the package whose files are digested (``src/headlab``)
SOURCE = Path(__file__).resolve().parents[1]
#: where every study's rendering starts: the ``study-table`` command's module
RENDERER = "headlab.report.build"


def _module_file(name: str, root: Path) -> Path | None:
    """The source file of headlab module ``name`` under ``root`` (a package: its __init__)."""
    parts = name.split(".")[1:]
    candidates = ([root.joinpath(*parts).with_suffix(".py")] if parts else []) + [root.joinpath(*parts, "__init__.py")]
    return next((path for path in candidates if path.is_file()), None)


def _imports(path: Path, name: str) -> set[str]:
    """The headlab modules ``path`` (module ``name``) imports anywhere, function bodies too
    (the CLI's modules import lazily): ``from headlab.x import y`` names headlab.x and, where
    y is a module, headlab.x.y."""
    return _parsed_imports(path.read_bytes(), name if path.name == "__init__.py" else name.rpartition(".")[0])


@functools.lru_cache(maxsize=None)
def _parsed_imports(source: bytes, package: str) -> frozenset[str]:
    """:func:`_imports` of one source text (each file is parsed once per process: the
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
    version and warning filters) renders and scores nothing and is left out: a version bump
    rescores nothing."""
    seen, files, todo = set(), set(), list(modules)
    while todo:
        name = todo.pop()
        if name in seen or _within(name, skip):
            continue
        seen.add(name)
        path = _module_file(name, root)
        if path is None:
            continue                      # a name imported from a module, not a module
        files.add(path)
        todo.extend(_imports(path, name))
        while name.count(".") > 1:        # importing a.b.c runs a/b/__init__ first
            name = name.rpartition(".")[0]
            todo.append(name)
    return sorted(files)


def _study_packages(root: Path) -> set[str]:
    return {path.parent.name for path in (root / "studies").glob("*/__init__.py")}


def _package_modules(package: Path, root: Path) -> list[str]:
    return [".".join(("headlab", *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
            for path in package.rglob("*.py") if "__pycache__" not in path.parts]


def code_files(study: str | None, root: Path = SOURCE) -> list[Path]:
    """The files :func:`study_digest` reads, sorted; ``study`` None: those every study's
    rendering shares (what the cross-study summary is rendered by)."""
    shared = [f"headlab.studies.{path.stem}" for path in (root / "studies").glob("*.py") if path.stem != "__init__"]
    entries, followed, data = [RENDERER, *shared], set(), set()
    if study is not None:
        package = root / "studies" / study
        if not (package / "__init__.py").is_file():
            raise ValueError(f"no study package {package}")
        own = _package_modules(package, root)
        # the other studies the package imports itself (not through the registry)
        followed = {name.split(".")[2] for module in own for name in _imports(_module_file(module, root), module)
                    if name.startswith("headlab.studies.") and name.split(".")[2] in _study_packages(root)}
        followed.add(study)
        entries += own
        data = {path for name in followed for path in (root / "studies" / name).rglob("*")
                if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts}
    skip = {f"headlab.studies.{name}" for name in _study_packages(root) - followed}
    return sorted(set(module_files(entries, root, skip)) | data)


def _digest(files: list[Path], root: Path) -> str:
    """sha256 (16 hex digits) over ``files``' paths relative to ``root`` and their bytes."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def package_of(study) -> str:
    """The package (under ``headlab/studies``) of a registered study object."""
    return type(study).__module__.split(".")[2]


def study_digest(study: str | None, root: Path = SOURCE) -> str:
    """The digest of the code behind ``study``'s rendered outputs (:func:`code_files`)."""
    return _digest(code_files(study, root), root)


def module_digest(*modules: str, root: Path = SOURCE) -> str:
    """The digest of headlab ``modules`` (a ``headlab`` command's, e.g. ``headlab.eval.bleu``)
    and the headlab modules they import."""
    for module in modules:
        if _module_file(module, root) is None:
            raise ValueError(f"no headlab module {module!r} under {root}")
    return _digest(module_files(modules, root), root)
