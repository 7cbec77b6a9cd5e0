"""``headlab receive-sitting``: what a GPU sitting returned, into ``results/published/``.

    headlab receive-sitting OUT/headlab-sitting.tar.gz [--published results/published] [--replace]

A sitting returns ``status.json`` and ``headlab-sitting.tar.gz``. Of the tarball only its
publication is committed, ``results/published/<slice>/<sitting>/``; its logs, training logs
and the CUDA suite's report stay with the returned files (unpacking the whole tarball at the
checkout's root would scatter them there). Before anything is written the publication is
read as the tables and the GPU plan will read it, and refused in one line naming the
tarball and the member:

- a tarball that tarfile can read whole (one cut short in its copy, damaged, empty or no
  tarball at all is one line saying which: :func:`headlab.io.archive_problem`);

- one publication in the tarball (``status.json`` beside it names which, where there); a
  sitting folder packed from elsewhere, not under ``results/published/<slice>/<sitting>/``,
  is named as such;
- ``rows.csv`` with the publication contract's columns, statuses, scores and steps, each
  row's ``slice`` and ``sitting`` its folder's, and BLEU in each row of a seed
  (:func:`headlab.studies.published.read`, :func:`headlab.workflow.gpu_plan.seed_states`);
  each row one its slice's plan publishes: the slice's study, table, pair and layers, and
  a (row, heads) of its models (:func:`headlab.workflow.gpu_plan.check_rows_in_plan`);
- ``provenance.json`` naming the folder's slice and a status;
- ``throughput.csv``, if there, as the plan's throughput check reads it;
- ``status.json`` beside the tarball, if it is this publication's, kept in the folder as
  ``status-sitting.json`` and read as the plan's evaluation check reads it;
- regular files and folders inside the publication only: no link of any kind, no ``..``
  (and tarfile's ``data`` filter besides).

It is unpacked into a scratch folder of the published tree and renamed into its place,
so an interrupted receive never leaves a half sitting folder (a killed one may leave a
hidden ``.receive.*`` folder, which no reader of the tree looks into). A sitting folder already there is kept, unless ``--replace``: a later call's
tarball of the same sitting, which completes what the deadline cut (BLEU of more test
sentences, an atlas); one with BLEU for fewer rows than the folder has is refused, as the
runner itself never publishes less. Then the learning-curves figure where the sitting could
not make one, ``results/published/throughput.csv`` rebuilt, the slice's figure of all its
sittings (``<slice>/learning_curves.png``), and the slice's line of the queue, the
throughput check and what to commit.
"""
from __future__ import annotations

import argparse
import csv
import json
import shutil
import tarfile
import tempfile
from pathlib import Path

from headlab.errors import DataError, HeadlabError
from headlab.io import ARCHIVE_ERRORS, archive_problem, read_to_the_end
from headlab.workflow import gpu_compile, gpu_measures, gpu_plan

#: a publication's place in the tarball (and in the checkout): results/published/<slice>/<sitting>/
PREFIX = ("results", "published")


def _normal(name: str) -> str:
    """A member's name as a relative path without ``./`` (``tar -C dir .`` writes those)."""
    return "/".join(part for part in Path(name).parts if part != ".")


def publications(names: list[str]) -> list[str]:
    """The ``results/published/<slice>/<sitting>`` folders that members of a tarball are in."""
    found = []
    for name in names:
        parts = Path(_normal(name)).parts
        if len(parts) > 4 and parts[:2] == PREFIX:
            folder = "/".join(parts[:4])
            if folder not in found:
                found.append(folder)
    return found


def _status(tarball: Path) -> tuple[dict, str]:
    """The runner's ``status.json`` beside the tarball, read once: (its JSON, its text);
    ``({}, "")`` where there is none or it is unreadable (the tarball alone is the publication)."""
    try:
        text = tarball.with_name("status.json").read_text(encoding="utf-8")
        status = json.loads(text)
    except (OSError, ValueError):
        return {}, ""
    return (status, text) if isinstance(status, dict) else ({}, "")


def _which(tarball: Path, names: list[str], status: dict) -> str:
    """The tarball's publication: the one there, or the one its ``status.json`` names."""
    found = publications(names)
    named = status.get("publication")
    if named and named in found:
        return named
    if named:
        raise DataError(f"its status.json names the publication {named}, which it does not hold (it holds: "
                        f"{', '.join(found) or 'none'})", path=str(tarball))
    if len(found) == 1:
        return found[0]
    if not found:
        # a sitting folder packed from elsewhere (tar -C its slice's folder): say where it is
        elsewhere = list(dict.fromkeys(str(Path(_normal(name)).parent) for name in names
                                       if Path(_normal(name)).name in ("rows.csv", "provenance.json")))
        if elsewhere:
            raise DataError(f"it holds a sitting folder at {', '.join(elsewhere)}, not under "
                            f"results/published/<slice>/<sitting>/: pack it from the checkout's root",
                            path=str(tarball))
        raise DataError("no publication in it (results/published/<slice>/<sitting>/): the sitting published "
                        "nothing; its status.json says why", path=str(tarball))
    raise DataError(f"{len(found)} publications in it ({', '.join(found)}) and no status.json beside it naming "
                    f"one", path=str(tarball))


def _keep_status(folder: Path, member: str, status: dict, text: str) -> None:
    """The runner's ``status.json`` beside the tarball, of this publication, kept in it as
    ``status-sitting.json`` (as every sitting folder before this command): the call's phases
    and their clock (the plan's evaluation check reads the ``evaluate`` phase), budget,
    installation and errors. A later call's status holds every call of the sitting."""
    if text and status.get("publication") in (None, member):
        (folder / "status-sitting.json").write_text(text, encoding="utf-8")


def _bleu_rows(rows: Path) -> int:
    with open(rows, newline="", encoding="utf-8") as handle:
        return sum(1 for row in csv.DictReader(handle) if (row.get("bleu") or "").strip())


def _check(folder: Path, published_root: Path, tarball: Path, member: str, plan: gpu_plan.Plan) -> dict:
    """The unpacked publication read as the tables and the plan read it; its provenance."""
    from headlab.studies import published

    slice_name = folder.parent.name
    for name in ("rows.csv", "provenance.json"):
        if not (folder / name).is_file():
            raise DataError(f"{member}/{name} is missing: not a publication", path=str(tarball))
    try:
        provenance = json.loads((folder / "provenance.json").read_text(encoding="utf-8"))
    except ValueError as err:
        raise DataError(f"{member}/provenance.json is not JSON: {err}", path=str(tarball)) from None
    if not isinstance(provenance, dict) or provenance.get("slice") != slice_name \
            or provenance.get("status") not in published.STATUSES:
        found = provenance if isinstance(provenance, dict) else {}
        raise DataError(f"{member}/provenance.json: slice {found.get('slice')!r} and status {found.get('status')!r}, "
                        f"where the folder's slice is {slice_name!r} and a status one of "
                        f"{', '.join(published.STATUSES)}", path=str(tarball))
    try:
        published.read(str(published_root))
        if slice_name in {found.name for found in plan.slices}:
            gpu_plan.check_rows_in_plan(plan.slice(slice_name), folder / "rows.csv")
            gpu_plan.seed_states(plan.slice(slice_name), published_root)
        gpu_measures.measured_speed(published_root)
        gpu_measures.measured_evaluation(published_root)
    except HeadlabError as err:
        # the message names the unpacked copy: name the member of the tarball instead
        raise DataError(str(err).replace(f"{published_root}/", "results/published/"), path=str(tarball)) from None
    return provenance


def _unpack(tarball: Path, published: Path, scratch_in, status: dict) -> tuple[str, Path, Path]:
    """(the publication's member, its place under ``published``, the scratch folder in
    ``published`` it is unpacked into: one file system, so that a rename puts it in place)."""
    try:
        with tarfile.open(tarball) as tar:
            members = tar.getmembers()
            member = _which(tarball, [item.name for item in members], status)
            target = published / Path(member).relative_to(*PREFIX)
            chosen = [item for item in members
                      if _normal(item.name) == member or _normal(item.name).startswith(f"{member}/")]
            odd = [item.name for item in chosen if not (item.isreg() or item.isdir())
                   or item.name.startswith("/") or ".." in Path(item.name).parts]
            if odd:
                raise DataError(f"{member}: {odd[0]} is no plain file or folder inside it (a link, a device, "
                                f"a path out of it)", path=str(tarball))
            published.mkdir(parents=True, exist_ok=True)
            scratch = scratch_in(published)
            try:
                tar.extractall(scratch, filter="data", members=chosen)
            except tarfile.FilterError as err:
                raise DataError(f"{member}: a member that is no plain file or folder inside it ({err})",
                                path=str(tarball)) from None
            read_to_the_end(tar)        # gzip's CRC: what it unpacked is what the sitting packed
    except ARCHIVE_ERRORS as err:
        raise DataError(f"not a sitting's tarball: {archive_problem(err)}", path=str(tarball)) from None
    except OSError as err:
        raise DataError(f"not a sitting's tarball ({err.strerror or err})", path=str(tarball)) from None
    return member, target, scratch


def receive(tarball: Path | str, published: Path | str = gpu_plan.PUBLISHED, replace: bool = False,
            plan_path: Path | str = gpu_plan.PLAN) -> Path:
    """The tarball's publication checked and moved into ``published``; its folder there."""
    from headlab.workflow import sitting_speed

    tarball, published = Path(tarball), Path(published)
    plan = gpu_plan.load(plan_path)
    scratches: list[Path] = []

    def scratch_in(parent: Path) -> Path:
        scratches.append(Path(tempfile.mkdtemp(prefix=".receive.", dir=parent)))
        return scratches[-1]

    try:
        status, status_text = _status(tarball)
        member, target, scratch = _unpack(tarball, published, scratch_in, status)
        _keep_status(scratch / member, member, status, status_text)
        provenance = _check(scratch / member, scratch / Path(*PREFIX), tarball, member, plan)
        # the figure the sitting could not make (no matplotlib there), before the move
        if not (scratch / member / "learning_curves.png").is_file():
            sitting_speed.figure_or_say(scratch / member, f"{target.parent.name}, sitting {target.name}",
                                        "headlab receive-sitting")
        if target.exists():
            if not replace:
                raise HeadlabError(f"{target} exists; a later call's tarball of the same sitting replaces it with "
                                   f"--replace", path=str(tarball))
            before, after = _bleu_rows(target / "rows.csv"), _bleu_rows(scratch / member / "rows.csv")
            if after < before:
                raise HeadlabError(f"{member} has BLEU for {after} row(s), {target} for {before}: it would "
                                   f"publish less", path=str(tarball))
            # the old folder out of the way first, so that the new one is never half in place,
            # and back if the new one cannot take its place
            replaced = scratch / "replaced"
            target.rename(replaced)
            try:
                (scratch / member).rename(target)
            except OSError:
                replaced.rename(target)
                raise
        else:
            target.parent.mkdir(exist_ok=True)
            (scratch / member).rename(target)
    finally:
        for scratch in scratches:
            shutil.rmtree(scratch, ignore_errors=True)
    sitting_speed.collect(published)
    # the slice's figure of every sitting, this one with them (a figure never costs a receive)
    try:
        sitting_speed.slice_figure(target.parent)
    except Exception as err:
        print(f"headlab receive-sitting: no figure of {target.parent}'s sittings: {err}")
    print(f"headlab receive-sitting: {target}: {provenance['status']}"
          + (f", lacks: {'; '.join(provenance['lacks'])}" if provenance.get("lacks") else ""))
    if target.parent.name in {found.name for found in plan.slices}:
        print(f"  queue: {gpu_plan.queue_line(plan.slice(target.parent.name), published)}")
    tables = gpu_measures.speed_tables(published)       # read once for both lines below
    for line in gpu_plan.stale_throughput(plan, published, tables=tables):
        print(f"  throughput stale: {line}")
    # what the probe's compiled model says of the next sitting, stale or not
    print(f"  {gpu_compile.compile_line(plan, gpu_measures.measured_compile(published, tables))}")
    print(f"  commit: git add {target} {target.parent / 'learning_curves.png'} {published / 'throughput.csv'}")
    return target


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="headlab receive-sitting", description=__doc__.split("\n\n")[0])
    parser.add_argument("tarball", help="the sitting's headlab-sitting.tar.gz (its status.json beside it, if there)")
    parser.add_argument("--published", default=str(gpu_plan.PUBLISHED), help="the published tree it joins")
    parser.add_argument("--replace", action="store_true",
                        help="replace the sitting's folder already there (a later call's tarball of it)")
    args = parser.parse_args(argv)
    receive(args.tarball, args.published, args.replace)
    return 0
