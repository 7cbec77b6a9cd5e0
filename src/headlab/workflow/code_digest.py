"""The code behind outputs that no model holds, as digests the rules take as params.

A study's tables, figures, claims (``effects.csv``) and README, and the scores computed from
translations (BLEU, compare-mt, the contrastive suites), come from Python code and a paper's
reference numbers. Snakemake reruns a rule when its shell command, params, inputs or software
environment change, but its ``code`` trigger covers the rule's own text only, never a module
its command imports: a corrected claim, reference number or scorer left every existing output
as it was, and the tables no longer showed what the code says. As a param, a digest of that
code reruns exactly what it renders or scores (seconds each) and nothing else.

Both digests follow imports (:func:`headlab.sourcecode.module_files`: every ``headlab``
module a module imports, in function bodies too, transitively):

* :func:`study_digest`: from the report layer's entry (``headlab.report.build``), the shared
  study modules (``headlab/studies/*.py``) and the study's own package, whose other files
  (the paper's reference tables) count too. Other studies' packages are not followed (the
  studies' registry imports all of them, which would rerun every study for any one's change)
  unless the study's own package imports them. The closure reaches what the renderers read
  with (the statistics, the syntax profile, the training-log reader, the export loaders), so a
  change there rerenders every study: a minute or two of rendering, never a training.
* :func:`module_digest`: a ``headlab`` command's module (the scorers', the atlas index's, the
  learning curves', detokenisation's).
* :func:`model_digest`: a command that runs a model (translate, score, export-attention,
  atlas-model, profile-heads, params, gates): its module and the head kinds and mixers the
  model's specs name (:func:`headlab.engine.trained_code.run_files`), so an edited DEA
  retranslates, rescores and re-exports the DEA models and not an ``8L`` one. The paths,
  errors and the trainer's bookkeeping (:data:`NUMBERLESS`) compute no number and are left out.

Not covered, on purpose: a change to a model's code (the engine, a head kind) retrains
nothing (a model's path names its options, not its code: docs/configuration.md; each model
records the code that trained it, and the workflow names the models trained by other code:
:mod:`headlab.engine.trained_code`); nor does a change to the code that prepares training
data (tokenise, truecase, BPE, vocabularies, parses and features), which would retrain every
model downstream of it. The commands that run a model are rerun: what they compute is the
code's as it is now, while the warning names the weights it runs on as other code's.
Content only (sorted relative paths and their bytes): a fresh clone, another machine or a
touched file gives the same digest."""
from __future__ import annotations

import functools
from pathlib import Path

from headlab.engine import trained_code
from headlab.naming import parse_heads_name
from headlab.sourcecode import SOURCE, digest, imported_modules, module_file, module_files

#: where every study's rendering starts: the ``study-table`` command's module
RENDERER = "headlab.report.build"


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
        followed = {name.split(".")[2] for module in own for name in imported_modules(module_file(module, root), module)
                    if name.startswith("headlab.studies.") and name.split(".")[2] in _study_packages(root)}
        followed.add(study)
        entries += own
        data = {path for name in followed for path in (root / "studies" / name).rglob("*")
                if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts}
    skip = {f"headlab.studies.{name}" for name in _study_packages(root) - followed}
    return sorted(set(module_files(entries, root, skip)) | data)


def package_of(study) -> str:
    """The package (under ``headlab/studies``) of a registered study object."""
    return type(study).__module__.split(".")[2]


def study_digest(study: str | None, root: Path = SOURCE) -> str:
    """The digest of the code behind ``study``'s rendered outputs (:func:`code_files`)."""
    return digest(code_files(study, root), root)


def module_digest(*modules: str, root: Path = SOURCE) -> str:
    """The digest of headlab ``modules`` (a ``headlab`` command's, e.g. ``headlab.eval.bleu``)
    and the headlab modules they import."""
    for module in modules:
        if module_file(module, root) is None:
            raise ValueError(f"no headlab module {module!r} under {root}")
    return digest(module_files(modules, root), root)


#: files a command that runs a model computes no number with: the paths and errors every
#: layer shares, the digests' own code, and the trainer's bookkeeping
NUMBERLESS = frozenset({"naming.py", "errors.py", "sourcecode.py"}) | trained_code.BOOKKEEPING


def model_files(module: str, heads: str, root: Path = SOURCE) -> list[Path]:
    """The files :func:`model_digest` reads, sorted."""
    if module_file(module, root) is None:
        raise ValueError(f"no headlab module {module!r} under {root}")
    return [path for path in trained_code.run_files(module, parse_heads_name(heads), root)
            if path.relative_to(root).as_posix() not in NUMBERLESS]


@functools.lru_cache(maxsize=None)
def model_digest(module: str, heads: str, root: Path = SOURCE) -> str:
    """The digest of the code headlab command ``module`` runs for a model whose path's head
    segment is ``heads`` (``8Ftoken+1L``, ``8DEA@dec=8L``): the DAG asks once per job, the
    answer is the same for every model of those heads."""
    return digest(model_files(module, heads, root), root)
