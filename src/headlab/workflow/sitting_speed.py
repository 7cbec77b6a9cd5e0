"""What a GPU sitting measures of its own speed, and the learning-curves figure of a slice.

- :func:`speed_rows`: one row per model of the sitting (``throughput.csv`` in its folder):
  tokens/s side by side (its training log) and alone (the remainder's short probe, when it
  ran, with its wall time a step), its wall time a step in the probe of more models side
  by side than the sitting trained (:func:`crowd_summary`), the share of the GPU's matrix
  rate, power and memory from ``nvidia-smi`` samples, its clock's steps split by what ran
  beside them;
- :func:`collect`: ``results/published/throughput.csv``, every sitting folder's rows
  together (rebuilt from them, so no sitting's rows are ever edited);
- :func:`curves_figure`: train and validation cross-entropy against step, one colour per
  model (PNG; matplotlib on the CPU side where the GPU machine lacks it); :func:`slice_figure`:
  every sitting of a slice in one figure, each row's evaluated step marked.

The matrix-rate share is ``6 x parameters x tokens/s`` (forward and backward of every weight
once per target token: the usual dense-Transformer estimate; attention's own products are
left out) over the GPU's dense fp16/bf16 tensor peak of :data:`PEAK_TFLOPS`.
"""
from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

from headlab.workflow.gpu_runner import ATTENTION_PATHS, CROWD_FOLDER, gpu_short_name  # noqa: F401  (one definition, stdlib)

#: dense (no sparsity) fp16/bf16 tensor-core peak in TFLOPS, by the GPU's short name
#: (NVIDIA's data sheets: H100 SXM and H200 989.4; A100 312; L40S 362; V100 125)
PEAK_TFLOPS = {"h100": 989.4, "h200": 989.4, "a100": 312.0, "l40s": 362.0, "v100": 125.0}
SPEED_COLUMNS = ("gpu", "commit", "date", "slice", "sitting", "model", "params", "src_tok_s_side_by_side",
                 "tgt_tok_s_side_by_side", "models_side_by_side", "src_tok_s_alone", "tgt_tok_s_alone",
                 # the probe's wall ms a step alone, past its warm-up (no validation, no checkpoint)
                 "step_ms_alone",
                 # the same probe's model then compiled in place (headlab train -compile): its mode,
                 # its wall ms a step past the compiled warm-up, and what the compile cost: the
                 # warm-up's wall time less as many eager steps (no step time: stopped while
                 # compiling, and compile_s how long it had: a lower bound; or the compile
                 # failed, and compile_error says how: its first line)
                 "compile_mode", "step_ms_alone_compiled", "compile_s", "compile_error",
                 # the probe side by side (more models than the sitting trained at once): how many,
                 # this model's wall ms a step there (the mean of its copies), the share of the
                 # copies' timed steps that all ran at once, and whether MPS served them
                 "models_probed_side_by_side", "step_ms_probed_side_by_side", "probed_overlap", "probed_mps",
                 "matrix_share_side_by_side", "matrix_share_alone", "peak_tflops", "power_w_mean", "power_w_max",
                 "memory_mib_mean", "memory_mib_max", "mps",
                 # the trainings' -compile (run.py --compile; blank: a sitting before it was recorded)
                 "train_compile", "profile_top_kernels", "profile_cpu_ms",
                 "profile_cuda_ms",
                 # the training's own clock side by side (headlab.engine.steptime): ms a step, each
                 # part's share of the loop's wall time, process CPU s per wall s
                 "step_ms", "data_share", "steps_share", "validation_share", "checkpoints_share",
                 "loop_other_share", "cpu_per_wall",
                 # ms a step while the CUDA suite or the bench ran beside the trainings, and while
                 # neither did (the clock's marks against the runner's side track)
                 "step_ms_side_track", "step_ms_clear",
                 # its start-up, seconds from the command's start (its Python up): imports, loop begins, first batch in
                 "start_imports_s", "start_loop_s", "start_first_batch_s",
                 # the profile: where it ran (side by side / alone), its window, what the host did
                 "profile_where", "profile_steps", "profile_wall_ms", "profile_top_cpu_ops", "profile_launches",
                 "profile_launch_ms", "profile_syncs", "profile_sync_ms")


def smi_summary(path: Path) -> dict:
    """Mean and max of power (W) and memory used (MiB) of ``nvidia-smi --query-gpu=timestamp,
    power.draw,memory.used,utilization.gpu --format=csv,noheader,nounits`` samples."""
    power, memory = [], []
    for line in path.read_text(errors="replace").splitlines() if path.is_file() else []:
        fields = [field.strip() for field in line.split(",")]
        try:
            power.append(float(fields[1]))
            memory.append(float(fields[2]))
        except (IndexError, ValueError):
            continue            # a header, a unit, an "[N/A]"
    if not power:
        return {}
    return {"power_w_mean": round(statistics.fmean(power), 1), "power_w_max": max(power),
            "memory_mib_mean": round(statistics.fmean(memory)), "memory_mib_max": max(memory)}


def matrix_share(params: int | None, tokens_s: float | None, gpu: str) -> float | str:
    peak = PEAK_TFLOPS.get(gpu)
    if not (params and tokens_s and peak):
        return ""
    return round(6 * params * tokens_s / (peak * 1e12), 4)


def crowd_summary(folder: Path) -> dict:
    """The probe side by side (:mod:`headlab.workflow.sitting_probe`), from its copies' JSONs
    in ``folder``: ``side_by_side`` (the copies that timed their steps), ``overlap`` (the
    span all of them were timing at once, as a share of their mean timed span: near 1 when
    they ran together) and ``step_ms`` (model -> the mean wall ms a step of its copies);
    empty without a copy that timed its steps."""
    found = []
    for path in sorted(Path(folder).glob("*.json")) if Path(folder).is_dir() else []:
        try:
            copy = json.loads(path.read_text())
            start, end = copy["window"]
            found.append((copy["name"].rsplit(".", 1)[0], float(copy["step_ms"]), float(start), float(end)))
        except (ValueError, KeyError, TypeError):
            continue             # a copy stopped while writing: not timed
    if not found:
        return {}
    common = min(end for *_, end in found) - max(start for *_, start, _ in found)
    span = statistics.fmean(end - start for *_, start, end in found)
    steps: dict[str, list[float]] = {}
    for model, step_ms, _, _ in found:
        steps.setdefault(model, []).append(step_ms)
    return {"side_by_side": len(found), "overlap": round(max(common, 0.0) / span, 3) if span > 0 else 0.0,
            "step_ms": {model: round(statistics.fmean(values), 1) for model, values in steps.items()}}


def side_track_windows(state: dict) -> list[tuple[float, float]]:
    """(start, end) Unix times of what the runner ran beside the trainings (the CUDA suite,
    the bench of each attention path), from the call that trained (its ``started_at`` and
    ``*_started_s`` / ``*_ended_s``; one stopped with the trainings ends with them). Empty
    for a runner of before those times."""
    call = next((call for call in state.get("calls") or [] if "train" in (call.get("phases") or {})), None)
    if call is None or "started_at" not in call:
        return []
    train_end = call["phases"]["train"].get("end_s")
    windows = []
    for what in ["gpu_tests"] + [f"bench_{path}" for path in ATTENTION_PATHS]:
        start, end = call.get(f"{what}_started_s"), call.get(f"{what}_ended_s", train_end)
        if start is not None and end is not None:
            windows.append((call["started_at"] + start, call["started_at"] + end))
    return windows


def step_split(marks: list, windows: list[tuple[float, float]]) -> dict:
    """A training's ms a step while something ran beside it and while nothing did: each span
    between two of its clock's marks goes to the side track if its middle falls in one of
    ``windows`` (blank: no span of that kind)."""
    spans = {"step_ms_side_track": [0.0, 0], "step_ms_clear": [0.0, 0]}
    for (first, began), (last, ended) in zip(marks, marks[1:]):
        middle = (began + ended) / 2
        kind = "step_ms_side_track" if any(start <= middle <= end for start, end in windows) else "step_ms_clear"
        spans[kind][0] += ended - began
        spans[kind][1] += last - first
    return {kind: round(1000 * seconds / steps, 1) if steps else "" for kind, (seconds, steps) in spans.items()}


def speed_rows(models: list[dict], ident: dict, smi: dict, alone: dict, profile: dict,
               clocks: dict | None = None, alone_step_ms: dict | None = None,
               side_track: list[tuple[float, float]] | None = None, crowd: dict | None = None,
               compiled: dict | None = None) -> list[dict]:
    """``models``: dicts with name, params, src_tok_s, tgt_tok_s (and side_by_side: how many
    trained at once with it, a chain's stage; all of them otherwise; train_compile: its own
    ``-compile`` where it is not the sitting's, a chain's fine-tune's); ``alone``: name -> (src, tgt)
    tokens/s of the probe; ``profile``: name -> the probe's trace summary (alone);
    ``clocks``: name -> the training's clock JSON (side by side), whose profile wins;
    ``alone_step_ms``: name -> the probe's wall ms a step alone; ``side_track``: the
    :func:`side_track_windows` its clock's marks are split by; ``crowd``: the probe side by
    side (:func:`crowd_summary`, with ``mps``: how the GPU was shared in it); ``compiled``:
    name -> what the probe alone measured once it had compiled the model
    (:class:`headlab.workflow.sitting_probe.ThenCompiled`)."""
    from headlab.engine.steptime import step_shares

    peak = PEAK_TFLOPS.get(ident["gpu"], "")
    crowd = crowd or {}
    rows = []
    for model in models:
        probed = crowd.get("step_ms", {}).get(model["name"])
        probed_columns = {"models_probed_side_by_side": crowd["side_by_side"], "step_ms_probed_side_by_side": probed,
                          "probed_overlap": crowd["overlap"], "probed_mps": crowd.get("mps", "")} if probed else {}
        alone_src, alone_tgt = alone.get(model["name"], ("", ""))
        clock = (clocks or {}).get(model["name"]) or {}
        traced = ({**clock["profile"], "profile_where": "side by side"} if clock.get("profile") else
                  {**profile[model["name"]], "profile_where": "alone"} if profile.get(model["name"]) else
                  {"profile_where": f"side by side: failed ({clock['profile_error']})"} if clock.get("profile_error")
                  else {})
        rows.append({**{key: ident.get(key, "") for key in ("gpu", "commit", "date", "slice", "sitting", "mps",
                                                            "train_compile")},
                     **({"train_compile": model["train_compile"]} if "train_compile" in model else {}),
                     "model": model["name"], "params": model.get("params") or "",
                     "src_tok_s_side_by_side": model.get("src_tok_s") or "",
                     "tgt_tok_s_side_by_side": model.get("tgt_tok_s") or "",
                     "models_side_by_side": model.get("side_by_side") or len(models),
                     "src_tok_s_alone": alone_src, "tgt_tok_s_alone": alone_tgt,
                     "step_ms_alone": (alone_step_ms or {}).get(model["name"], ""),
                     **compiled_columns((compiled or {}).get(model["name"])),
                     "matrix_share_side_by_side": matrix_share(model.get("params"), model.get("tgt_tok_s"), ident["gpu"]),
                     "matrix_share_alone": matrix_share(model.get("params"), alone_tgt or None, ident["gpu"]),
                     "peak_tflops": peak, **smi, **step_shares(clock),
                     # (no side track known, no split: "clear" would be a guess)
                     **(step_split(clock["marks"], side_track) if clock.get("marks") and side_track else {}),
                     **probed_columns, **traced})
    return rows


def compiled_columns(compiled: dict | None) -> dict:
    """The compiled phase's columns (blank without it). A probe stopped while compiling has no
    step time, and its ``compile_s`` is how long it had compiled: a lower bound. One whose
    compile failed has neither, and ``compile_error``."""
    if not compiled:
        return {}
    if "error" in compiled:
        return {"compile_mode": compiled["mode"], "step_ms_alone_compiled": "", "compile_s": "",
                "compile_error": compiled["error"]}
    if "step_ms" not in compiled:
        return {"compile_mode": compiled["mode"], "step_ms_alone_compiled": "", "compile_s": compiled["cut_s"]}
    cost = compiled.get("compile_s")
    return {"compile_mode": compiled["mode"], "step_ms_alone_compiled": compiled["step_ms"],
            "compile_s": "" if cost is None else cost}


def write_rows(path: Path, rows: list[dict], columns=SPEED_COLUMNS) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)


def collect(published: Path) -> Path:
    """``published/throughput.csv``: the rows of every ``<slice>/<sitting>/throughput.csv``."""
    rows = []
    for path in sorted(Path(published).glob("*/*/throughput.csv")):
        with open(path, newline="", encoding="utf-8") as handle:
            rows += list(csv.DictReader(handle))
    target = Path(published) / "throughput.csv"
    write_rows(target, rows)
    return target


def curves_figure(folder: Path, title: str) -> Path | None:
    """``learning_curves.png`` of a sitting folder from its ``learning_curve.*.csv`` (None:
    no matplotlib here, or no curve)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    curves = sorted(Path(folder).glob("learning_curve.*.csv"))
    if not curves:
        return None
    figure, axes = plt.subplots(figsize=(7, 4.2))
    for index, path in enumerate(curves):
        name = path.name.removeprefix("learning_curve.").removesuffix(".csv")
        colour = f"C{index}"
        for split, style in (("train", "-"), ("valid", "--")):
            points = _curve_points(path, split)
            if points:
                axes.plot(*zip(*points), style, color=colour, label=f"{name} ({split})")
    axes.set(xlabel="step", ylabel="cross-entropy (nats/token)", title=title)
    if axes.lines:
        axes.legend(fontsize=7)
    figure.tight_layout()
    target = Path(folder) / "learning_curves.png"
    figure.savefig(target, dpi=110)
    plt.close(figure)
    return target


def _curve_points(path: Path, split: str) -> list[tuple[int, float]]:
    """(step, cross-entropy) of one split of a ``learning_curve.*.csv``; a cell left empty
    or NaN (a report cut short by the deadline) is no point."""
    with open(path, newline="", encoding="utf-8") as handle:
        return [(int(r["step"]), float(r["xent"])) for r in csv.DictReader(handle)
                if r["split"] == split and r["xent"] not in ("", "nan")]


def slice_figure(folder: Path) -> Path | None:
    """``<slice>/learning_curves.png``: every sitting of a slice in one figure, training
    cross-entropy on the left and validation on the right (a sitting before the stop rule
    has none), one colour per model, one line style per sitting (its seeds, status); a
    marker where each published row was evaluated (its ``best_step``, on the validation
    curve), so that seeds and sittings are seen side by side and each compared at its own
    checkpoint. None: no matplotlib here, or no curve."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    sittings = sorted(path.parent for path in Path(folder).glob("*/rows.csv"))
    curves = [(sitting, path) for sitting in sittings for path in sorted(sitting.glob("learning_curve.*.csv"))]
    if not curves:
        return None
    models = list(dict.fromkeys(path.name.removeprefix("learning_curve.").removesuffix(".csv").split(".seed")[0]
                                for _, path in curves))
    styles = ["-", "--", ":", "-."]
    figure, (train_axes, valid_axes) = plt.subplots(1, 2, figsize=(11, 4.2))
    for index, sitting in enumerate(sittings):
        with open(sitting / "rows.csv", newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        status = ", ".join(dict.fromkeys(row["status"] for row in rows))
        seeds = ", ".join(dict.fromkeys(row["seed"] for row in rows))
        style = styles[index % len(styles)]
        for path in sorted(sitting.glob("learning_curve.*.csv")):
            name = path.name.removeprefix("learning_curve.").removesuffix(".csv")
            colour = f"C{models.index(name.split('.seed')[0])}"
            for axes, split in ((train_axes, "train"), (valid_axes, "valid")):
                points = _curve_points(path, split)
                if points:
                    axes.plot(*zip(*points), style, color=colour, linewidth=1.2)
            valid = dict(_curve_points(path, "valid"))
            for row in rows:
                if name in (row["heads"], f"{row['heads']}.seed{row['seed']}") and row["best_step"].strip():
                    step = int(float(row["best_step"]))
                    if step in valid:
                        valid_axes.plot([step], [valid[step]], "o", color=colour, markersize=5)
        train_axes.plot([], [], style, color="grey", label=f"{sitting.name} (seed {seeds}; {status})")
    for index, model in enumerate(models):
        valid_axes.plot([], [], "-", color=f"C{index}", label=model)
    valid_axes.plot([], [], "o", color="grey", label="evaluated (best validation)")
    train_axes.set(xlabel="step", ylabel="cross-entropy (nats/token)", title="training")
    valid_axes.set(xlabel="step", title="validation")
    train_axes.legend(fontsize=7)
    valid_axes.legend(fontsize=7)
    figure.suptitle(f"{Path(folder).name}: every sitting", fontsize=10)
    figure.tight_layout()
    target = Path(folder) / "learning_curves.png"
    figure.savefig(target, dpi=110)
    plt.close(figure)
    return target


def figure_or_say(folder: Path, title: str, who: str) -> Path | None:
    """:func:`curves_figure`, never its caller's failure (a figure is never worth a
    publication: a curve cut short by a deadline may end in an empty cell); a failure is
    one line on stderr, from ``who``."""
    try:
        return curves_figure(folder, title)
    except Exception as err:
        print(f"{who}: no learning-curves figure: {err}", file=sys.stderr)
        return None


def main(argv: list[str] | None = None) -> int:
    """On the CPU side, after a sitting's tarball is unpacked: the figures it could not make,
    each slice's figure of all its sittings and the accumulated throughput table."""
    parser = argparse.ArgumentParser(prog="python -m headlab.workflow.sitting_speed", description=main.__doc__)
    parser.add_argument("--published", default="results/published",
                        help="the published tree whose sittings' speed rows are gathered")
    args = parser.parse_args(argv)
    root = Path(args.published)
    for folder in sorted(path.parent for path in root.glob("*/*/rows.csv")):
        if not (folder / "learning_curves.png").is_file():
            made = curves_figure(folder, f"{folder.parent.name}, sitting {folder.name}")
            print(f"sitting_speed: {made or f'no figure for {folder}'}")
    for folder in sorted({path.parent.parent for path in root.glob("*/*/rows.csv")}):
        print(f"sitting_speed: {slice_figure(folder) or f'no figure for {folder}'}")
    print(f"sitting_speed: {collect(root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
