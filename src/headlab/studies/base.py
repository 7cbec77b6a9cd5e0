"""The study contract: what a reproduced paper gives the workflow.

A study is a package ``headlab.studies.<name>``:

- ``__init__.py``: one subclass of :class:`Study`, registered with :func:`register_study`:
  the study's outputs by name, and the hooks below;
- ``grid.py``: the models its config trains and the checks run when the DAG is built. It
  imports no pandas (nor its outputs), so planning a run imports only what planning needs;
- ``outputs.py``: ``Files`` (where the generic rules wrote what it reads, through
  :data:`headlab.naming.PATHS`) and the table and figure builders;
- ``claims.py``: the paper's claims judged on our runs (``effects.csv``), where it has any;
- ``readme.py``: its generated README;
- ``reference.csv``: the paper's own numbers, where it has any.

The abstract hooks are those every study must fill (a study that lacks one cannot be
instantiated, so it cannot be registered); the others have defaults that say what "none"
means. One generic Snakemake rule per output kind renders them (``rules/tables.smk``,
through :mod:`headlab.report.build`).

A builder (``builder(name)``) takes the study's ``Files`` and returns ``(inputs, build)``:
the files it reads, and a function that builds the output from them: a
:class:`headlab.studies.tables.Table` and its tidy frame for a table, a tidy frame and plot
keywords for a figure, the rows of ``effects.csv`` for the claims
(:mod:`headlab.studies.effects`).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar, Iterable, Mapping

#: a model (its wildcards, :data:`headlab.naming.MODEL_KEYS`) and the OpenNMT-py overrides
#: that train it
ModelRun = tuple[dict[str, str], dict[str, Any]]
#: an output builder: Files -> (inputs, build)
Builder = Callable[[Any], tuple[list[str], Callable[[], Any]]]

#: the name of a study's judged claims (``<outdir>/effects.csv``)
CLAIMS = "effects"


class Study(ABC):
    """One reproduced paper (or the baseline table): its grid, outputs, claims and README."""

    #: its key under ``studies:`` in the config
    name: ClassVar[str]
    #: its outputs go to ``<results>/<outdir>/``
    outdir: ClassVar[str]
    #: its tables and figures, by output name (``<outdir>/<name>.csv`` …)
    tables: ClassVar[tuple[str, ...]]
    figures: ClassVar[tuple[str, ...]] = ()
    #: those of its tables that show the GPU sittings' published rows (``published.extend``):
    #: a slice of ``config/gpu-plan.yaml`` fills one of them
    gpu_tables: ClassVar[tuple[str, ...]] = ()
    #: for a GPU table whose published runs are placed by the plan's ``row`` (a column or a
    #: row of the paper's table), the names that place one: ``config/gpu-plan.yaml`` is
    #: refused when it names another (its run would show under a label no paper row has). A
    #: table not here places its runs by their own keys (paper A: pair and heads)
    gpu_rows: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    #: whether ``builder(CLAIMS)`` judges the paper's claims (``effects.csv``)
    judges_claims: ClassVar[bool] = False
    #: keys of its config block that hold head specs as the user writes them (``4L|gate``):
    #: rewritten as their path names once the config is checked
    head_spec_keys: ClassVar[tuple[str, ...]] = ()
    #: stages of a data-dependent search, in order (paper B's grid search): each a Snakemake
    #: checkpoint writing ``select``'s choice, which ``models(study, root)`` reads back
    stages: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for attribute in ("name", "outdir", "tables"):
            if not hasattr(cls, attribute):
                raise TypeError(f"study {cls.__name__} does not set {attribute!r}")
        if cls.stages and any(getattr(cls, hook) is getattr(Study, hook)
                              for hook in ("stage_keys", "stage_inputs", "select")):
            raise TypeError(f"study {cls.name} has stages but not stage_keys, stage_inputs and select")

    # -- what every study fills ------------------------------------------------------------

    @abstractmethod
    def models(self, study: Mapping[str, Any], root: str | None = None) -> Iterable[ModelRun]:
        """Every model the study trains (with ``root``, the results folder, also those its
        finished search stages name)."""

    @abstractmethod
    def files(self, config: Mapping[str, Any], study: Mapping[str, Any], root: str) -> Any:
        """Its ``Files``: where the generic rules wrote what its outputs read."""

    @abstractmethod
    def builder(self, name: str) -> Builder:
        """The builder of one of its tables, figures, or (:data:`CLAIMS`) its claims."""

    @abstractmethod
    def readme(self, files: Any, provenance: Mapping[str, Any]) -> str:
        """Its ``README.md``: what was run, the tables beside the paper's, the verdicts."""

    # -- what a study may add ----------------------------------------------------------------

    def check(self, study: Mapping[str, Any]) -> None:
        """Raise :class:`headlab.errors.ConfigError` for a config the study cannot run."""

    def check_in(self, study: Mapping[str, Any], config: Mapping[str, Any], roots: tuple[str, ...]) -> None:
        """Like :meth:`check`, for what the study block alone cannot tell: how the rest of
        ``config`` serves it (paper A's Table 6 needs MuCoW domains that ``evaluation``
        scores) and what the data under ``roots`` (folders of fetched corpora) holds."""

    def varied_options(self, study: Mapping[str, Any]) -> set[str]:
        """OpenNMT-py options its grid varies itself (a config override of one is an error)."""
        return set()

    def checkpoints_read(self, study: Mapping[str, Any]) -> tuple[int, str | None]:
        """How many of a model's last checkpoints it reads (paper C translates their average),
        and the config key that says so: the DAG check compares it with what a training
        keeps and saves. Default: the trained model alone."""
        return 1, None

    def attention_sentences_read(self, study: Mapping[str, Any]) -> tuple[int, str | None]:
        """How many of the exported test sentences' attention it reads (paper B's figures draw
        sentence ``figure_sentence``), and the config key that says so: the DAG check
        compares it with ``evaluation.attention_sentences``, what the export writes."""
        return 0, None

    def tests(self, corpus: Mapping[str, Any]) -> list[str]:
        """The test sets of a corpus that it scores (default: all of them)."""
        return list(corpus["tests"])

    def sentences(self, study: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
        """Extra one-sentence test splits: split -> (source, reference)."""
        return {}

    def is_headline(self, study: Mapping[str, Any], root: str) -> Callable[[Mapping[str, str]], bool]:
        """Whether one of its models is in the paper's headline comparison (the atlas
        characterises those by default). Default: every model is."""
        return lambda model: True

    def ablates_heads(self, study: Mapping[str, Any], model: Mapping[str, str]) -> bool:
        """Whether it scores ``model`` with each encoder head disabled in turn (``no-hK``
        translations: the atlas reads their BLEU where they exist). Default: no."""
        return False

    def later_models(self, study: Mapping[str, Any]) -> list[dict[str, str]]:
        """Every model its search stages may name once they have run (model dicts): paper B's
        finals at each choice its grids allow, paper D's pruned fine-tunes with the head mask
        a placeholder (:data:`headlab.globs.HEAD_MASK`). The DAG check judges an
        ``atlas.models`` pattern against them before the search has run. Default: none."""
        return []

    def stage_keys(self, study: Mapping[str, Any]) -> list[dict[str, str]]:
        """(corpus, pair, stage) of each search stage, in order."""
        return []

    def stage_inputs(self, files: Any, corpus: str, pair: str, stage: str) -> list[str]:
        """What one search stage reads."""
        raise NotImplementedError

    def select(self, files: Any, corpus: str, pair: str, stage: str) -> dict:
        """One search stage's choice (written as JSON by the ``study_stage`` checkpoint)."""
        raise NotImplementedError

    # -- derived ----------------------------------------------------------------------------

    def output_names(self) -> tuple[str, ...]:
        """Every output ``builder`` knows: tables, figures, and the claims if it judges them."""
        return (*self.tables, *self.figures, *((CLAIMS,) if self.judges_claims else ()))


#: name -> the registered study
REGISTRY: dict[str, Study] = {}


def register_study(cls: type[Study]) -> type[Study]:
    """Class decorator: register one instance of a :class:`Study` subclass under its name
    (a second study of one name, or of one output folder, is an error)."""
    if not (isinstance(cls, type) and issubclass(cls, Study)):
        raise TypeError(f"{cls!r} is not a Study subclass")
    if cls.name in REGISTRY:
        raise ValueError(f"a study named {cls.name!r} is registered twice")
    taken = {study.outdir: name for name, study in REGISTRY.items()}
    if cls.outdir in taken:
        raise ValueError(f"studies {taken[cls.outdir]!r} and {cls.name!r} both write to {cls.outdir!r}")
    REGISTRY[cls.name] = cls()
    return cls
