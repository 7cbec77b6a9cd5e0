"""The GPU plan (``config/gpu-plan.yaml``): an ordered queue of slices of the GPU config, and
which of them a sitting trains next, read from what ``results/published/`` already holds.

    python -m headlab.workflow.gpu_plan [--published results/published] [--ahead 3]
        (the queue's state, and the next sittings if each ends as the plan expects)

- :func:`load`: the plan checked against ``config/gpu-plan.schema.yaml``; an error is one
  line naming the file, its line and the key, and a slice's ``cost_gpu_s`` must agree with
  the measured throughput (so a cost is never a guess written once and left);
- :func:`published_seeds`: per slice, the status of each seed over its sitting folders
  (``results/published/<slice>/<sitting>/rows.csv``), counting only the runs by each model's
  newest recipe (:mod:`headlab.workflow.recipe`: a seed published by an earlier one only is
  trained anew);
- :func:`choose`: the first ready slice that fits one sitting and has a seed never
  published, published by an earlier recipe only, or *undertrained* (published, but trained
  to under half the steps a sitting reaches now: by slower code, before the learning rate's
  peak); only when no slice has
  one, the first with a seed published short of convergence (its rerun, least trained
  first). A seed at its limit (a rerun would add under 10% more training, or three sittings
  ran it) is never rerun, so a slice whose models cannot converge in one sitting never holds
  the queue;
- :func:`forecast`: the next sittings if each ends as the plan expects;
- :func:`stale_throughput`: where the plan's throughput is off the newest sitting's own
  clock (``throughput.csv``), so that the steps a sitting reaches, and with them every
  seed's state, are never read from figures a later sitting measured otherwise; and where
  a slice's evaluation reserve is short of what the newest sitting's evaluation took a row,
  times the rows the slice scores (:func:`headlab.workflow.gpu_measures.measured_evaluation`);
  and where the plan's ``sitting.compile``, a slice's ``compile`` or ``throughput.compiled``
  is off the newest compiled probe (:mod:`headlab.workflow.gpu_compile`: off where compiling
  a sitting's trainings would buy them at least 10% more steps, or a mode that buys them less).
"""
from __future__ import annotations

import argparse
import csv
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from headlab.errors import ConfigError, DataError, HeadlabError
from headlab.studies.published import AVERAGED as TRAINED
from headlab.studies.published import COLUMNS as RENDERED_COLUMNS
from headlab.studies.published import LATER_COLUMNS
from headlab.workflow.gpu_measures import (PUBLISHED, EvaluationMeasured, Measured, SpeedTable,
                                           cell_number, measured_compile, measured_evaluation, measured_speed,
                                           side_track_line, sitting_time, speed_tables)
from headlab.workflow.slice_check import check_trainings

REPO = Path(__file__).resolve().parents[3]
PLAN = REPO / "config/gpu-plan.yaml"
SCHEMA = REPO / "config/gpu-plan.schema.yaml"
#: the publication contract (rows.csv of every sitting folder): the table renderer's columns
#: and those it reads blank from the sittings before them
ROW_COLUMNS = (*RENDERED_COLUMNS, *LATER_COLUMNS)
COST_TOLERANCE = 0.05
#: a seed whose models trained fewer steps than this share of what one sitting reaches now
#: is rerun with the new seeds, not after them: its rerun at least doubles the training, a
#: different model rather than a deadline row made converged (paper A's seed 1: 1,000
#: steps at 0.33 s a step, where a sitting now reaches ~3,110)
UNDERTRAINED_SHARE = 0.5
#: a seed published short of convergence is rerun only if a sitting now trains its models at
#: least this many times further, and its latest sitting did so over the ones before it
#: (else it is at its limit: same seed, same code, same models; a measured faster throughput
#: raises a sitting's steps and reopens the first kind)
RERUN_MIN_GAIN = 1.1
#: sittings a seed may take without converging: after them it waits for a person (a seed
#: that diverges or is cut short again and again would otherwise hold the queue)
MAX_SITTINGS_A_SEED = 3
#: a plan's seconds a step, or start-up, further than this share from the newest sitting's
#: measure is stale (the three models of the 993e600 sitting ran 0.13-0.135 s a step, ~4% apart)
SPEED_TOLERANCE = 0.10
#: the most copies a sitting's probe side by side trains at once: each is a training and
#: its data worker, on a GPU machine of 16 cores
MAX_PROBE_SIDE_BY_SIDE = 8


@dataclass(frozen=True)
class Slice:
    name: str
    entry: dict
    plan: "Plan"

    @property
    def heads(self) -> list[str]:
        return [model["heads"] for model in self.entry["models"]]

    @property
    def compiled_kinds(self) -> set[str]:
        """The kinds and mixers of the models a compiled sitting of the slice trains compiled
        (every site; its chain's fine-tunes train eager: ``gpu_runner``'s ``train_args``), and
        OpenNMT-py's own decoder or encoder where the preset (with the slice's overrides) keeps
        one (``gpu_measures.STOCK_DECODER``: a headlab decoder only where a model's heads name
        the decoder's sites, as ``engine.config`` decides)."""
        from headlab.engine.config import resolve_preset
        from headlab.heads.spec import kinds_used
        from headlab.naming import STOCK_HEADS, parse_heads_name
        from headlab.workflow.gpu_measures import STOCK_DECODER, STOCK_ENCODER

        options = {**resolve_preset(self.entry["preset"]), **(self.entry.get("overrides") or {})}
        kinds = set().union(*(kinds_used(heads) for heads in self.heads))
        if options.get("encoder_type") != "headlab":
            kinds.add(STOCK_ENCODER)
        if options.get("decoder_type") != "headlab" and any(
                (specs := parse_heads_name(str(heads)))["dec"] == specs["cross"] == STOCK_HEADS for heads in self.heads):
            kinds.add(STOCK_DECODER)
        return kinds

    @property
    def chain(self) -> list[dict]:
        """Fine-tunes trained after the models in the same sitting (paper D), stage by stage."""
        return list(self.entry.get("chain") or [])

    @property
    def rows(self) -> set[tuple[str, str]]:
        """(row, heads) of every model the slice publishes, its chain's (parent's heads) too."""
        from headlab.naming import heads_name

        return ({(model["row"], heads_name(model["heads"])) for model in self.entry["models"]}
                | {(link["row"], heads_name(link["parent"])) for link in self.chain}
                | {(link["initial_row"], heads_name(link["parent"])) for link in self.chain if link.get("initial_row")})

    def _step_s(self, side_by_side: int) -> float:
        table = self.plan.throughput["seconds_per_step"]
        counts = sorted(int(n) for n in table)
        # more trainings than measured: the largest measured, scaled linearly (GPU-bound)
        if side_by_side > counts[-1]:
            return table[str(counts[-1])] * side_by_side / counts[-1]
        return table[str(min(n for n in counts if n >= side_by_side))]

    @property
    def chain_stage_s(self) -> dict[int, float]:
        """stage -> its seconds in a sitting: a training's start-up, the preparation (the
        parents' checkpoints read, the fine-tunes' written), and its longest fine-tune at
        the throughput of the stage's trainings side by side."""
        stages: dict[int, list[dict]] = {}
        for link in self.chain:
            stages.setdefault(link["stage"], []).append(link)
        seeds = self.entry["seeds_per_sitting"]
        return {stage: self.plan.throughput["startup_s"] + self.plan.throughput.get("prepare_s", 0)
                + max(link["options"]["train_steps"] for link in links) * self._step_s(len(links) * seeds)
                for stage, links in sorted(stages.items())}

    @property
    def side_by_side(self) -> int:
        """Trainings sharing the GPU in one sitting: its models times its seeds."""
        return len(self.entry["models"]) * self.entry["seeds_per_sitting"]

    def with_seeds(self, seeds_per_sitting: int) -> "Slice":
        """The same slice with ``seeds_per_sitting`` seeds a sitting (its costs, windows and
        steps follow): what one seed more a sitting would reach."""
        return Slice(self.name, {**self.entry, "seeds_per_sitting": seeds_per_sitting}, self.plan)

    @property
    def one_seed_more(self) -> "Slice | None":
        """:meth:`with_seeds` one seed more than the plan's, None where its seeds are all in
        one sitting already."""
        seeds = self.entry["seeds_per_sitting"] + 1
        return self.with_seeds(seeds) if seeds <= len(self.entry["seeds"]) else None

    @property
    def seconds_per_step(self) -> float:
        return self._step_s(self.side_by_side)

    @property
    def evaluations(self) -> int:
        """Rows one sitting translates and scores: every row of the slice for each of its seeds."""
        return len(self.rows) * self.entry["seeds_per_sitting"]

    @property
    def eval_reserve_s(self) -> float:
        """Seconds its sitting keeps for evaluation: the slice's own, else the plan's."""
        return self.entry.get("eval_reserve_s", self.plan.sitting["eval_reserve_s"])

    @property
    def compile(self) -> str:
        """Its trainings' ``-compile``: the slice's own ``compile``, else the plan's
        ``sitting.compile`` (one sitting trains one slice: a slice whose window a compile would
        not pay back stays eager where the others compile)."""
        return _compile_mode(self.entry["compile"]) if "compile" in self.entry else self.plan.compile

    @property
    def compile_key(self) -> str:
        """The plan's key its ``-compile`` comes from."""
        return f"slices.{self.name}.compile" if "compile" in self.entry else "sitting.compile"

    @property
    def train_window_s(self) -> float:
        """The sitting's budget less packing and this slice's evaluation reserve."""
        return self.plan.sitting["budget_s"] - self.plan.sitting["pack_s"] - self.eval_reserve_s

    @property
    def computed_cost_s(self) -> float:
        return (self.plan.throughput["startup_s"] + self.entry["expected_steps"] * self.seconds_per_step
                + sum(self.chain_stage_s.values()) + self.eval_reserve_s)

    @property
    def steps_window_s(self) -> float:
        """Seconds each model steps in one sitting: its training window less the start-up and
        its chain's stages."""
        return self.train_window_s - self.plan.throughput["startup_s"] - sum(self.chain_stage_s.values())

    @property
    def compile_gain(self) -> float:
        """The steps its trainings reach in a sitting over those they would reach eager: by the
        plan's ``throughput.compiled`` where the slice compiles in its mode (the compile inside
        the window, then ``speedup`` times the eager steps), else 1 (eager; or a mode the plan
        has no figures for, counted at eager speed, an underestimate)."""
        figures = self.plan.throughput.get("compiled")
        if self.compile == "off" or not figures or figures["mode"] != self.compile:
            return 1.0
        if self.steps_window_s <= figures["compile_s"]:
            return 0.0                  # the compile alone outlasts the window
        return (self.steps_window_s - figures["compile_s"]) * figures["speedup"] / self.steps_window_s

    @property
    def steps_in_window(self) -> int:
        """Steps each model reaches in one sitting's training window (less its chain's stages),
        compiled where it compiles (:attr:`compile_gain`)."""
        return int(self.steps_window_s / self.seconds_per_step * self.compile_gain)

    @property
    def eager_steps_in_window(self) -> int:
        """Steps each model reaches in one sitting at eager speed: what the runner checks a
        window against (its manifest's ``seconds_per_step``), whatever the slice compiles."""
        return int(self.steps_window_s / self.seconds_per_step)

    @property
    def fits(self) -> bool:
        """Its window holds ``min_steps`` at eager speed, as the runner judges it on the GPU
        machine (a compile's gain would not save a call the runner refuses)."""
        return self.eager_steps_in_window >= self.entry["min_steps"]


def _compile_mode(written: str | bool) -> str:
    """A plan's compile mode as ``headlab train -compile`` spells it: YAML reads a bare ``off``
    as false."""
    return "off" if written is False else written


@dataclass(frozen=True)
class Plan:
    data: dict
    path: Path

    @property
    def throughput(self) -> dict:
        return {**self.data["throughput"],
                "seconds_per_step": {str(k): v for k, v in self.data["throughput"]["seconds_per_step"].items()}}

    @property
    def sitting(self) -> dict:
        return self.data["sitting"]

    @property
    def compile(self) -> str:
        """The sitting's trainings' ``-compile`` (``sitting.compile``; YAML's bare ``off``
        reads as false): off unless the plan sets a mode."""
        return _compile_mode(self.sitting.get("compile", "off"))

    @property
    def slices(self) -> list[Slice]:
        return [Slice(entry["name"], entry, self) for entry in self.data["slices"]]

    def slice(self, name: str) -> Slice:
        for found in self.slices:
            if found.name == name:
                return found
        raise ConfigError(f"no slice {name!r} in the plan (slices: {', '.join(s.name for s in self.slices)})",
                          path=str(self.path), key="slices")

    @property
    def probe_side_by_side(self) -> int:
        """How many models a sitting's probe side by side trains at once: the most that one
        seed more a sitting would train of any ready slice (so one probe bounds every ready
        slice's next seed: a step with fewer side by side is no slower), at most
        :data:`MAX_PROBE_SIDE_BY_SIDE`."""
        more = [found.one_seed_more.side_by_side for found in self.slices
                if found.entry["ready"] and found.one_seed_more is not None]
        return min(max(more, default=1), MAX_PROBE_SIDE_BY_SIDE)


def _line_of(root_node, location) -> int | None:
    """The 1-based line of the YAML node at ``location`` (keys and indices), or its nearest
    parent (the document's first line when none is written)."""
    from headlab.workflow.configfile import node_line

    if root_node is None:
        return None
    return node_line(root_node, list(location)) or root_node.start_mark.line + 1


def _error_key(error) -> tuple[list, str]:
    """(location, key name) a jsonschema error is about: the offending key itself for an
    unknown key, else the path to the bad value."""
    import re

    location = list(error.absolute_path)
    if error.validator == "additionalProperties":
        extra = re.findall(r"'([^']+)' was unexpected", error.message)
        if extra:
            return location + [extra[0]], extra[0]
    if error.validator == "required":
        missing = re.findall(r"'([^']+)' is a required property", error.message)
        if missing:
            return location, missing[0]
    named = [str(step) for step in location if not isinstance(step, int)]
    return location, named[-1] if named else "plan"


def load(path: Path | str = PLAN, schema_path: Path | str = SCHEMA) -> Plan:
    """The plan, checked; ConfigError (one line: file:line: [key] what is wrong) otherwise."""
    import jsonschema
    import yaml

    path = Path(path)
    text = path.read_text()
    try:
        data = yaml.safe_load(text)
        root_node = yaml.compose(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise ConfigError(f"not YAML: {getattr(err, 'problem', err)}", path=str(path),
                          line=mark.line + 1 if mark else None) from None
    schema = yaml.safe_load(Path(schema_path).read_text())
    # seconds_per_step's keys are model counts: YAML reads them as integers, JSON Schema wants strings
    if isinstance(data, dict) and isinstance((data.get("throughput") or {}).get("seconds_per_step"), dict):
        data["throughput"]["seconds_per_step"] = {str(k): v for k, v in data["throughput"]["seconds_per_step"].items()}
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        error = errors[0]
        location, key = _error_key(error)
        message = (f"unknown key {key!r}" if error.validator == "additionalProperties"
                   else f"missing key {key!r}" if error.validator == "required"
                   else error.message.splitlines()[0])
        raise ConfigError(message, path=str(path), line=_line_of(root_node, location), key=key)
    plan = Plan(data, path)
    names = [entry["name"] for entry in data["slices"]]
    for index, found in enumerate(plan.slices):
        where = {"path": str(path), "line": _line_of(root_node, ["slices", index, "cost_gpu_s"])}
        if names.count(found.name) > 1:
            raise ConfigError(f"slice {found.name!r} is named twice", key="name", **where)
        _check_models(found, path, root_node, index)
        _check_chain(found, path, root_node, index)
        _check_rows(found, path, root_node, index)
        check_trainings(found.name, found.entry, found.chain,
                        lambda location, at=index: {"path": str(path),
                                                    "line": _line_of(root_node, ["slices", at, *location])})
        written, computed = found.entry["cost_gpu_s"], found.computed_cost_s
        if abs(written - computed) > COST_TOLERANCE * computed:
            raise ConfigError(f"slice {found.name}: cost_gpu_s {written:g} disagrees with the measured throughput "
                              f"({computed:.0f} s: startup + {found.entry['expected_steps']} steps x "
                              f"{found.seconds_per_step:g} s with {found.side_by_side} side by side"
                              + (f" + the chain's stages {sum(found.chain_stage_s.values()):.0f} s" if found.chain else "")
                              + " + evaluation)",
                              key="cost_gpu_s", **where)
    return plan


def _check_models(found: Slice, path: Path, root_node, index: int) -> None:
    """The slice's table one that shows published GPU rows (else its rows would be
    published into no table, and the table it meant would say "not yet run"), and each
    model once: two specs of one path name (``8L`` for two rows) would train once while the
    cost counts two, and the bundle would keep one of their rows."""
    from headlab.naming import heads_name
    from headlab.studies import STUDIES

    study, table = found.entry["study"], found.entry["table"]
    if table not in STUDIES[study].gpu_tables:
        raise ConfigError(f"slice {found.name}: {study} shows published GPU rows in "
                          f"{' and '.join(STUDIES[study].gpu_tables)}, not {table!r}", key="table", path=str(path),
                          line=_line_of(root_node, ["slices", index, "table"]))
    seen: dict[str, str] = {}
    for number, model in enumerate(found.entry["models"]):
        name = heads_name(model["heads"])
        if name in seen:
            raise ConfigError(f"slice {found.name}: heads {model['heads']!r} names the same model as "
                              f"{seen[name]!r}: list it once", key="heads", path=str(path),
                              line=_line_of(root_node, ["slices", index, "models", number]))
        seen[name] = model["heads"]


def _check_rows(found: Slice, path: Path, root_node, index: int) -> None:
    """Each ``row`` (and a chain link's ``initial_row``) one its table places a run by
    (``Study.gpu_rows``): a misspelt one would publish, and show beside the table under a
    label no paper row has, where the row it meant says "not yet run"."""
    from headlab.studies import STUDIES

    study, table = found.entry["study"], found.entry["table"]
    names = STUDIES[study].gpu_rows.get(table)
    if names is None:
        return
    places = [(["models", number, "row"], model["row"]) for number, model in enumerate(found.entry["models"])]
    for number, link in enumerate(found.chain):
        places += [(["chain", number, key], link[key]) for key in ("row", "initial_row") if link.get(key)]
    for location, row in places:
        if row not in names:
            raise ConfigError(f"slice {found.name}: row {row!r} is none of {study} {table}'s rows "
                              f"({', '.join(names)})", key=location[-1], path=str(path),
                              line=_line_of(root_node, ["slices", index, *location]))


def _check_chain(found: Slice, path: Path, root_node, index: int) -> None:
    """A chain's links name a model of the slice as parent, an earlier stage's link as
    ``mask_from``, and each other once."""
    heads = set(found.heads)
    earlier: dict[str, int] = {}
    names = [link["name"] for link in found.chain]
    for number, link in enumerate(found.chain):
        where = {"path": str(path), "line": _line_of(root_node, ["slices", index, "chain", number])}
        if names.count(link["name"]) > 1:
            raise ConfigError(f"slice {found.name}: chain link {link['name']!r} is named twice", key="chain", **where)
        if link["name"] in heads:
            raise ConfigError(f"slice {found.name}: chain link {link['name']!r} has the name of a model's heads",
                              key="chain", **where)
        if link["parent"] not in heads:
            raise ConfigError(f"slice {found.name}: chain link {link['name']}'s parent {link['parent']!r} is not "
                              f"one of the slice's models ({', '.join(found.heads)})", key="parent", **where)
        source = link.get("mask_from")
        if source is not None and not (source in earlier and earlier[source] < link["stage"]):
            raise ConfigError(f"slice {found.name}: chain link {link['name']}'s mask_from {source!r} is not a link "
                              f"of an earlier stage", key="mask_from", **where)
        if source is not None and "enc_head_mask" in link["options"]:
            raise ConfigError(f"slice {found.name}: chain link {link['name']} has both mask_from and "
                              f"options.enc_head_mask", key="enc_head_mask", **where)
        earlier[link["name"]] = link["stage"]


def check_rows_in_plan(found: Slice, rows: Path) -> None:
    """Each row of a sitting's ``rows.csv`` one the slice's plan publishes: its study, table,
    pair and layers the slice's, its (row, heads) one of :attr:`Slice.rows`. A row the plan
    does not name is never counted by the queue (its seed would be trained again for ever)
    and shows in the table under a label no paper row has. Checked when a sitting is
    received, not when the tables are read: a plan may drop a model whose rows were published."""
    import csv

    plan = _shown(found.plan.path)
    where = f"slice {found.name} of {plan}"
    expected = {key: found.entry[key] for key in ("study", "table", "pair", "layers")}
    named = {}
    for row_name, heads in sorted(found.rows):
        named.setdefault(row_name, []).append(heads)
    listing = "; ".join(f"{row_name}: {', '.join(sorted(heads))}" for row_name, heads in named.items())
    with open(rows, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        for row in reader:
            for key, value in expected.items():
                if (row.get(key) or "") != str(value):
                    raise DataError(f"{key} {row.get(key)!r}, where {where} trains {value!r}", path=str(rows),
                                    line=reader.line_num, key=key)
            if (row["row"], row["heads"]) not in found.rows:
                key = "row" if row["heads"] in {heads for _, heads in found.rows} else "heads"
                raise DataError(f"row {row['row']!r} of heads {row['heads']!r} is none of slice {found.name}'s in "
                                f"{plan} ({listing}): the queue would not count it", path=str(rows),
                                line=reader.line_num, key=key)


def _shown(path: Path) -> str:
    """A path as a message shows it: relative to the working folder where it is under it."""
    import os

    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


def _seed(text: str) -> int:
    return int(str(text).removeprefix("seed"))


def _step(text: str, rows: Path, line: int) -> float | None:
    """A published row's ``step`` (None: not written); anything but a finite number is one line."""
    step = cell_number(text)
    if step is not None and not step >= 0:          # NaN too
        raise DataError(f"step {text.strip()!r} is not a number of training steps", path=str(rows), line=line,
                        key="step")
    return step


#: one published run of a model: (its sitting's folder name, status, step or None)
Run = tuple[str, str, "float | None"]


@dataclass(frozen=True)
class Runs:
    """A slice's published runs, read once: ``by_seed``: seed -> (row, heads) -> its runs
    by the model's newest recipe; ``order``: its sitting folders, oldest first (their runs
    come in that order); ``earlier_recipe``: the seeds with runs by an earlier recipe
    (:func:`headlab.studies.published.earlier_recipe`: not counted, their seed retrained);
    ``recipes``: (row, heads) -> the model's newest recipe."""
    by_seed: dict[int, dict[tuple[str, str], list[Run]]]
    order: list[str]
    earlier_recipe: frozenset[int] = frozenset()
    recipes: dict[tuple[str, str], str] | None = None


def _sitting_rows(found: Slice, published: Path | str) -> list[Path]:
    """The slice's ``rows.csv`` files (``results/published/<slice>/<sitting>/``), oldest first."""
    return sorted((Path(published) / found.name).glob("*/rows.csv"),
                  key=lambda rows: (sitting_time(rows.parent), rows.parent.name))


def _seed_runs(found: Slice, published: Path | str) -> Runs:
    """The slice's runs over its sitting folders (``results/published/<slice>/<sitting>/rows.csv``)."""
    files = _sitting_rows(found, published)
    read: list[tuple[int, tuple[str, str], str, Run]] = []
    for rows in files:
        with open(rows, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            for row in reader:
                if not row.get("seed"):
                    continue
                read.append((_seed(row["seed"]), (row["row"], row["heads"]), row.get("recipe") or "",
                             (rows.parent.name, row["status"], _step(row.get("step"), rows, reader.line_num))))
    # oldest first, so the last recipe recorded is the newest; a run that records none is
    # never told apart from the others
    newest = {key: made_by for _, key, made_by, _ in read if made_by}

    def current(key: tuple[str, str], made_by: str) -> bool:
        return not made_by or made_by == newest.get(key, made_by)

    runs: dict[int, dict[tuple[str, str], list[Run]]] = {}
    for seed, key, made_by, run in read:
        if current(key, made_by):
            runs.setdefault(seed, {}).setdefault(key, []).append(run)
    earlier = frozenset(seed for seed, key, made_by, _ in read if not current(key, made_by))
    return Runs(runs, [rows.parent.name for rows in files], earlier, newest)


@dataclass(frozen=True)
class Recipe:
    """A model's newest published recipe: the sitting folder of its newest run, the digest
    (``rows.csv``'s ``recipe``) and the recipe itself as that sitting's provenance holds it
    (empty where it holds none)."""
    sitting: str
    digest: str
    recipe: dict


def newest_recipes(found: Slice, published: Path | str = PUBLISHED) -> dict[tuple[str, str], Recipe]:
    """(row, heads) -> its model's newest published :class:`Recipe`, for the slice's models
    that have a run recording one."""
    import json

    newest: dict[tuple[str, str], tuple[Path, dict]] = {}
    for rows in _sitting_rows(found, published):
        with open(rows, newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                if row.get("recipe"):       # (a run that records none tells nothing of it)
                    newest[(row["row"], row["heads"])] = rows.parent, row
    found_recipes = {}
    for key, (folder, row) in newest.items():
        try:
            models = json.loads((folder / "provenance.json").read_text(encoding="utf-8")).get("models") or {}
        except (OSError, ValueError):
            models = {}
        held = (models.get(row.get("model") or row["heads"]) or {}).get("recipe") or {}
        found_recipes[key] = Recipe(folder.name, row["recipe"], held)
    return found_recipes


def published_seeds(found: Slice, published: Path | str = PUBLISHED, runs: Runs | None = None) -> dict[int, str]:
    """seed -> its best status over the slice's sitting folders (``converged`` only when
    every model of the slice has a converged row of that seed); ``runs``: already read."""
    result = {}
    for seed, per_model in (runs or _seed_runs(found, published)).by_seed.items():
        converged = all(any(status == "converged" for _, status, _ in per_model.get(key, [])) for key in found.rows)
        result[seed] = "converged" if converged else "published"
    return result


@dataclass(frozen=True)
class Trained:
    """How far a seed's models not yet converged trained (the slice's own models: a
    chain's fine-tunes are short by design)."""
    steps: int                  # the least trained of them, each at its furthest run
    steps_before: int | None    # the same without its latest sitting (None: one sitting)


def trained_steps(found: Slice, published: Path | str = PUBLISHED, runs: Runs | None = None) -> dict[int, Trained]:
    """seed -> how far its models not yet converged trained, in converged or deadline runs;
    a seed left out has nothing to measure: every model converged, or one without such a
    run with its step. ``runs``: already read."""
    from headlab.naming import heads_name

    keys = {(model["row"], heads_name(model["heads"])) for model in found.entry["models"]}
    runs = runs or _seed_runs(found, published)
    result = {}
    for seed, per_model in runs.by_seed.items():
        open_keys = [key for key in keys if not any(status == "converged" for _, status, _ in per_model.get(key, []))]
        trained_in = {sitting for key in open_keys for sitting, status, step in per_model.get(key, [])
                      if status in TRAINED and step is not None}
        measured = [sitting for sitting in runs.order if sitting in trained_in]

        def reached(sittings: list[str], keys_open=open_keys, model_runs=per_model) -> int | None:
            furthest = [max((step for sitting, status, step in model_runs.get(key, [])
                             if status in TRAINED and step is not None and sitting in sittings), default=None)
                        for key in keys_open]
            return None if not furthest or None in furthest else int(min(furthest))

        now = reached(measured)
        if now is not None:
            result[seed] = Trained(now, reached(measured[:-1]) if len(measured) > 1 else None)
    return result


@dataclass(frozen=True)
class SeedStates:
    """A slice's seeds by what a sitting can still add to them."""
    converged: list[int]
    never_run: list[int]
    #: published, not converged, trained under UNDERTRAINED_SHARE of a sitting's steps now
    undertrained: list[int]
    #: published short of convergence, a rerun would train them further: least trained first
    short: list[int]
    #: published short of convergence, and a rerun would add nothing: trained to within
    #: RERUN_MIN_GAIN of a sitting's steps now, or its last sitting gained less than that over
    #: the ones before it, or MAX_SITTINGS_A_SEED sittings ran it (faster code, which raises the
    #: plan's throughput and so a sitting's steps, reopens the first kind)
    at_limit: list[int]
    #: published by an earlier recipe than the slice's newest only (:class:`Runs`: those runs
    #: are shown apart in the tables and not counted): trained anew after the seeds never run,
    #: as the undertrained are
    earlier_recipe: list[int] = field(default_factory=list)

    @property
    def first_pass(self) -> list[int]:
        return self.never_run + self.earlier_recipe + self.undertrained

    @property
    def pending(self) -> list[int]:
        return self.first_pass + self.short


def seed_states(found: Slice, published: Path | str = PUBLISHED) -> SeedStates:
    """The slice's seeds by state, from its published ``rows.csv`` files. A seed whose
    training was not measured (:func:`trained_steps` leaves it out) is short of convergence,
    never undertrained, and at its limit only after :data:`MAX_SITTINGS_A_SEED` sittings."""
    runs = _seed_runs(found, published)
    done, earlier = published_seeds(found, runs=runs), runs.earlier_recipe
    trained = trained_steps(found, runs=runs)
    window = found.steps_in_window
    published_short = [seed for seed in found.entry["seeds"] if done.get(seed) == "published"]
    sittings = {seed: len({sitting for model_runs in per_model.values() for sitting, _, _ in model_runs})
                for seed, per_model in runs.by_seed.items()}

    def at_limit(seed: int) -> bool:
        if sittings.get(seed, 0) >= MAX_SITTINGS_A_SEED:
            return True
        if seed not in trained:
            return False
        steps, before = trained[seed].steps, trained[seed].steps_before
        return steps * RERUN_MIN_GAIN > window or (before is not None and steps < before * RERUN_MIN_GAIN)

    limit = [seed for seed in published_short if at_limit(seed)]
    undertrained = [seed for seed in published_short if seed not in limit and seed in trained
                    and trained[seed].steps < UNDERTRAINED_SHARE * window]
    short = sorted((seed for seed in published_short if seed not in undertrained + limit),
                   key=lambda seed: (trained[seed].steps if seed in trained else 0, seed))
    return SeedStates(converged=[seed for seed in found.entry["seeds"] if done.get(seed) == "converged"],
                      never_run=[seed for seed in found.entry["seeds"] if seed not in done and seed not in earlier],
                      undertrained=undertrained, short=short, at_limit=limit,
                      earlier_recipe=[seed for seed in found.entry["seeds"] if seed not in done and seed in earlier])



def stale_throughput(plan: Plan, published: Path | str = PUBLISHED, measured: dict[int, Measured] | None = None,
                     evaluation: EvaluationMeasured | None = None, tables: list[SpeedTable] | None = None) -> list[str]:
    """One line for each figure of the plan's ``throughput`` further than
    :data:`SPEED_TOLERANCE` from the newest published sitting's measure: seconds a step at
    each number of models side by side measured, and the start-up of the newest sitting of
    all; each slice's evaluation reserve short of the newest sitting's rate; and
    ``sitting.compile`` or a slice's ``compile`` where the newest compiled probe says otherwise
    (:func:`headlab.workflow.gpu_compile.stale_compile`).
    Empty: the plan agrees with what the sittings measured (or none measured its clock).
    The newest sitting is the best guess of the next one, whatever its GPU: each line names
    a GPU other than the plan's. ``measured``, ``evaluation``, ``tables``: already read
    (:func:`measured_speed`, :func:`measured_evaluation`, :func:`speed_tables`)."""
    tables = speed_tables(published) if tables is None else tables
    measured = measured_speed(published, tables) if measured is None else measured
    table, lines = plan.throughput["seconds_per_step"], []

    def far(written: float | None, measure: float) -> bool:
        return written is None or abs(written - measure) > SPEED_TOLERANCE * measure

    def where(measure: Measured) -> str:
        other = measure.gpu != plan.throughput["gpu"]
        return f"the sitting {measure.sitting}" + (f" (on {measure.gpu}; the plan's gpu: {plan.throughput['gpu']})"
                                                   if other else "")

    for count, measure in sorted(measured.items()):
        written = table.get(str(count))
        if far(written, measure.step_s):
            lines.append(f"throughput.seconds_per_step.{count}: the plan says {written if written is not None else 'nothing'}"
                         f", {where(measure)} measured {measure.described()}")
    latest = max(measured.values(), key=lambda measure: (measure.published, measure.sitting), default=None)
    if latest is not None and latest.startup_s is not None and far(plan.throughput["startup_s"], latest.startup_s):
        lines.append(f"throughput.startup_s: the plan says {plan.throughput['startup_s']:g} s, {where(latest)} "
                     f"measured {latest.startup_s:.0f} s to its first batch")
    evaluation = measured_evaluation(published) if evaluation is None else evaluation
    for found in plan.slices if evaluation is not None else []:
        # a reserve is a bound, not a measure: stale only when short (a cut evaluation costs a
        # second call); a generous one is the queue's evaluation line, a lever to pull by hand
        key = f"slices.{found.name}.eval_reserve_s" if "eval_reserve_s" in found.entry else "sitting.eval_reserve_s"
        need = evaluation.reserve_for(found.evaluations)
        if evaluation.cut and evaluation.sitting.split("/")[0] == found.name:
            lines.append(f"{key}: {found.name} keeps {found.eval_reserve_s:g} s, which "
                         f"{evaluation.described()} ran out of")
        elif found.entry["ready"] and need > found.eval_reserve_s:
            lines.append(f"{key}: {found.name} keeps {found.eval_reserve_s:g} s to score its {found.evaluations} rows, "
                         f"~{need:.0f} s with the margins kept back from its translations, at the rate of "
                         f"{evaluation.described()}")
    from headlab.workflow.gpu_compile import stale_compile, stale_compiled_figures

    measure = measured_compile(published, tables)
    return lines + stale_compile(plan, measure) + stale_compiled_figures(plan, measure)




def pending_seeds(found: Slice, published: Path | str = PUBLISHED) -> list[int]:
    """The seeds a sitting of the slice can still add to: never published, undertrained,
    then published short of convergence, least trained first."""
    return seed_states(found, published).pending


@dataclass(frozen=True)
class Choice:
    slice: Slice
    seeds: list[int]
    skipped: list[str]


def _limit_text(found: Slice, seeds: list[int]) -> str:
    return (f"seeds {seeds} at their limit (a sitting reaches ~{found.steps_in_window:,} of the ~"
            f"{found.entry['expected_steps']:,} steps to converge): a rerun would add under "
            f"{RERUN_MIN_GAIN - 1:.0%} more training, or {MAX_SITTINGS_A_SEED} sittings ran them")


def choose(plan: Plan, published: Path | str = PUBLISHED, name: str | None = None) -> Choice:
    """What the next sitting trains: ``name``'s slice, or the first ready one not done that
    fits one sitting; its next ``seeds_per_sitting`` pending seeds. ``skipped`` says why each
    earlier slice was passed over."""
    if name is not None:
        found = plan.slice(name)
        states = seed_states(found, published)
        if not states.pending:
            limit = f"; {_limit_text(found, states.at_limit)}" if states.at_limit else ""
            raise ConfigError(f"slice {name} is done: seeds {states.converged} published as converged{limit} "
                              f"(add seeds to it in the plan for more)", path=str(plan.path), key="seeds")
        if not found.entry["ready"]:
            raise ConfigError(f"slice {name} is not ready for a sitting: {found.entry.get('pending', '')}".strip(),
                              path=str(plan.path), key="ready")
        if not found.fits:      # the sitting would refuse it on the GPU machine, after the bundle's minutes
            raise ConfigError(f"slice {name}: {found.eager_steps_in_window} steps in a sitting at the plan's eager throughput, "
                              f"under its min_steps {found.entry['min_steps']}: lower min_steps or the models side "
                              f"by side", path=str(plan.path), key="min_steps")
        return Choice(found, states.pending[:found.entry["seeds_per_sitting"]], [])
    # Two passes: seeds never published or undertrained, slice by slice in the plan's order,
    # then the reruns of seeds published short of convergence. Such a rerun only turns a
    # labelled deadline row into a converged one, and a slice whose models cannot converge in
    # one sitting would otherwise hold the queue for ever; a new seed or a paper's first row
    # adds more. An undertrained seed's rerun is a model of the slice's regime at last. No
    # seed is rerun at its limit: the same seed and code would give the same models.
    skipped, runnable = [], []
    for found in plan.slices:
        states = seed_states(found, published)
        if not states.pending:
            skipped.append(f"{found.name}: done" + (f" ({_limit_text(found, states.at_limit)})"
                                                    if states.at_limit else ""))
        elif not found.entry["ready"]:
            skipped.append(f"{found.name}: not ready ({found.entry.get('pending', 'see the plan')})")
        elif not found.fits:
            skipped.append(f"{found.name}: {found.eager_steps_in_window} steps in a sitting (eager), under its "
                           f"min_steps {found.entry['min_steps']}")
        elif states.first_pass:
            return Choice(found, states.pending[:found.entry["seeds_per_sitting"]], skipped)
        else:
            runnable.append((found, states.short))
            skipped.append(f"{found.name}: seeds {states.short} published short of convergence, rerun after every "
                           f"slice's new seeds")
    if runnable:
        found, again = runnable[0]
        return Choice(found, again[:found.entry["seeds_per_sitting"]],
                      [line for line in skipped if not line.startswith(f"{found.name}: seeds")])
    raise ConfigError("every slice of the plan is done or cannot run in one sitting: " + "; ".join(skipped),
                      path=str(plan.path), key="slices")


def sittings_to_go(found: Slice, published: Path | str = PUBLISHED,
                   states: SeedStates | None = None) -> tuple[int, int]:
    """(sittings of the first pass: never-published and undertrained seeds, reruns of seeds
    short of convergence after it) the slice needs; a first-pass sitting with a seat to spare
    takes a rerun too (:func:`choose` fills it). ``states``: already read."""
    per_sitting = found.entry["seeds_per_sitting"]
    states = states or seed_states(found, published)
    first = math.ceil(len(states.first_pass) / per_sitting)
    return first, math.ceil(len(states.pending) / per_sitting) - first


def queue_line(found: Slice, published: Path | str = PUBLISHED) -> str:
    """One slice's line of the queue: its cost, its seeds by state, the sittings still to go."""
    states = seed_states(found, published)
    sittings = [f"{count} {what}" for count, what in zip(sittings_to_go(found, published, states),
                                                         ("first-pass", "rerun")) if count]
    described = [f"{what} {seeds}" for seeds, what in (
        (states.converged, "converged"), (states.at_limit, "at their limit"),
        (states.short, "short of convergence"),
        (states.undertrained, f"undertrained (under {UNDERTRAINED_SHARE * found.steps_in_window:.0f} steps)"),
        (states.never_run, "never run"),
        (states.earlier_recipe, "published by an earlier recipe only (shown apart, trained anew)")) if seeds]
    return (f"{found.name:14} cost {found.entry['cost_gpu_s']:>5g} GPU-s, {found.steps_in_window:>5} steps a sitting"
            f" ({found.side_by_side} side by side): seeds " + "; ".join(described)
            + f"; sittings to go: {' + '.join(sittings) or 'none'}" + ("" if found.entry["ready"] else "  [not ready]"))


@dataclass(frozen=True)
class Forecast:
    choice: Choice
    status: str
    steps: int


def forecast(plan: Plan, published: Path | str = PUBLISHED, count: int = 3) -> list[Forecast]:
    """The next ``count`` sittings if each ends as the plan expects: its seeds' models trained
    to the slice's steps in a sitting, ``converged`` where its expected steps fit in them,
    else ``deadline``. Simulated on a copy of the published ``rows.csv`` files, through
    :func:`choose` itself (fewer when the plan is done first)."""
    import shutil
    import tempfile

    from headlab.naming import heads_name

    found_ahead: list[Forecast] = []
    with tempfile.TemporaryDirectory(prefix="headlab-forecast.") as scratch:
        for rows in Path(published).glob("*/*/rows.csv"):
            target = Path(scratch) / rows.relative_to(published)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(rows, target)
            # its time, which orders a seed's sittings
            if (rows.parent / "provenance.json").is_file():
                shutil.copyfile(rows.parent / "provenance.json", target.parent / "provenance.json")
        for number in range(count):
            try:
                choice = choose(plan, scratch)
            except ConfigError:
                break
            found = choice.slice
            steps = min(found.entry["expected_steps"], found.steps_in_window)
            status = "converged" if found.entry["expected_steps"] <= found.steps_in_window else "deadline"
            found_ahead.append(Forecast(choice, status, steps))
            # a chain's fine-tunes train their planned steps; an initial checkpoint none
            chain_steps = {(link["row"], heads_name(link["parent"])): link["options"]["train_steps"]
                           for link in found.chain}
            chain_steps.update({(link["initial_row"], heads_name(link["parent"])): ""
                                for link in found.chain if link.get("initial_row")})
            # trained by the models' newest recipe (a recipe the plan changes shows in the
            # first sitting by it, which the queue reads from then on)
            recipes = _seed_runs(found, scratch).recipes
            folder = Path(scratch) / found.name / f"forecast-{number:04d}"
            folder.mkdir(parents=True)
            with open(folder / "rows.csv", "w", newline="", encoding="utf-8") as handle:
                writer = csv.DictWriter(handle, ROW_COLUMNS)
                writer.writeheader()
                for seed in choice.seeds:
                    for row, heads in sorted(found.rows):
                        writer.writerow({"slice": found.name, "row": row, "heads": heads, "seed": seed,
                                         "status": status, "step": chain_steps.get((row, heads), steps),
                                         "recipe": recipes.get((row, heads), "")})
    return found_ahead


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m headlab.workflow.gpu_plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", default=str(PLAN), help="the GPU plan (a YAML queue of slices)")
    parser.add_argument("--published", default=str(PUBLISHED),
                        help="the published sittings the queue's state is read from")
    parser.add_argument("--ahead", type=int, default=3,
                        help="sittings forecast, each ending as the plan expects (default: 3)")
    args = parser.parse_args(argv)
    try:
        return _queue(args)
    except HeadlabError as err:
        print(f"{parser.prog}: {err}", file=sys.stderr)
        return 1


def _evaluation_line(plan: Plan, evaluation: EvaluationMeasured | None) -> str:
    if evaluation is None:
        return ("evaluation: no published sitting has its runner's status (status-sitting.json) yet; the slices "
                "keep their reserves as written")
    return (f"evaluation: at the rate of {evaluation.described()}, each ready slice's rows against its reserve: "
            + ", ".join(f"{found.name} ~{evaluation.reserve_for(found.evaluations):.0f} of {found.eval_reserve_s:g} s"
                        for found in plan.slices if found.entry["ready"])
            + " (each with the margins the runner and the scoring keep back from the translations)")


def _throughput_line(plan: Plan, published: Path | str, evaluation: EvaluationMeasured | None,
                     tables: list[SpeedTable]) -> str:
    measured = measured_speed(published, tables)
    stale = stale_throughput(plan, published, measured, evaluation, tables)
    if stale:
        return (f"throughput stale: write the measures into {plan.path.name} (and each slice's cost_gpu_s): "
                + "; ".join(stale))
    if not measured:
        return ("throughput: no published sitting has its training's own clock (throughput.csv step_ms) yet; "
                "the plan's figures stand as written")
    return (f"throughput: the plan agrees with the newest sittings' clocks (within {SPEED_TOLERANCE:.0%}): " + "; ".join(
        ("1 alone" if count == 1 else f"{count} side by side") + (" (a probe)" if measure.probe else "")
        + f" {measure.step_s:.3f} s a step ({measure.sitting})" for count, measure in sorted(measured.items())))


def more_seeds_line(plan: Plan) -> str:
    """What one seed more a sitting would reach, per ready slice, at the plan's seconds a
    step (past its largest count: scaled linearly, as the costs are; the probe side by side
    measures them, :attr:`Plan.probe_side_by_side`): the lever that takes a slice's seeds in
    fewer sittings, for a person to pull (``seeds_per_sitting``)."""
    written_up_to = max(int(count) for count in plan.throughput["seconds_per_step"])
    parts = []
    for found in plan.slices:
        more = found.one_seed_more
        if not found.entry["ready"] or more is None:
            continue
        seeds, expected, steps = more.entry["seeds_per_sitting"], found.entry["expected_steps"], more.steps_in_window
        verdict = (f"to convergence (~{expected:,})" if steps >= expected else
                   f"short of convergence (~{expected:,}): deadline rows" if more.fits else
                   f"under its min_steps {found.entry['min_steps']:,}")
        scaled = (f", scaled from the plan's {written_up_to} side by side"
                  if more.side_by_side > written_up_to else "")
        parts.append(f"{found.name} {seeds} seeds ({more.side_by_side} side by side{scaled}) ~{steps:,} steps a "
                     f"sitting, {verdict}")
    return "one seed more a sitting: " + ("; ".join(parts) if parts else "no ready slice has seeds left to add")


def _queue(args) -> int:
    plan = load(args.plan)
    for found in plan.slices:
        print(queue_line(found, args.published))
    evaluation = measured_evaluation(args.published)
    tables = speed_tables(args.published)
    print(_throughput_line(plan, args.published, evaluation, tables))
    print(side_track_line(args.published, tables))
    from headlab.workflow.gpu_compile import compile_line

    print(compile_line(plan, measured_compile(args.published, tables)))
    print(_evaluation_line(plan, evaluation))
    print(more_seeds_line(plan))
    to_go = [sittings_to_go(found, args.published) for found in plan.slices]
    new, reruns = sum(new for new, _ in to_go), sum(reruns for _, reruns in to_go)
    print(f"the plan in all: {new} sitting(s) of new and undertrained seeds, then {reruns} rerun(s) of seeds short "
          f"of convergence")
    try:
        choice = choose(plan, args.published)
        print(f"next: {choice.slice.name}, seeds {choice.seeds}")
    except ConfigError as err:
        print(f"next: none ({err})")
        return 0
    ahead = forecast(plan, args.published, args.ahead)
    print(f"the next {len(ahead)} sitting(s), if each ends as the plan expects: " + "; ".join(
        f"{item.choice.slice.name} seeds {item.choice.seeds} ({item.status} at ~{item.steps:,} steps)"
        for item in ahead))
    return 0


if __name__ == "__main__":
    sys.exit(main())
