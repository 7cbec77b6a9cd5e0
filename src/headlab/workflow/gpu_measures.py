"""What the published sittings measured, read back for the GPU plan (:mod:`headlab.workflow.gpu_plan`)
and the sitting's rehearsal: each sitting folder ``results/published/<slice>/<sitting>/``
holds its speed rows (``throughput.csv``) and its runner's clock (``status-sitting.json``).

- :func:`measured_speed`: seconds a step at each number of models side by side, from the
  newest sitting that measured it with the training's own clock (or its probes);
- :func:`measured_evaluation`: what the newest sitting's evaluation took a scored row;
- :func:`measured_compile`: what the newest sitting's probe alone measured of its model compiled,
  and which compiled cases, so which head kinds, the CUDA suites showed training as eager;
- :func:`probe_first`: which of a later call's probes the published sittings measured longest ago;
- :func:`side_track_line`: what the CUDA suite and the bench beside the trainings cost them.

A malformed measure is one line naming the file, its line and the column.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from headlab.errors import DataError
from headlab.studies.published import published_at
from headlab.workflow.gpu_runner import EVAL_MARGIN_S, SCORING_S, STOP_S

PUBLISHED = Path(__file__).resolve().parents[3] / "results/published"

#: a probe side by side measures that many models at once only where its copies' timed steps
#: ran together for at least this share of their span (sitting_speed.crowd_summary's overlap)
MIN_PROBE_OVERLAP = 0.5


def cell_number(text: str | None) -> float | None:
    """A CSV cell as a number: None when empty, NaN when it is no finite number."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return math.nan
    return value if math.isfinite(value) else math.nan


def sitting_time(folder: Path) -> str:
    """When a sitting published (:func:`headlab.studies.published.published_at`)."""
    return published_at(str(folder))


@dataclass(frozen=True)
class Measured:
    """A sitting's own clock (``headlab.engine.steptime``) with some models side by side."""
    sitting: str                # <slice>/<sitting folder>
    published: str              # when (:func:`sitting_time`)
    gpu: str
    side_by_side: int
    #: its slowest model's loop wall time a step, validation and checkpoints in it: the
    #: plan's ``seconds_per_step`` (every model of a sitting stops at one deadline)
    step_s: float
    #: its slowest model's first batch in, from the command's start, over every model of the
    #: sitting (whatever stage of a chain it trained in): the plan's ``startup_s``
    startup_s: float | None
    #: measured by one of the sitting's probes (alone, or side by side), not a training of its
    #: own (see :func:`measured_speed`)
    probe: bool = False

    def described(self) -> str:
        at = "alone" if self.side_by_side == 1 else f"with {self.side_by_side} side by side"
        return f"{self.step_s:.3f} s a step {at}" + (" (its probe, validation and checkpoints as side by side)"
                                                     if self.probe else "")


def _measure(text: str, path: Path, line: int, key: str) -> float | None:
    """A speed row's measure (None: not written); anything but a positive number is one line."""
    value = cell_number(text)
    if value is not None and not value > 0:         # NaN too
        raise DataError(f"{key} {text.strip()!r} is not a positive number", path=str(path), line=line, key=key)
    return value


def _probe_step_s(row: dict, step_ms: float, table: Path, line: int, key: str = "step_ms_alone") -> float | None:
    """A speed row's probe in the plan's terms (None: no probe): the probe's wall time a step
    (``key``: ``step_ms_alone``, or ``step_ms_probed_side_by_side``; past its warm-up, no
    validation or checkpoint) plus the validation's and checkpoints' seconds a step of the
    same model's training (an upper estimate alone, where they would share the GPU with
    nothing; side by side, with more models than the training's, an estimate)."""
    probed_ms = _measure(row.get(key), table, line, key)
    if probed_ms is None:
        return None
    shares = [cell_number(row.get(f"{part}_share")) for part in ("validation", "checkpoints")]
    return (probed_ms + step_ms * sum(share for share in shares if share is not None and share >= 0)) / 1000


def _probed_side_by_side(row: dict, step_ms: float, table: Path, line: int) -> tuple[int, float] | None:
    """(models, seconds a step) of a speed row's probe side by side, None without one, or
    with one that does not measure that many models at once as the sitting trained them:
    copies that overlapped under :data:`MIN_PROBE_OVERLAP`, or a GPU shared otherwise than
    the trainings' (``probed_mps`` against ``mps``)."""
    seconds = _probe_step_s(row, step_ms, table, line, "step_ms_probed_side_by_side")
    if seconds is None:
        return None
    count = _measure(row.get("models_probed_side_by_side"), table, line, "models_probed_side_by_side")
    if count is None or not count.is_integer():
        raise DataError(f"models_probed_side_by_side {str(row.get('models_probed_side_by_side')).strip()!r} is not a "
                        f"whole number", path=str(table), line=line, key="models_probed_side_by_side")
    overlap = cell_number(row.get("probed_overlap"))
    if overlap is None or overlap < MIN_PROBE_OVERLAP or (row.get("probed_mps") or "") != (row.get("mps") or ""):
        return None
    return int(count), seconds


@dataclass(frozen=True)
class SpeedTable:
    """One published sitting's ``throughput.csv``, read once for every measure taken of it."""
    path: Path
    sitting: str                # <slice>/<sitting folder>
    published: str              # when (:func:`sitting_time`)
    rows: list[tuple[int, dict]]  # (line, row)


def speed_tables(published: Path | str = PUBLISHED) -> list[SpeedTable]:
    """Every published sitting's speed rows, oldest first (by its provenance's time)."""
    tables = []
    for path in Path(published).glob("*/*/throughput.csv"):
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            rows = [(reader.line_num, row) for row in reader]
        tables.append(SpeedTable(path, f"{path.parent.parent.name}/{path.parent.name}", sitting_time(path.parent),
                                 rows))
    return sorted(tables, key=lambda table: (table.published, table.path.parent.name))


def measured_speed(published: Path | str = PUBLISHED, tables: list[SpeedTable] | None = None) -> dict[int, Measured]:
    """models side by side -> the newest published sitting's measure (its ``throughput.csv``
    rows that carry the training's own clock, ``step_ms``: sittings before that clock have
    none, and are left out). One model alone is measured by a sitting that trained one, or
    else by its probe (:func:`_probe_step_s`; the slowest model probed); more models than it
    trained, by its probe side by side (:func:`_probed_side_by_side`, the slowest model).
    Eager steps only, as the plan's ``seconds_per_step`` are: a compiled training's clock
    (``train_compile`` a mode) counts for no number of models (its step is faster, with its
    compile spread over it, and a slice of the plan may train eager), while its probes, which
    train eagerly whatever the sitting's mode, still count, with their start-up (to the first
    batch, before the first forward compiles); the validation and checkpoints a probe's figure
    adds are its compiled training's (seconds a step, the validation compiled too: an estimate
    of the eager ones). ``tables``: already read (:func:`speed_tables`)."""
    newest: dict[int, Measured] = {}
    for table in speed_tables(published) if tables is None else tables:
        by_count: dict[int, list[float]] = {}
        probed: list[float] = []
        crowd: dict[int, list[float]] = {}
        startups, gpu = [], "?"
        for line, row in table.rows:
            step_ms = _measure(row.get("step_ms"), table.path, line, "step_ms")
            if step_ms is None:
                continue
            probe_s = _probe_step_s(row, step_ms, table.path, line)
            probed += [probe_s] if probe_s is not None else []
            side = _probed_side_by_side(row, step_ms, table.path, line)
            if side is not None:
                crowd.setdefault(side[0], []).append(side[1])
            count = _measure(row.get("models_side_by_side"), table.path, line, "models_side_by_side")
            if count is not None and not count.is_integer():
                raise DataError(f"models_side_by_side {row['models_side_by_side'].strip()!r} is not a whole "
                                f"number", path=str(table.path), line=line, key="models_side_by_side")
            startup = _measure(row.get("start_first_batch_s"), table.path, line, "start_first_batch_s")
            startups += [startup] if startup is not None else []
            gpu = row.get("gpu") or gpu
            if (row.get("train_compile") or "off").strip() == "off":
                by_count.setdefault(int(count or 1), []).append(step_ms / 1000)
        sitting, when = table.sitting, table.published
        for count, steps in by_count.items():
            newest[count] = Measured(sitting, when, gpu, count, max(steps), max(startups, default=None))
        if probed and 1 not in by_count:
            newest[1] = Measured(sitting, when, gpu, 1, max(probed), max(startups, default=None), probe=True)
        for count, steps in crowd.items():
            if count not in by_count:
                newest[count] = Measured(sitting, when, gpu, count, max(steps), max(startups, default=None),
                                         probe=True)
    return newest


#: OpenNMT-py's own decoder (``decoder_type: transformer``, most presets) and encoder, as the
#: kinds a slice's models train (:attr:`headlab.workflow.gpu_plan.Slice.compiled_kinds`): the
#: same attention as ``8L``, but OpenNMT-py's modules, so another graph for inductor
STOCK_DECODER = "stock decoder"
STOCK_ENCODER = "stock encoder"

#: the CUDA suite's cases (tests/gpu/test_gpu.py, tests/headcases.py's models in a sitting's
#: fp16) that train a model compiled as a compiled sitting does (inductor) against the same
#: model eager, as a sitting's ``cuda-suite.csv`` names them, each with the kinds and mixers
#: it stands for: a kind is shown to train compiled as eager once every case that stands for
#: it has passed. Every case also trains learned heads (its decoder) and most a gate; they
#: stand for them only where that is the case's point, so a failure of paper C's kinds leaves
#: a slice of paper A's patterns free to compile. ``L`` needs two cases: ``learned`` (two groups
#: and a gate, DHICM, at every site) and ``stock_decoder``, whose encoder is the plain layer (one
#: group, no mixer) of every ``8L`` baseline and which alone trains OpenNMT-py's decoder.
#: ``tests/test_gpu_plan.py`` keeps this in step with the registry and the cases' models. A
#: kind no case stands for (a plugin's; :data:`STOCK_ENCODER`) keeps its slices eager.
COMPILED_TEST = "tests/gpu/test_gpu.py::test_the_compiled_model_trains_as_the_eager_one"
COMPILED_KINDS = {
    "fixed": ("Ftoken", "Fword"),
    "learned": ("L", "Lwide", "gate", "dhicm"),
    "syntax": ("DEA", "LPEA", "RelPos", "Local", "RHEdea", "RHElpea", "RHErel", "RHEloc"),
    "stock_decoder": ("L", STOCK_DECODER),
}
COMPILED_CASES = tuple(f"{COMPILED_TEST}[cuda-{case}-fp16]" for case in COMPILED_KINDS)
#: every kind a case stands for, in the order of :data:`COMPILED_KINDS` (the messages' order)
_KIND_ORDER = tuple(dict.fromkeys(kind for kinds in COMPILED_KINDS.values() for kind in kinds))


@dataclass(frozen=True)
class CompiledSuite:
    """The newest outcome of each of :data:`COMPILED_CASES` in the published sittings'
    ``cuda-suite.csv``: case (``"fixed"``) -> (outcome, ``<slice>/<sitting>``)."""
    newest: dict[str, tuple[str, str]] = field(default_factory=dict, hash=False)

    def unproven(self, kinds: Iterable[str] | None = None) -> str | None:
        """Why a compiled training of these kinds and mixers should not publish rows yet (every
        kind a case stands for where None), each reason that holds: the newest run of a case
        that stands for one of them is not a pass (a failure: the compiled model computes
        another function than the eager one on the GPU, or an error of the test); no sitting
        has run one; no case stands for one. None: each of their cases passed in its newest run."""
        asked = set(_KIND_ORDER if kinds is None else kinds)
        ordered = [kind for kind in _KIND_ORDER if kind in asked] + sorted(asked - set(_KIND_ORDER))
        cases = [case for case, covered in COMPILED_KINDS.items() if asked & set(covered)]
        failed = [(case, *self.newest[case]) for case in cases if case in self.newest
                  and self.newest[case][0] != "passed"]
        reasons = []
        if failed:
            # a failure may be another function or an error of the test (out of memory beside the
            # trainings): either way nothing shows the compiled model trains as the eager one
            unshown = [kind for kind in ordered if any(kind in COMPILED_KINDS[case] for case, *_ in failed)]
            reasons.append("; ".join(f"the CUDA suite's [cuda-{case}-fp16] {outcome or 'ended'} in {sitting}"
                                     for case, outcome, sitting in failed)
                           + f": no compiled model of {', '.join(unshown)} is shown to train as the eager one on "
                             f"the GPU")
        missing = [f"[cuda-{case}-fp16]" for case in cases if case not in self.newest]
        if missing:
            reasons.append(f"no published sitting's CUDA suite has run {', '.join(missing)} of {COMPILED_TEST} (a "
                           f"compiled model against the eager one on the GPU)")
        uncovered = [kind for kind in ordered if kind not in _KIND_ORDER]
        if uncovered:
            reasons.append(f"no compiled case of {COMPILED_TEST} trains {', '.join(uncovered)}")
        return "; ".join(reasons) or None


@dataclass(frozen=True)
class CompileMeasured:
    """What a sitting's probe alone measured of its model compiled in place, in the same
    process as its eager steps (:class:`headlab.workflow.sitting_probe.ThenCompiled`;
    ``throughput.csv``'s ``compile_mode``, ``step_ms_alone_compiled`` and ``compile_s``,
    against ``step_ms_alone``)."""
    sitting: str                # <slice>/<sitting folder>
    published: str              # when (:func:`sitting_time`)
    gpu: str
    mode: str
    eager_ms: float             # the probe's wall ms a step alone, eager
    #: its wall ms a step once compiled; None: the probe was stopped while compiling
    compiled_ms: float | None
    #: what the compile cost before the steps pay it back (stopped while compiling: how long
    #: it had compiled, a lower bound; 0 where it failed)
    compile_s: float
    #: the compile (or the compiled steps) raised: the error's first line (``compile_error``)
    error: str | None = None
    #: what the published CUDA suites show of compiled models training as the eager ones on
    #: the GPU, kind by kind (:meth:`CompiledSuite.unproven`)
    suite: CompiledSuite = field(default_factory=CompiledSuite)

    def unproven(self, kinds: Iterable[str] | None = None) -> str | None:
        """Why a compiled training of these kinds should not publish rows yet (None: the
        suites show it trains as the eager one)."""
        return self.suite.unproven(kinds)

    @property
    def speedup(self) -> float | None:
        return None if self.compiled_ms is None else self.eager_ms / self.compiled_ms

    def steps_gain(self, window_s: float) -> float | None:
        """Steps a training of ``window_s`` wall seconds reaches compiled over the steps it
        reaches eager: it compiles for ``compile_s``, then steps :attr:`speedup` times faster
        (0: the compile alone outlasts the window, or it failed, which would end the training
        there; None: stopped while compiling, before the window ran out, so unknown). The
        probe's ratio alone stands for the trainings' side by side, each as launch-bound as it
        (a compiled sitting's own clock is not yet read for that)."""
        if self.error is not None or self.compile_s >= window_s:
            return 0.0
        if self.speedup is None:
            return None
        return (window_s - self.compile_s) * self.speedup / window_s

    def described(self) -> str:
        if self.error is not None:
            return f"the sitting {self.sitting}'s probe failed to compile its model ({self.mode}): {self.error}"
        if self.speedup is None:
            return (f"the sitting {self.sitting}'s probe was stopped after {self.compile_s:.0f} s compiling its model "
                    f"({self.mode})")
        return (f"the sitting {self.sitting}'s probe ran its model compiled ({self.mode}) {self.speedup:.2f}x as fast "
                f"as eager ({self.compiled_ms:.0f} against {self.eager_ms:.0f} ms a step alone) after "
                f"{self.compile_s:.0f} s of compile")


def compiled_suite(published: Path | str = PUBLISHED) -> CompiledSuite:
    """The newest outcome of each compiled case in the published sittings' CUDA suites."""
    newest: dict[str, tuple[str, str]] = {}
    names = {f"{COMPILED_TEST}[cuda-{case}-fp16]": case for case in COMPILED_KINDS}
    suites = sorted(Path(published).glob("*/*/cuda-suite.csv"), key=lambda path: (sitting_time(path.parent),
                                                                                 path.parent.name))
    for path in suites:
        with open(path, newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                if row.get("test") in names:
                    newest[names[row["test"]]] = ((row.get("outcome") or "").strip(),
                                                  f"{path.parent.parent.name}/{path.parent.name}")
    return CompiledSuite(newest)


def measured_compile(published: Path | str = PUBLISHED,
                     tables: list[SpeedTable] | None = None) -> CompileMeasured | None:
    """The newest published sitting's compiled probe (None: no sitting's probe compiled its
    model; of several rows in one sitting, a failed compile, else the least speedup), with
    what the CUDA suites show of compiled models, kind by kind (:func:`compiled_suite`). ``tables``:
    already read (:func:`speed_tables`, oldest first)."""
    newest = None
    for table in speed_tables(published) if tables is None else tables:
        found = []
        for line, row in table.rows:
            mode = (row.get("compile_mode") or "").strip()
            if not mode:
                continue
            eager = _measure(row.get("step_ms_alone"), table.path, line, "step_ms_alone")
            error = (row.get("compile_error") or "").strip()
            if error:
                # it never stepped compiled: a failure to judge by, whatever the eager step took
                found.append(CompileMeasured(table.sitting, table.published, row.get("gpu") or "?", mode,
                                             eager or math.nan, None, 0.0, error))
                continue
            # a warm-up quicker than as many eager steps (a compile under a second) costs nothing
            compile_s = cell_number(row.get("compile_s"))
            if compile_s is not None and math.isnan(compile_s):
                raise DataError(f"compile_s {row['compile_s'].strip()!r} is not a number", path=str(table.path),
                                line=line, key="compile_s")
            if eager is None or compile_s is None:
                continue             # no eager step time to set it against: nothing to judge by
            compile_s = max(compile_s, 0.0)
            compiled = _measure(row.get("step_ms_alone_compiled"), table.path, line, "step_ms_alone_compiled")
            found.append(CompileMeasured(table.sitting, table.published, row.get("gpu") or "?", mode, eager,
                                         compiled, compile_s))
        if found:
            newest = min(found, key=lambda measure: (measure.error is None, measure.speedup or 0.0))
    if newest is None:
        return None
    return dataclasses.replace(newest, suite=compiled_suite(published))


#: a later call's probes, each by the ``throughput.csv`` column only it fills (the probe side
#: by side; the probe alone's compiled phase: its eager figures a sitting of one model's clock
#: measures too) and by its exit status in the runner's calls (``status-sitting.json``), which
#: says it ran where it measured nothing (a crowd out of memory, a compile cut)
PROBE_COLUMNS = {"crowd": "models_probed_side_by_side", "alone": "compile_mode"}
PROBE_RUNS = {"crowd": "crowd_rc", "alone": "probe_rc"}


def _probes_run(folder: Path) -> set[str]:
    """The probes a published sitting's runner started, by its calls' exit statuses."""
    try:
        calls = json.loads((folder / "status-sitting.json").read_text(encoding="utf-8")).get("calls") or []
    except (OSError, ValueError, AttributeError):
        return set()
    return {probe for probe, key in PROBE_RUNS.items() if any(isinstance(call, dict) and key in call for call in calls)}


def probe_first(published: Path | str = PUBLISHED, tables: list[SpeedTable] | None = None) -> str:
    """Which probe a sitting's later call runs first (``crowd`` or ``alone``): the one the
    published sittings ran longest ago, or never (neither: ``crowd``, one seed more a sitting
    for every ready slice). A later call rarely holds both (~190 s of probes and their
    start-ups, ~330 s with the compile first), so the one run first every time would be the
    only one ever measured; taken in turn, each is measured every other sitting (a probe that
    ran and measured nothing counts as run: one that fails every time does not hold the turn)."""
    newest = {probe: "" for probe in PROBE_COLUMNS}
    for table in speed_tables(published) if tables is None else tables:
        ran = _probes_run(table.path.parent)
        for probe, column in PROBE_COLUMNS.items():
            if probe in ran or any((row.get(column) or "").strip() for _, row in table.rows):
                newest[probe] = max(newest[probe], table.published)
    return "alone" if newest["alone"] < newest["crowd"] else "crowd"


@dataclass(frozen=True)
class EvaluationMeasured:
    """What a sitting's evaluation took: its first call's ``evaluate`` phase (the runner's
    clock in ``status-sitting.json``: the sitting's start, translation, scoring and writing)
    less its head atlas, which takes what is left of the reserve and is skipped short of it."""
    sitting: str                # <slice>/<sitting folder>
    published: str              # when (:func:`sitting_time`)
    evaluated: int              # rows scored (with BLEU)
    seconds: float
    #: its deadline cut the scores (a BLEU lack of cause ``deadline``): its slice's reserve
    #: is short, and its rate only a lower bound
    cut: bool = False
    #: of ``seconds``, the evaluation's start until its translations ended (its provenance's
    #: ``evaluation_wall_s.translate``; None: a sitting of before it was recorded)
    translate_s: float | None = None

    def for_rows(self, rows: int) -> float:
        """Seconds for ``rows`` evaluations: linear in the rows, an upper estimate (the models
        translate at once, so more of them share the GPU rather than queue)."""
        return self.seconds / self.evaluated * rows

    def reserve_for(self, rows: int) -> float:
        """The evaluation reserve ``rows`` need: their translations at this rate (linear in the
        rows, as :meth:`for_rows`), and what the runner and the evaluation keep back from
        them whatever they take (:data:`headlab.workflow.gpu_runner.EVAL_MARGIN_S`,
        ``SCORING_S``, ``STOP_S``). A reserve that holds the whole evaluation but not these
        cuts the translations short: BLEU on the first chunk of the test set."""
        translate = self.seconds if self.translate_s is None else self.translate_s
        return translate / self.evaluated * rows + EVAL_MARGIN_S + SCORING_S["cuda"] + STOP_S

    def described(self) -> str:
        translating = "" if self.translate_s is None else f", {self.translate_s:.0f} s of it translating"
        return (f"the sitting {self.sitting} ({self.evaluated} rows in {self.seconds:.0f} s{translating}, its head "
                f"atlas aside" + ("; cut by its deadline: at least that rate" if self.cut else "") + ")")


def measured_evaluation(published: Path | str = PUBLISHED) -> EvaluationMeasured | None:
    """The newest published sitting's evaluation (None: no sitting has its runner's status)."""
    newest = None
    for status_path in Path(published).glob("*/*/status-sitting.json"):
        folder = status_path.parent
        try:
            calls = json.loads(status_path.read_text(encoding="utf-8")).get("calls") or [{}]
            wall = ((calls[0].get("phases") or {}).get("evaluate") or {}).get("wall_s")
        except (OSError, ValueError, AttributeError) as err:
            raise DataError(f"not a runner's status ({err})", path=str(status_path)) from None
        if not isinstance(wall, (int, float)) or not (folder / "rows.csv").is_file():
            continue                 # trained nothing, or published no rows
        with open(folder / "rows.csv", newline="", encoding="utf-8") as handle:
            bleu = [cell_number(row.get("bleu")) for row in csv.DictReader(handle)]
        evaluated = sum(1 for value in bleu if value is not None and not math.isnan(value))
        try:
            provenance = json.loads((folder / "provenance.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise DataError(f"unreadable ({err})", path=str(folder / "provenance.json")) from None
        if not evaluated:
            continue                 # its evaluation scored nothing
        atlas = (provenance.get("atlas") or {}).get("wall_s") or 0.0
        cut = any(str(lack).startswith("BLEU") for lack in (provenance.get("lacks_by_cause") or {}).get("deadline") or [])
        translate = (provenance.get("evaluation_wall_s") or {}).get("translate")
        found = EvaluationMeasured(f"{folder.parent.name}/{folder.name}", sitting_time(folder), evaluated,
                                   max(wall - atlas, 0.0), cut,
                                   float(translate) if isinstance(translate, (int, float)) else None)
        if newest is None or (found.published, found.sitting) > (newest.published, newest.sitting):
            newest = found
    return newest


def side_track_line(published: Path | str = PUBLISHED, tables: list[SpeedTable] | None = None) -> str:
    """What the CUDA suite and the bench beside the trainings cost them, at the newest
    sitting that split its steps by it (``throughput.csv``'s ``step_ms_side_track`` and
    ``step_ms_clear``, means over its models): the measure that says whether the side track
    belongs in the training window or after it. ``tables``: already read (:func:`speed_tables`)."""
    newest = None
    for table in speed_tables(published) if tables is None else tables:
        pairs = [(_measure(row.get("step_ms_side_track"), table.path, line, "step_ms_side_track"),
                  _measure(row.get("step_ms_clear"), table.path, line, "step_ms_clear")) for line, row in table.rows]
        pairs = [pair for pair in pairs if pair != (None, None)]
        if pairs:                    # the tables come oldest first
            newest = (table.sitting, pairs)
    if newest is None:
        return "side track: no published sitting has split its trainings' steps by what ran beside them yet"
    sitting, pairs = newest
    both = [pair for pair in pairs if None not in pair]
    if both:
        beside, clear = (statistics.fmean(values) for values in zip(*both))
        return (f"side track: at {sitting}, the trainings took {beside:.0f} ms a step while the CUDA suite or the "
                f"bench ran beside them, {clear:.0f} ms while neither did ({beside / clear - 1:+.0%}; a mean over "
                f"{len(both)} models)")
    beside = [first for first, _ in pairs if first is not None]
    return (f"side track: at {sitting}, " + (
        f"the CUDA suite or the bench ran beside every marked span of the trainings ({statistics.fmean(beside):.0f} "
        f"ms a step): no clear span to compare with" if beside else
        f"nothing ran beside the trainings' marked spans ({statistics.fmean(c for _, c in pairs):.0f} ms a step)"))
