"""The GPU plan (config/gpu-plan.yaml): the shipped plan validates, a bad key is one line
naming it, and the next sitting's slice and seeds follow from fixture ``results/published/``
trees (each sitting a folder ``<slice>/<sitting>/`` with the contract's ``rows.csv``)."""
from __future__ import annotations

import csv
import shutil
import re
from pathlib import Path

import pytest

from headlab.errors import ConfigError
from headlab.workflow import gpu_compile, gpu_measures, gpu_plan

SLICE_NAMES = ["A-T1-deep", "C-core-base", "B-base-dhicm", "D-gates-8L", "A-lowres"]


def test_the_shipped_plan_validates_in_the_agreed_order():
    plan = gpu_plan.load()
    assert [found.name for found in plan.slices] == SLICE_NAMES
    for found in plan.slices:
        assert found.entry["why"] and found.entry["stop"]["patience"] >= 1
        assert abs(found.entry["cost_gpu_s"] - found.computed_cost_s) <= 0.05 * found.computed_cost_s
    assert plan.slice("A-T1-deep").heads == ["8L", "7Ftoken+1L", "8Ftoken"] and plan.slice("A-T1-deep").fits


def _bad_plan(tmp_path: Path, old: str, new: str) -> Path:
    text = gpu_plan.PLAN.read_text()
    assert old in text
    path = tmp_path / "gpu-plan.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


def _plan_with(tmp_path: Path, *changes: tuple[str, str]) -> Path:
    """The shipped plan with each (old, new) text replaced once."""
    text = gpu_plan.PLAN.read_text()
    for old, new in changes:
        assert old in text
        text = text.replace(old, new, 1)
    path = tmp_path / "gpu-plan.yaml"
    path.write_text(text)
    return path


def test_an_unknown_plan_key_is_one_line_naming_it_and_its_line(tmp_path):
    path = _bad_plan(tmp_path, "    seeds_per_sitting: 1\n", "    seeds_per_sittting: 1\n")
    with pytest.raises(ConfigError) as caught:
        gpu_plan.load(path)
    message = str(caught.value)
    line = path.read_text().splitlines().index("    seeds_per_sittting: 1") + 1
    assert "\n" not in message and "seeds_per_sittting" in message and f"gpu-plan.yaml:{line}:" in message


def test_a_cost_that_disagrees_with_the_measured_throughput_is_refused(tmp_path):
    # the first slice's (A-T1-deep) cost, whatever the shipped value
    shipped = re.search(r"\n    cost_gpu_s: \d+\n", gpu_plan.PLAN.read_text())[0]
    path = _bad_plan(tmp_path, shipped, "\n    cost_gpu_s: 300\n")
    with pytest.raises(ConfigError, match=r"\[cost_gpu_s\] slice A-T1-deep: cost_gpu_s 300 disagrees"):
        gpu_plan.load(path)


def test_a_slices_evaluation_reserve_is_in_its_cost_and_checked_by_the_schema(tmp_path):
    """A-T1-deep keeps 80 s: 55 + 3,000 x 0.135 + 80 = 540 s; the sitting's 110 s in its
    place would make it 570, over 5% from the 540 written. A reserve under 0 is refused."""
    path = _bad_plan(tmp_path, "    eval_reserve_s: 80\n", "    eval_reserve_s: 110\n")
    with pytest.raises(ConfigError, match=r"\[cost_gpu_s\] slice A-T1-deep: cost_gpu_s 540 disagrees"):
        gpu_plan.load(path)
    path = _bad_plan(tmp_path, "    eval_reserve_s: 80\n", "    eval_reserve_s: -80\n")
    with pytest.raises(ConfigError) as caught:
        gpu_plan.load(path)
    line = path.read_text().splitlines().index("    eval_reserve_s: -80") + 1
    assert f"gpu-plan.yaml:{line}:" in str(caught.value) and "eval_reserve_s" in str(caught.value)


def _publish(root: Path, slice_name: str, sitting: str, seeds_status: dict[int, str], rows,
             steps: dict | None = None) -> None:
    """rows.csv of one sitting: ``rows`` (row, heads) for each seed, trained ``steps[heads]``
    steps (none written: unknown)."""
    folder = root / slice_name / sitting
    folder.mkdir(parents=True)
    with open(folder / "rows.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, gpu_plan.ROW_COLUMNS)
        writer.writeheader()
        for seed, status in seeds_status.items():
            for row, name in sorted(rows):
                writer.writerow({"slice": slice_name, "sitting": sitting, "row": row, "heads": name, "seed": seed,
                                 "test": "test_2016_flickr", "status": status, "step": (steps or {}).get(name, "")})


def test_the_next_slice_follows_the_published_tree(tmp_path):
    plan = gpu_plan.load()
    a_heads = plan.slice("A-T1-deep").rows
    # nothing published: A's first seed
    choice = gpu_plan.choose(plan, tmp_path)
    assert (choice.slice.name, choice.seeds) == ("A-T1-deep", [1])
    # seed 1 converged: seed 2
    _publish(tmp_path, "A-T1-deep", "2026-11-28-h100-aaaaaaa", {1: "converged"}, a_heads)
    assert gpu_plan.choose(plan, tmp_path).seeds == [2]
    # seed 2 ended at its deadline: seed 3 (never run) before seed 2 again
    _publish(tmp_path, "A-T1-deep", "2026-11-29-h100-bbbbbbb", {2: "deadline"}, a_heads)
    assert gpu_plan.choose(plan, tmp_path).seeds == [3]
    # A's seeds all run, seed 2 short of convergence: every other slice's new seeds come
    # before its rerun (a paper's first row adds more than a deadline row made converged)
    _publish(tmp_path, "A-T1-deep", "2026-11-30-h100-ccccccc", {3: "converged"}, a_heads)
    choice = gpu_plan.choose(plan, tmp_path)
    assert (choice.slice.name, choice.seeds) == ("C-core-base", [1])
    assert choice.skipped == ["A-T1-deep: seeds [2] published short of convergence, rerun after every "
                              "slice's new seeds"]
    for name, seeds in (("C-core-base", [1, 2, 3]), ("B-base-dhicm", [1, 2, 3]), ("A-lowres", [1, 2, 3])):
        _publish(tmp_path, name, "2026-12-01-h100-ddddddd", dict.fromkeys(seeds, "converged"),
                 plan.slice(name).rows)
    choice = gpu_plan.choose(plan, tmp_path)
    assert (choice.slice.name, choice.seeds) == ("D-gates-8L", [1])
    _publish(tmp_path, "D-gates-8L", "2026-12-01-h100-ddddddd", dict.fromkeys([1, 2, 3], "converged"),
             plan.slice("D-gates-8L").rows)
    choice = gpu_plan.choose(plan, tmp_path)
    assert (choice.slice.name, choice.seeds) == ("A-T1-deep", [2])
    assert "A-T1-deep" not in " ".join(choice.skipped) and "C-core-base: done" in choice.skipped
    # all of A converged too: nothing is left
    _publish(tmp_path, "A-T1-deep", "2026-12-02-h100-eeeeeee", {2: "converged"}, a_heads)
    with pytest.raises(ConfigError, match="every slice of the plan is done"):
        gpu_plan.choose(plan, tmp_path)


def test_the_shipped_queue_puts_a_new_seed_before_a_rerun(tmp_path):
    """What results/published/ holds now: A-T1-deep seed 1 at its deadline at step 1,000
    (undertrained: a sitting now reaches ~3,111), seed 2 at 2,400-2,550; so the next sitting
    is seed 3, then seed 1's rerun before paper C; seed 2's only after every slice's new seeds."""
    import shutil

    plan = gpu_plan.load()
    choice = gpu_plan.choose(plan)
    assert (choice.slice.name, choice.seeds) == ("A-T1-deep", [3])
    shutil.copytree(gpu_plan.PUBLISHED / "A-T1-deep", tmp_path / "A-T1-deep")
    heads = {name: 3111 for name in plan.slice("A-T1-deep").heads}
    _publish(tmp_path, "A-T1-deep", "2026-12-01-h100-aaaaaaa", {3: "deadline"}, plan.slice("A-T1-deep").rows, heads)
    choice = gpu_plan.choose(plan, tmp_path)
    assert (choice.slice.name, choice.seeds) == ("A-T1-deep", [1])
    _publish(tmp_path, "A-T1-deep", "2026-12-02-h100-bbbbbbb", {1: "deadline"}, plan.slice("A-T1-deep").rows, heads)
    choice = gpu_plan.choose(plan, tmp_path)
    assert (choice.slice.name, choice.seeds) == ("C-core-base", [1])
    # seeds 1 and 3 at their limit (3,111 steps, the deadline), seed 2 (2,400) to be rerun later
    assert choice.skipped == ["A-T1-deep: seeds [2] published short of convergence, rerun after every "
                              "slice's new seeds"]


def test_an_undertrained_seed_is_rerun_with_the_new_seeds_and_only_its_slices_models_count(tmp_path):
    """Undertrained: every model of the seed has a converged or deadline run, the least
    trained under half the steps a sitting reaches now (A-T1-deep: 3,111 -> under 1,555.5)."""
    plan = gpu_plan.load()
    a_slice = plan.slice("A-T1-deep")
    assert a_slice.steps_in_window == 3111
    a_heads = a_slice.rows
    _publish(tmp_path, "A-T1-deep", "2026-11-27-h100-aaaaaaa", {1: "deadline"}, a_heads,
             {"8L": 1555, "7Ftoken+1L": 2400, "8Ftoken": 2500})
    _publish(tmp_path, "A-T1-deep", "2026-11-28-h100-bbbbbbb", {2: "deadline"}, a_heads,
             {"8L": 2400, "7Ftoken+1L": 2400, "8Ftoken": 2500})
    _publish(tmp_path, "A-T1-deep", "2026-11-26-h100-bbbbbbb", {2: "deadline"}, a_heads - {("T5 deep", "8Ftoken")},
             {"8L": 1000, "7Ftoken+1L": 1000})
    _publish(tmp_path, "A-T1-deep", "2026-11-30-h100-ccccccc", {3: "converged"}, a_heads)
    # seed 1: 8L at 1,555 steps (its least trained model); seed 2: its furthest run of each model
    assert gpu_plan.trained_steps(a_slice, tmp_path) == {1: gpu_plan.Trained(1555, None),
                                                         2: gpu_plan.Trained(2400, None)}
    assert gpu_plan.seed_states(a_slice, tmp_path) == gpu_plan.SeedStates(
        converged=[3], never_run=[], undertrained=[1], short=[2], at_limit=[])
    assert gpu_plan.choose(plan, tmp_path).seeds == [1]
    assert gpu_plan.pending_seeds(a_slice, tmp_path) == [1, 2]
    assert gpu_plan.sittings_to_go(a_slice, tmp_path) == (1, 1)
    assert "undertrained (under 1556 steps) [1]; sittings to go: 1 first-pass + 1 rerun" in gpu_plan.queue_line(
        a_slice, tmp_path)
    # its rerun cut short again (1,600: under 10% further): at its limit, not rerun again
    _publish(tmp_path, "A-T1-deep", "2026-12-01-h100-ddddddd", {1: "deadline"}, a_heads,
             dict.fromkeys(a_slice.heads, 1600))
    assert gpu_plan.trained_steps(a_slice, tmp_path)[1] == gpu_plan.Trained(1600, 1555)
    assert gpu_plan.seed_states(a_slice, tmp_path) == gpu_plan.SeedStates(
        converged=[3], never_run=[], undertrained=[], short=[2], at_limit=[1])
    assert gpu_plan.choose(plan, tmp_path, "A-T1-deep").seeds == [2]
    # at 1,556 steps (over half the window) a seed is merely short of convergence: C's first seed comes first
    other = tmp_path / "other"
    _publish(other, "A-T1-deep", "2026-12-01-h100-ddddddd", {1: "deadline", 2: "deadline", 3: "converged"}, a_heads,
             {"8L": 1556, "7Ftoken+1L": 1556, "8Ftoken": 2000})
    assert gpu_plan.seed_states(a_slice, other).short == [1, 2]
    assert gpu_plan.choose(plan, other).slice.name == "C-core-base"


def test_a_seed_without_a_measured_training_is_not_undertrained(tmp_path):
    """A diverged or partial run, or a row with no step, says nothing of how far a seed
    trained: it waits for the reruns (a diverged seed rerun first could hold the queue), as
    do a chain's fine-tunes, short by design (paper D: 400 steps after a 1,720-step parent)."""
    plan = gpu_plan.load()
    a_heads = plan.slice("A-T1-deep").rows
    steps = dict.fromkeys(plan.slice("A-T1-deep").heads, 1000)
    _publish(tmp_path, "A-T1-deep", "2026-11-28-h100-aaaaaaa", {1: "diverged", 2: "partial"}, a_heads, steps)
    _publish(tmp_path, "A-T1-deep", "2026-11-29-h100-bbbbbbb", {3: "deadline"}, a_heads)
    assert gpu_plan.trained_steps(plan.slice("A-T1-deep"), tmp_path) == {}
    assert gpu_plan.seed_states(plan.slice("A-T1-deep"), tmp_path).short == [1, 2, 3]
    d_slice = plan.slice("D-gates-8L")
    d_rows = d_slice.rows
    _publish(tmp_path, "D-gates-8L", "2026-11-28-h100-aaaaaaa", {1: "deadline"},
             d_rows - {("Baseline (converged)", "8L")}, {"8L": 400})
    _publish(tmp_path, "D-gates-8L", "2026-11-28-h100-bbbbbbb", {1: "deadline"},
             {("Baseline (converged)", "8L")}, {"8L": 1720})
    assert gpu_plan.trained_steps(d_slice, tmp_path) == {1: gpu_plan.Trained(1720, None)}
    assert gpu_plan.seed_states(d_slice, tmp_path) == gpu_plan.SeedStates(
        converged=[], never_run=[2, 3], undertrained=[], short=[], at_limit=[1])


def test_a_seed_at_a_sittings_limit_is_never_rerun_and_reruns_go_least_trained_first(tmp_path):
    """A deadline seed trained to within 10% of what a sitting reaches now (3,111 / 1.1 =
    2,828.2 steps for A-T1-deep) would train the same models again: no rerun, and a slice of
    such seeds is done; the seeds short of convergence are rerun least trained first."""
    plan = gpu_plan.load()
    a_slice = plan.slice("A-T1-deep")
    a_heads = a_slice.rows
    _publish(tmp_path, "A-T1-deep", "2026-11-28-h100-aaaaaaa", {1: "deadline"}, a_heads,
             dict.fromkeys(a_slice.heads, 2829))
    _publish(tmp_path, "A-T1-deep", "2026-11-28-h100-bbbbbbb", {2: "deadline"}, a_heads,
             dict.fromkeys(a_slice.heads, 2828))
    _publish(tmp_path, "A-T1-deep", "2026-11-28-h100-ccccccc", {3: "deadline"}, a_heads,
             dict.fromkeys(a_slice.heads, 2000))
    assert gpu_plan.seed_states(a_slice, tmp_path) == gpu_plan.SeedStates(
        converged=[], never_run=[], undertrained=[], short=[3, 2], at_limit=[1])
    assert gpu_plan.choose(plan, tmp_path, "A-T1-deep").seeds == [3]
    assert "at their limit [1]; short of convergence [3, 2]; sittings to go: 2 rerun" in gpu_plan.queue_line(
        a_slice, tmp_path)
    for seed in (2, 3):
        _publish(tmp_path, "A-T1-deep", f"2026-11-29-h100-{seed}aaaaaa", {seed: "deadline"}, a_heads,
                 dict.fromkeys(a_slice.heads, 3111))
    with pytest.raises(ConfigError, match=r"slice A-T1-deep is done: seeds \[\] published as converged; seeds "
                                          r"\[1, 2, 3\] at their limit \(a sitting reaches ~3,111 of the ~3,000 "
                                          r"steps to converge\): a rerun would add under 10% more training"):
        gpu_plan.choose(plan, tmp_path, "A-T1-deep")
    choice = gpu_plan.choose(plan, tmp_path)
    assert choice.slice.name == "C-core-base" and choice.skipped[0].startswith("A-T1-deep: done (seeds [1, 2, 3] at")


def test_a_model_that_converged_early_is_done_not_the_seeds_least_trained(tmp_path):
    """Only the models not yet converged say how far a seed trained: C's three converged at
    1,800-2,000 while +LPEA+RHE ran to the clock at a sitting's 2,437 steps: the seed is at its
    limit, not short; A-lowres' 8L stopped early at 1,400 while 7Ftoken+1L reached 3,250: at
    its limit, not undertrained (under 1,625)."""
    plan = gpu_plan.load()
    c_slice, low = plan.slice("C-core-base"), plan.slice("A-lowres")
    c_rows = dict((heads, row) for row, heads in c_slice.rows)
    folder = "2026-12-01-h100-aaaaaaa"
    for heads, status, step in (("8L", "converged", 1800), ("8DEA.*8L", "converged", 1900),
                                ("8LPEA.*8L", "converged", 2000), ("8RHElpea.*8L", "deadline", 2437)):
        _publish(tmp_path, "C-core-base", f"{folder}-{heads}", {1: status}, {(c_rows[heads], heads)}, {heads: step})
    assert gpu_plan.trained_steps(c_slice, tmp_path) == {1: gpu_plan.Trained(2437, None)}
    assert gpu_plan.seed_states(c_slice, tmp_path).at_limit == [1]
    (row, _), = {key for key in low.rows if key[1] == "8L"}
    _publish(tmp_path, "A-lowres", folder, {1: "converged"}, {(row, "8L")}, {"8L": 1400})
    _publish(tmp_path, "A-lowres", folder + "b", {1: "deadline"}, {(row, "7Ftoken+1L")}, {"7Ftoken+1L": 3250})
    assert gpu_plan.seed_states(low, tmp_path) == gpu_plan.SeedStates(
        converged=[], never_run=[2, 3], undertrained=[], short=[], at_limit=[1])


def test_a_seeds_sittings_are_ordered_by_when_they_published(tmp_path):
    """Two sittings of one day: the folder names order them by commit, the provenance by
    time. Seed 1 at 1,000 steps at 10:00, then 2,000 at 12:00 (a folder that sorts first):
    its latest sitting doubled it, so it stays short of convergence, not at its limit."""
    import json

    plan = gpu_plan.load()
    a_slice = plan.slice("A-T1-deep")
    for folder, created, steps in (("2026-12-01-h100-bbbbbbb", "2026-12-01 10:00:00 UTC", 1000),
                                   ("2026-12-01-h100-aaaaaaa", "2026-12-01 12:00:00 UTC", 2000)):
        _publish(tmp_path, "A-T1-deep", folder, {1: "deadline"}, a_slice.rows, dict.fromkeys(a_slice.heads, steps))
        (tmp_path / "A-T1-deep" / folder / "provenance.json").write_text(json.dumps({"created": created}))
    assert gpu_plan.trained_steps(a_slice, tmp_path) == {1: gpu_plan.Trained(2000, 1000)}
    assert gpu_plan.seed_states(a_slice, tmp_path).short == [1]


def test_three_sittings_of_a_seed_are_its_limit_and_a_spare_seat_takes_a_rerun(tmp_path):
    """A seed whose runs say nothing of its training (diverged, partial) is rerun, but not
    after three sittings; B (two seeds a sitting) trains a new seed and a rerun together,
    one sitting, as the queue counts it."""
    plan = gpu_plan.load()
    a_slice, b_slice = plan.slice("A-T1-deep"), plan.slice("B-base-dhicm")
    for number, status in enumerate(("diverged", "partial")):
        _publish(tmp_path, "A-T1-deep", f"2026-12-0{number + 1}-h100-aaaaaaa", {1: status}, a_slice.rows)
    assert gpu_plan.seed_states(a_slice, tmp_path).short == [1]
    _publish(tmp_path, "A-T1-deep", "2026-12-03-h100-aaaaaaa", {1: "diverged"}, a_slice.rows)
    assert gpu_plan.seed_states(a_slice, tmp_path).at_limit == [1]
    _publish(tmp_path, "B-base-dhicm", "2026-12-01-h100-aaaaaaa", {1: "deadline", 2: "converged"}, b_slice.rows,
             dict.fromkeys(b_slice.heads, 2000))
    assert gpu_plan.seed_states(b_slice, tmp_path) == gpu_plan.SeedStates(
        converged=[2], never_run=[3], undertrained=[], short=[1], at_limit=[])
    assert gpu_plan.choose(plan, tmp_path, "B-base-dhicm").seeds == [3, 1]
    assert gpu_plan.sittings_to_go(b_slice, tmp_path) == (1, 0)


def test_the_forecast_runs_the_queue_through_to_its_end(tmp_path, capsys):
    """Each forecast sitting ends as the plan expects (converged where its expected steps fit
    a sitting, else deadline at a sitting's steps); the queue ends: every seed converged or at
    a sitting's limit, no rerun of the same seed for ever."""
    plan = gpu_plan.load()
    ahead = gpu_plan.forecast(plan, count=50)
    assert [(item.choice.slice.name, item.choice.seeds) for item in ahead] == [
        ("A-T1-deep", [3]), ("A-T1-deep", [1]), ("C-core-base", [1]), ("C-core-base", [2]), ("C-core-base", [3]),
        ("B-base-dhicm", [1, 2]), ("B-base-dhicm", [3]), ("D-gates-8L", [1]), ("D-gates-8L", [2]),
        ("D-gates-8L", [3]), ("A-lowres", [1, 2]), ("A-lowres", [3]), ("A-T1-deep", [2])]
    # A converges at its expected 3,000 steps: a sitting reaches 3,111 with its 80-s reserve
    assert [(item.status, item.steps) for item in ahead[:3]] == [("converged", 3000), ("converged", 3000),
                                                                  ("converged", 2000)]
    assert (ahead[-1].status, ahead[-1].steps) == ("converged", 3000)      # seed 2's rerun
    assert ahead[7].status == "deadline" and ahead[7].steps == 1720       # D: 3,000 expected, 1,720 reached
    # the published tree itself is untouched
    assert gpu_plan.choose(plan).seeds == [3]
    # an empty tree: A's seeds first, one a sitting
    assert [item.choice.seeds for item in gpu_plan.forecast(plan, tmp_path, 2)] == [[1], [2]]
    gpu_plan.main(["--published", str(tmp_path), "--ahead", "1"])
    assert capsys.readouterr().out.splitlines()[-1] == (
        "the next 1 sitting(s), if each ends as the plan expects: A-T1-deep seeds [1] (converged at ~3,000 steps)")


def test_a_published_step_that_is_no_number_is_one_line_naming_its_file_and_line(tmp_path, capsys):
    from headlab.errors import DataError

    plan = gpu_plan.load()
    _publish(tmp_path, "A-T1-deep", "2026-11-28-h100-aaaaaaa", {1: "deadline"}, plan.slice("A-T1-deep").rows,
             {"8L": "1,000"})
    with pytest.raises(DataError) as caught:
        gpu_plan.choose(plan, tmp_path)
    rows = tmp_path / "A-T1-deep/2026-11-28-h100-aaaaaaa/rows.csv"
    line = 1 + next(number for number, text in enumerate(rows.read_text().splitlines()) if ",8L," in text)
    assert str(caught.value) == f"{rows}:{line}: [step] step '1,000' is not a number of training steps"
    # the queue command: that one line, no traceback
    assert gpu_plan.main(["--published", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (f"python -m headlab.workflow.gpu_plan: {rows}:{line}: [step] step '1,000' "
                                       f"is not a number of training steps\n")
    for number, bad in enumerate(("²", "nan", "-5")):
        _publish(tmp_path / "bad", "A-T1-deep", f"2026-11-2{number}-h100-a", {1: "deadline"},
                 plan.slice("A-T1-deep").rows, {"8L": bad})
        with pytest.raises(DataError, match=f"step '{bad}' is not a number"):
            gpu_plan.choose(plan, tmp_path / "bad")
        (tmp_path / "bad" / "A-T1-deep" / f"2026-11-2{number}-h100-a" / "rows.csv").unlink()
    # a number in any spelling Python reads
    _publish(tmp_path / "good", "A-T1-deep", "2026-11-28-h100-a", {1: "deadline"}, plan.slice("A-T1-deep").rows,
             {"8L": "1e3", "7Ftoken+1L": "2000.0", "8Ftoken": " 2500"})
    assert gpu_plan.trained_steps(plan.slice("A-T1-deep"), tmp_path / "good") == {1: gpu_plan.Trained(1000, None)}


def test_the_queue_says_each_slices_seeds_and_the_sittings_to_go(tmp_path, capsys):
    """``python -m headlab.workflow.gpu_plan`` over the shipped plan and results/published/
    (A-T1-deep seed 2 short of convergence; seed 1 published by the recipes of the two sittings
    before, learning rate 2.0, then no stop rule: trained anew), then over a tree where A's
    seed 3 converged and B (two seeds a sitting) published seed 1."""
    assert gpu_plan.main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("A-T1-deep      cost   540 GPU-s,  3111 steps a sitting (3 side by side): seeds short of "
                        "convergence [2]; never run [3]; published by an earlier recipe only (shown apart, trained "
                        "anew) [1]; sittings to go: 2 first-pass + 1 rerun")
    assert lines[-4] == ("one seed more a sitting: A-T1-deep 2 seeds (6 side by side, scaled from the plan's 4 side "
                         "by side) ~1,750 steps a sitting, short of convergence (~3,000): deadline rows; C-core-base 2 "
                         "seeds (8 side by side, scaled from the plan's 4 side by side) ~1,218 steps a sitting, short "
                         "of convergence (~2,000): deadline rows; B-base-dhicm 3 seeds (6 side by side, scaled from "
                         "the plan's 4 side by side) ~1,625 steps a sitting, short of convergence (~2,000): deadline "
                         "rows; D-gates-8L 2 seeds (2 side by side) ~1,233 steps a sitting, short of convergence "
                         "(~3,000): deadline rows; A-lowres 3 seeds (6 side by side, scaled from the plan's 4 side by "
                         "side) ~1,625 steps a sitting, to convergence (~1,500)")
    assert lines[-3:] == ["the plan in all: 12 sitting(s) of new and undertrained seeds, then 1 rerun(s) of seeds "
                          "short of convergence", "next: A-T1-deep, seeds [3]",
                          "the next 3 sitting(s), if each ends as the plan expects: A-T1-deep seeds [3] (converged at "
                          "~3,000 steps); A-T1-deep seeds [1] (converged at ~3,000 steps); C-core-base seeds [1] "
                          "(converged at ~2,000 steps)"]
    plan = gpu_plan.load()
    _publish(tmp_path, "A-T1-deep", "2026-11-30-h100-aaaaaaa", {1: "deadline", 2: "converged", 3: "converged"},
             plan.slice("A-T1-deep").rows)
    _publish(tmp_path, "B-base-dhicm", "2026-11-30-h100-aaaaaaa", {1: "deadline"}, plan.slice("B-base-dhicm").rows)
    assert gpu_plan.queue_line(plan.slice("A-T1-deep"), tmp_path).endswith(
        ": seeds converged [2, 3]; short of convergence [1]; sittings to go: 1 rerun")
    # two seeds a sitting: seed 1's rerun and seeds 2-3 are a sitting each
    assert gpu_plan.sittings_to_go(plan.slice("B-base-dhicm"), tmp_path) == (1, 1)
    gpu_plan.main(["--published", str(tmp_path)])
    assert "the plan in all: 9 sitting(s) of new and undertrained seeds, then 2 rerun(s)" in capsys.readouterr().out


def test_a_seed_converges_only_when_every_model_of_it_did(tmp_path):
    plan = gpu_plan.load()
    _publish(tmp_path, "A-T1-deep", "2026-11-28-h100-aaaaaaa", {1: "converged"},
             [("T1 deep", "8L"), ("T1 deep", "7Ftoken+1L")])
    assert gpu_plan.published_seeds(plan.slice("A-T1-deep"), tmp_path) == {1: "published"}
    # paper D: its parent and its chain's fine-tunes share heads 8L; each row counts
    rows = plan.slice("D-gates-8L").rows
    assert rows == {("Baseline (converged)", "8L"), ("Pruned (converged)", "8L"), ("Non-inverted (fine-tuned)", "8L"),
                    ("Non-inverted (initial)", "8L"), ("Baseline (fine-tuned, no pruning)", "8L")}
    _publish(tmp_path, "D-gates-8L", "2026-11-28-h100-aaaaaaa", {1: "converged"},
             rows - {("Pruned (converged)", "8L")})
    assert gpu_plan.published_seeds(plan.slice("D-gates-8L"), tmp_path) == {1: "published"}


def test_a_named_slice_is_chosen_and_a_done_or_unready_one_refused(tmp_path):
    plan = gpu_plan.load()
    assert gpu_plan.choose(plan, tmp_path, "B-base-dhicm").seeds == [1, 2]
    unready = gpu_plan.load(_bad_plan(tmp_path, "    cost_gpu_s: 683\n    ready: true\n",
                                      "    cost_gpu_s: 683\n    ready: false\n    pending: its parts\n"))
    with pytest.raises(ConfigError, match="not ready for a sitting: its parts"):
        gpu_plan.choose(unready, tmp_path, "D-gates-8L")
    with pytest.raises(ConfigError, match="no slice 'Z'"):
        gpu_plan.choose(plan, tmp_path, "Z")
    _publish(tmp_path, "A-lowres", "2026-11-28-h100-aaaaaaa", {1: "converged", 2: "converged", 3: "converged"},
             plan.slice("A-lowres").rows)
    with pytest.raises(ConfigError, match="slice A-lowres is done"):
        gpu_plan.choose(plan, tmp_path, "A-lowres")


def test_the_chain_costs_its_stages_hand_computed():
    """D-gates-8L: stage 1 (the gated fine-tune alone), stage 2 (pruned and control side by
    side), each start-up + preparation + 400 steps at the throughput of its trainings; the
    parent gets the window less both."""
    plan = gpu_plan.load()
    found = plan.slice("D-gates-8L")
    speed = plan.throughput["seconds_per_step"]
    startup, prepare = plan.throughput["startup_s"], plan.throughput["prepare_s"]
    assert (startup, prepare, speed["1"], speed["2"]) == (55, 10, 0.10, 0.12)
    assert found.chain_stage_s == {1: 55 + 10 + 400 * 0.10, 2: 55 + 10 + 400 * 0.12} == {1: 105, 2: 113}
    window = 570 - 15 - 110
    assert found.steps_in_window == int((window - 55 - 105 - 113) / 0.10) == 1720
    assert found.computed_cost_s == 55 + 3000 * 0.10 + 105 + 113 + 110 == 683


@pytest.mark.parametrize("old, new, message", [
    ("        parent: 8L\n        row: Pruned", "        parent: 8Ftoken\n        row: Pruned",
     r"\[parent\] slice D-gates-8L: chain link gated's parent '8Ftoken' is not one of the slice's models"),
    ("        mask_from: gated\n", "        mask_from: control\n",
     r"\[mask_from\] slice D-gates-8L: chain link pruned's mask_from 'control' is not a link of an earlier stage"),
    ("      - name: control\n", "      - name: gated\n", r"\[chain\] slice D-gates-8L: chain link 'gated' is named twice"),
    ("        stage: 2\n        parent: 8L\n        row: Non", "        stage: 1\n        parent: 8L\n        row: Non",
     r"\[mask_from\] .*pruned's mask_from 'gated' is not a link of an earlier stage"),
    ("options: {gate: enc, lambda_l0: 0.1, train_steps: 400", "options: {gate: enc, lambda_l0: 0.1, train_step: 400",
     r"\[train_steps\] missing key 'train_steps'"),
])
def test_a_bad_chain_is_one_line_naming_its_key_and_line(tmp_path, old, new, message):
    path = _bad_plan(tmp_path, old, new)
    with pytest.raises(ConfigError, match=message) as caught:
        gpu_plan.load(path)
    assert "\n" not in str(caught.value) and re.search(r"gpu-plan.yaml:\d+:", str(caught.value))


@pytest.mark.parametrize("old, new, line, message", [
    # what the GPU machine would otherwise find only when the sitting trains: named here
    ("      - {heads: 8Ftoken, row: T5 deep}", "      - {heads: 8Ftokn, row: T5 deep}", "      - {heads: 8Ftokn",
     r"\[heads\] slice A-T1-deep: model 8Ftokn: bad head spec '8Ftokn': .*did you mean 'Ftoken'"),
    ("    preset: base_lowres\n", "    preset: base_lowress\n", "    preset: base_lowress",
     r"\[preset\] slice A-lowres: unknown model preset 'base_lowress' \(did you mean 'base_lowres'"),
    ("    overrides: {lambda_kl: 0.1}", "    overrides: {lambda_kl: 0.1, optim: adamm}", "    overrides: {lambda_kl",
     r"\[optim\] slice B-base-dhicm: model 8L: optim must be one of .*got 'adamm'"),
    ("    pair: en-de\n    layers: \"6+6\"\n    preset: base\n    models:\n      - {heads: 8L, row: Transformer}",
     "    pair: en-xx\n    layers: \"6+6\"\n    preset: base\n    models:\n      - {heads: 8L, row: Transformer}",
     "    pair: en-xx", r"\[pair\] slice C-core-base: dataset 'multi30k' has no language 'xx'"),
    ("        options: {train_steps: 400, warmup_steps: 100, valid_steps: 100, save_checkpoint_steps: 100}\n      - name: control",
     "        options: {train_steps: 400, warmup_steps: -100, valid_steps: 100, save_checkpoint_steps: 100}\n      - name: control",
     "        options: {train_steps: 400, warmup_steps: -100",
     r"\[warmup_steps\] slice D-gates-8L: chain link pruned: warmup_steps must be an integer >= 0, got -100"),
    ("lambda_l0: 0.1, train_steps: 400, warmup_steps: 100", "lambda_l0: 0.1, train_steps: 400, warmup_step: 100",
     "        options: {gate: enc, lambda_l0: 0.1, train_steps: 400, warmup_step",
     r"\[warmup_step\] slice D-gates-8L: chain link gated: unknown OpenNMT-py train option 'warmup_step'; did you "
     r"mean 'warmup_steps'"),
])
def test_a_slices_bad_training_is_one_line_naming_its_line_in_the_plan(tmp_path, old, new, line, message):
    path = _bad_plan(tmp_path, old, new)
    with pytest.raises(ConfigError, match=message) as caught:
        gpu_plan.load(path)
    number = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if text.startswith(line))
    assert str(caught.value).startswith(f"{path}:{number}: ") and "\n" not in str(caught.value)


def _clock(root: Path, slice_name: str, sitting: str, created: str, step_ms: dict[str, object],
           first_batch_s: float | str = "", columns: dict[str, dict] | None = None) -> Path:
    """A sitting folder's throughput.csv with the training's own clock (``step_ms`` per model,
    all side by side) and its provenance's time; the other columns as a sitting writes them
    (``columns``: model -> more of its row's cells)."""
    from headlab.workflow.sitting_speed import SPEED_COLUMNS

    folder = root / slice_name / sitting
    folder.mkdir(parents=True)
    (folder / "provenance.json").write_text(f'{{"created": "{created}"}}\n')
    with open(folder / "throughput.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, SPEED_COLUMNS)
        writer.writeheader()
        for model, value in step_ms.items():
            writer.writerow({"gpu": sitting.split("-")[3], "slice": slice_name, "sitting": sitting, "model": model,
                             "models_side_by_side": len(step_ms), "step_ms": value,
                             "start_first_batch_s": first_batch_s, "src_tok_s_side_by_side": 40000,
                             **(columns or {}).get(model, {})})
    return folder / "throughput.csv"


def test_the_shipped_plan_agrees_with_the_newest_sittings_clock():
    """Fails once a sitting whose clock disagrees with config/gpu-plan.yaml's throughput is
    committed without the plan's figures (the queue's steps a sitting rest on them)."""
    assert gpu_plan.stale_throughput(gpu_plan.load()) == []


def test_a_plan_off_the_newest_sittings_clock_says_which_figure_and_by_how_much(tmp_path, capsys):
    """Plan (h100): 0.135 s a step with 3 side by side, 0.16 with 4, start-up 55 s; stale
    beyond 10% of the newest sitting's slowest model (its step_ms) and first batch."""
    import shutil

    from headlab.errors import DataError

    plan = gpu_plan.load()
    # the published sittings (993e600 and before) have no clock: nothing to compare
    shutil.copytree(gpu_plan.PUBLISHED / "A-T1-deep", tmp_path / "A-T1-deep")
    assert gpu_measures.measured_speed(tmp_path) == {} and gpu_plan.stale_throughput(plan, tmp_path) == []
    # 3 side by side, slowest 131 ms (|0.135 - 0.131| under 0.0131), first batch 52.5 s (under 5.25 off)
    _clock(tmp_path, "A-T1-deep", "2026-12-01-h100-aaaaaaa", "2026-12-01 10:00:00 UTC",
           {"8L": 120.0, "7Ftoken+1L": 131.0, "8Ftoken": 125}, 52.5)
    assert gpu_measures.measured_speed(tmp_path) == {3: gpu_measures.Measured(
        "A-T1-deep/2026-12-01-h100-aaaaaaa", "2026-12-01 10:00:00 UTC", "h100", 3, 0.131, 52.5)}
    assert gpu_plan.stale_throughput(plan, tmp_path) == []
    assert gpu_plan.main(["--published", str(tmp_path)]) == 0
    assert ("throughput: the plan agrees with the newest sittings' clocks (within 10%): 3 side by side 0.131 s a "
            "step (A-T1-deep/2026-12-01-h100-aaaaaaa)") in capsys.readouterr().out.splitlines()
    # an older sitting (by its provenance, whatever its folder's name says) does not count
    _clock(tmp_path, "A-T1-deep", "2026-12-03-h100-ccccccc", "2026-11-30 09:00:00 UTC",
           {"8L": 200, "7Ftoken+1L": 210, "8Ftoken": 190}, 90)
    assert gpu_plan.stale_throughput(plan, tmp_path) == []
    # four side by side on an H200, newest of all: 0.16 against 0.220, 55 s against 80 s
    _clock(tmp_path, "C-core-base", "2026-12-02-h200-bbbbbbb", "2026-12-02 10:00:00 UTC",
           {"8L": 190, "8DEA": 200, "8LPEA": 210, "8RHElpea": 220}, 80)
    stale = ["throughput.seconds_per_step.4: the plan says 0.16, the sitting C-core-base/2026-12-02-h200-bbbbbbb "
             "(on h200; the plan's gpu: h100) measured 0.220 s a step with 4 side by side",
             "throughput.startup_s: the plan says 55 s, the sitting C-core-base/2026-12-02-h200-bbbbbbb (on h200; "
             "the plan's gpu: h100) measured 80 s to its first batch"]
    assert gpu_plan.stale_throughput(plan, tmp_path) == stale
    gpu_plan.main(["--published", str(tmp_path)])
    assert ("throughput stale: write the measures into gpu-plan.yaml (and each slice's cost_gpu_s): "
            + "; ".join(stale)) in capsys.readouterr().out.splitlines()
    # a newer sitting of three: 0.100 s a step, 0.035 under the plan's 0.135
    _clock(tmp_path, "A-T1-deep", "2026-12-04-h100-ddddddd", "2026-12-04 10:00:00 UTC",
           {"8L": 95, "7Ftoken+1L": 100, "8Ftoken": 98})
    assert gpu_plan.stale_throughput(plan, tmp_path)[0] == (
        "throughput.seconds_per_step.3: the plan says 0.135, the sitting A-T1-deep/2026-12-04-h100-ddddddd "
        "measured 0.100 s a step with 3 side by side")
    # a clock that is no number: one line naming its file, line and column
    table = _clock(tmp_path, "A-T1-deep", "2026-12-05-h100-eeeeeee", "2026-12-05 10:00:00 UTC", {"8L": "fast"})
    with pytest.raises(DataError) as caught:
        gpu_plan.stale_throughput(plan, tmp_path)
    assert str(caught.value) == f"{table}:2: [step_ms] step_ms 'fast' is not a positive number"


def test_one_model_alone_is_measured_by_the_probe_where_no_model_trained_alone(tmp_path, capsys):
    """The plan's 0.10 s a step for one model (D's chain trains one at a time) was never
    measured: three side by side at 120-131 ms, and the second call's probe of 8L alone at
    80 ms a step past its warm-up; with 8L's validation (5%) and checkpoints (2%) of its
    120 ms side by side: (80 + 120 x 0.07) / 1000 = 0.0884 s, more than 10% under 0.10."""
    from headlab.errors import DataError

    plan = gpu_plan.load()
    _clock(tmp_path, "A-T1-deep", "2026-12-01-h100-aaaaaaa", "2026-12-01 10:00:00 UTC",
           {"8L": 120.0, "7Ftoken+1L": 131.0, "8Ftoken": 125}, 52.5,
           {"8L": {"step_ms_alone": 80.0, "validation_share": 0.05, "checkpoints_share": 0.02}})
    measured = gpu_measures.measured_speed(tmp_path)
    assert measured[1] == gpu_measures.Measured("A-T1-deep/2026-12-01-h100-aaaaaaa", "2026-12-01 10:00:00 UTC", "h100",
                                            1, pytest.approx(0.0884), 52.5, probe=True)
    assert measured[3].step_s == 0.131 and not measured[3].probe
    assert gpu_plan.stale_throughput(plan, tmp_path) == [
        "throughput.seconds_per_step.1: the plan says 0.1, the sitting A-T1-deep/2026-12-01-h100-aaaaaaa measured "
        "0.088 s a step alone (its probe, validation and checkpoints as side by side)"]
    # within 10% of the plan: the queue says where its figure comes from
    _clock(tmp_path, "A-T1-deep", "2026-12-02-h100-bbbbbbb", "2026-12-02 10:00:00 UTC",
           {"8L": 130.0, "7Ftoken+1L": 131.0, "8Ftoken": 125}, 52.5, {"8L": {"step_ms_alone": 96.0}})
    assert gpu_plan.stale_throughput(plan, tmp_path) == []
    gpu_plan.main(["--published", str(tmp_path)])
    assert ("throughput: the plan agrees with the newest sittings' clocks (within 10%): 1 alone (a probe) 0.096 s a "
            "step (A-T1-deep/2026-12-02-h100-bbbbbbb); 3 side by side 0.131 s a step "
            "(A-T1-deep/2026-12-02-h100-bbbbbbb)") in capsys.readouterr().out.splitlines()
    # a sitting that trained one model alone measures it by its training, not its probe
    _clock(tmp_path, "D-gates-8L", "2026-12-03-h100-ccccccc", "2026-12-03 10:00:00 UTC", {"8L": 125.0}, 50,
           {"8L": {"step_ms_alone": 70.0}})
    assert gpu_measures.measured_speed(tmp_path)[1] == gpu_measures.Measured(
        "D-gates-8L/2026-12-03-h100-ccccccc", "2026-12-03 10:00:00 UTC", "h100", 1, 0.125, 50)
    # a probe's step that is no number: one line naming its file, line and column
    table = _clock(tmp_path, "A-T1-deep", "2026-12-04-h100-ddddddd", "2026-12-04 10:00:00 UTC", {"8L": 120.0}, 50,
                   {"8L": {"step_ms_alone": "-3"}})
    with pytest.raises(DataError) as caught:
        gpu_measures.measured_speed(tmp_path)
    assert str(caught.value) == f"{table}:2: [step_ms_alone] step_ms_alone '-3' is not a positive number"


def test_more_models_side_by_side_are_measured_by_the_probe_side_by_side(tmp_path, capsys):
    """Three side by side at 120-131 ms, and the second call's probe of 8 copies at once
    (under MPS, as the trainings): 8L's copies 150 ms a step, 8Ftoken's 160; with 8Ftoken's
    validation (5%) and checkpoints (3%) of its 125 ms: (160 + 125 x 0.08) / 1000 = 0.170 s,
    the plan's figure for 8 (it has none: stale until written), which the queue's "one seed
    more" then reads for C's 8 and A's 6. A probe whose copies barely overlapped, or that
    ran without the trainings' MPS, measures nothing; a count that is no number is one line."""
    import shutil

    import yaml

    from headlab.errors import DataError

    plan = gpu_plan.load()
    assert plan.probe_side_by_side == 8          # C-core-base's 4 models, 2 seeds: the most of the ready slices
    probed = {"models_probed_side_by_side": 8, "probed_overlap": 0.9, "probed_mps": "on", "mps": "on"}
    _clock(tmp_path, "A-T1-deep", "2026-12-01-h100-aaaaaaa", "2026-12-01 10:00:00 UTC",
           {"8L": 120.0, "7Ftoken+1L": 131.0, "8Ftoken": 125}, 52.5,
           {"8L": {**probed, "step_ms_probed_side_by_side": 150.0},
            "8Ftoken": {**probed, "step_ms_probed_side_by_side": 160.0, "validation_share": 0.05,
                        "checkpoints_share": 0.03}})
    measured = gpu_measures.measured_speed(tmp_path)
    assert measured[8] == gpu_measures.Measured("A-T1-deep/2026-12-01-h100-aaaaaaa", "2026-12-01 10:00:00 UTC", "h100",
                                            8, pytest.approx(0.170), 52.5, probe=True)
    assert sorted(measured) == [3, 8] and not measured[3].probe
    assert gpu_plan.stale_throughput(plan, tmp_path) == [
        "throughput.seconds_per_step.8: the plan says nothing, the sitting A-T1-deep/2026-12-01-h100-aaaaaaa measured "
        "0.170 s a step with 8 side by side (its probe, validation and checkpoints as side by side)"]
    # written into the plan: the queue's "one seed more" reads it for 6 and 8 side by side
    data = yaml.safe_load(gpu_plan.PLAN.read_text())
    data["throughput"]["seconds_per_step"][8] = 0.17
    written = gpu_plan.Plan(data, gpu_plan.PLAN)
    line = gpu_plan.more_seeds_line(written)
    assert "A-T1-deep 2 seeds (6 side by side) ~2,470 steps a sitting, short of convergence (~3,000)" in line
    assert "C-core-base 2 seeds (8 side by side) ~2,294 steps a sitting, to convergence (~2,000)" in line
    assert "B-base-dhicm 3 seeds (6 side by side) ~2,294 steps a sitting, to convergence (~2,000)" in line
    # copies that ran mostly one after another, or without MPS where the trainings had it: no measure
    for other in ({"probed_overlap": 0.3}, {"probed_mps": "failed: no daemon"}):
        _clock(tmp_path / "other", "A-T1-deep", "2026-12-02-h100-bbbbbbb", "2026-12-02 10:00:00 UTC", {"8L": 120.0}, 50,
               {"8L": {**probed, "step_ms_probed_side_by_side": 150.0, **other}})
        assert sorted(gpu_measures.measured_speed(tmp_path / "other")) == [1]
        shutil.rmtree(tmp_path / "other")
    table = _clock(tmp_path, "A-T1-deep", "2026-12-03-h100-ccccccc", "2026-12-03 10:00:00 UTC", {"8L": 120.0}, 50,
                   {"8L": {**probed, "step_ms_probed_side_by_side": 150.0, "models_probed_side_by_side": "8.5"}})
    with pytest.raises(DataError) as caught:
        gpu_measures.measured_speed(tmp_path)
    assert str(caught.value) == (f"{table}:2: [models_probed_side_by_side] models_probed_side_by_side '8.5' is not a "
                                 f"whole number")


def test_the_queue_says_what_the_side_track_cost_the_trainings(tmp_path, capsys):
    """The newest sitting that split its steps: 8L 140 ms beside the suite or bench and 125
    clear, 8Ftoken 130 and 125 (7Ftoken+1L's only beside): means over the two with both, 135
    and 125, +8%. An older sitting's split does not count; a sitting with spans of one kind
    only says so; a split that is no number is one line."""
    from headlab.errors import DataError

    assert gpu_measures.side_track_line() == ("side track: no published sitting has split its trainings' steps by what "
                                          "ran beside them yet")
    _clock(tmp_path, "A-T1-deep", "2026-12-01-h100-aaaaaaa", "2026-12-01 10:00:00 UTC", {"8L": 120.0}, 50,
           {"8L": {"step_ms_side_track": 300, "step_ms_clear": 100}})
    _clock(tmp_path, "A-T1-deep", "2026-12-02-h100-bbbbbbb", "2026-12-02 10:00:00 UTC",
           {"8L": 130.0, "7Ftoken+1L": 131.0, "8Ftoken": 125}, 52.5,
           {"8L": {"step_ms_side_track": 140, "step_ms_clear": 125},
            "7Ftoken+1L": {"step_ms_side_track": 150},
            "8Ftoken": {"step_ms_side_track": 130, "step_ms_clear": 125}})
    expected = ("side track: at A-T1-deep/2026-12-02-h100-bbbbbbb, the trainings took 135 ms a step while the CUDA "
                "suite or the bench ran beside them, 125 ms while neither did (+8%; a mean over 2 models)")
    assert gpu_measures.side_track_line(tmp_path) == expected
    gpu_plan.main(["--published", str(tmp_path)])
    assert expected in capsys.readouterr().out.splitlines()
    # a sitting whose side track outlasted every training (two cores: the suite's CPU stand-ins)
    _clock(tmp_path, "A-T1-deep", "2026-12-03-cpu-ccccccc", "2026-12-03 10:00:00 UTC", {"8L": 3500.0, "8Ftoken": 3400},
           8, {"8L": {"step_ms_side_track": 3600}, "8Ftoken": {"step_ms_side_track": 3400}})
    assert gpu_measures.side_track_line(tmp_path) == (
        "side track: at A-T1-deep/2026-12-03-cpu-ccccccc, the CUDA suite or the bench ran beside every marked span of "
        "the trainings (3500 ms a step): no clear span to compare with")
    _clock(tmp_path, "A-T1-deep", "2026-12-04-h100-ddddddd", "2026-12-04 10:00:00 UTC", {"8L": 120.0}, 50,
           {"8L": {"step_ms_clear": 118}})
    assert gpu_measures.side_track_line(tmp_path) == (
        "side track: at A-T1-deep/2026-12-04-h100-ddddddd, nothing ran beside the trainings' marked spans (118 ms a "
        "step)")
    table = _clock(tmp_path, "A-T1-deep", "2026-12-05-h100-eeeeeee", "2026-12-05 10:00:00 UTC", {"8L": 120.0}, 50,
                   {"8L": {"step_ms_side_track": "slow", "step_ms_clear": 100}})
    with pytest.raises(DataError) as caught:
        gpu_measures.side_track_line(tmp_path)
    assert str(caught.value) == f"{table}:2: [step_ms_side_track] step_ms_side_track 'slow' is not a positive number"


def test_the_evaluation_reserve_is_checked_against_the_newest_sittings_evaluation(tmp_path, capsys):
    """993e600 (the newest with the runner's status): evaluate 60.4 s less its atlas's 7.0 s =
    53.4 s for 3 rows, of which 47.3 s from the evaluation's start to its last translation
    (15.8 s a row). A reserve holds the translations and the 23 s kept back from them (the
    runner's margin 10, scoring 10, the trainings' stop 3): A-T1-deep 3 rows (70 of its own
    80 s), C and B 4 (86 of the sitting's 110), D-gates-8L 5 (8L, gated, pruned, control,
    initial: 102 of 110), A-lowres 4 (86 of 110)."""
    import dataclasses
    import json
    import shutil

    from headlab.errors import DataError

    plan = gpu_plan.load()
    measured = gpu_measures.measured_evaluation()
    assert measured == gpu_measures.EvaluationMeasured("A-T1-deep/2026-11-27-h100-993e600", "2026-11-27 19:49:28 UTC", 3,
                                                   pytest.approx(53.4), False, pytest.approx(47.3))
    assert measured.for_rows(5) == pytest.approx(89.0)
    assert measured.reserve_for(3) == pytest.approx(47.3 + 23)
    assert measured.reserve_for(5) == pytest.approx(47.3 / 3 * 5 + 23)
    assert {found.name: (found.evaluations, found.eval_reserve_s, found.train_window_s) for found in plan.slices} == {
        "A-T1-deep": (3, 80, 475), "C-core-base": (4, 110, 445), "B-base-dhicm": (4, 110, 445),
        "D-gates-8L": (5, 110, 445), "A-lowres": (4, 110, 445)}
    assert gpu_plan.stale_throughput(plan) == []
    gpu_plan.main([])
    assert ("evaluation: at the rate of the sitting A-T1-deep/2026-11-27-h100-993e600 (3 rows in 53 s, 47 s of it "
            "translating, its head atlas aside), each ready slice's rows against its reserve: A-T1-deep ~70 of 80 s, C-core-base ~86 of 110 s, "
            "B-base-dhicm ~86 of 110 s, D-gates-8L ~102 of 110 s, A-lowres ~86 of 110 s (each with the margins the "
            "runner and the scoring keep back from the translations)"
            ) in capsys.readouterr().out.splitlines()
    # the sitting's reserve cut to 95 s would cut D's translations; A's own 60 s, A's: stale, by key
    entries = [{**entry, "eval_reserve_s": 60} if entry["name"] == "A-T1-deep" else entry
               for entry in plan.data["slices"]]
    short = dataclasses.replace(plan, data={**plan.data, "sitting": {**plan.sitting, "eval_reserve_s": 95},
                                            "slices": entries})
    rate = "the sitting A-T1-deep/2026-11-27-h100-993e600 (3 rows in 53 s, 47 s of it translating, its head atlas aside)"
    margins = "with the margins kept back from its translations, at the rate of"
    assert gpu_plan.stale_throughput(short) == [
        f"slices.A-T1-deep.eval_reserve_s: A-T1-deep keeps 60 s to score its 3 rows, ~70 s {margins} {rate}",
        f"sitting.eval_reserve_s: D-gates-8L keeps 95 s to score its 5 rows, ~102 s {margins} {rate}"]
    # a slice not ready is not checked
    entries = [{**entry, "ready": entry["name"] not in ("A-T1-deep", "D-gates-8L")} for entry in short.data["slices"]]
    assert gpu_plan.stale_throughput(dataclasses.replace(short, data={**short.data, "slices": entries})) == []
    # the newest sitting with a status counts; one whose evaluation never ran (no phase) is passed over
    shutil.copytree(gpu_plan.PUBLISHED / "A-T1-deep", tmp_path / "A-T1-deep")
    newer = tmp_path / "A-T1-deep/2026-12-01-h100-aaaaaaa"
    shutil.copytree(tmp_path / "A-T1-deep/2026-11-27-h100-993e600", newer)
    provenance = json.loads((newer / "provenance.json").read_text())
    (newer / "provenance.json").write_text(json.dumps({**provenance, "created": "2026-12-01 10:00:00 UTC",
                                                       "atlas": {"wall_s": 30.0}}))
    (newer / "status-sitting.json").write_text(json.dumps({"calls": [{"phases": {"evaluate": {"wall_s": 90.0}}}]}))
    assert gpu_measures.measured_evaluation(tmp_path).seconds == 60.0
    (newer / "status-sitting.json").write_text(json.dumps({"calls": [{"phases": {"train": {"wall_s": 400}}}]}))
    assert gpu_measures.measured_evaluation(tmp_path).sitting == "A-T1-deep/2026-11-27-h100-993e600"
    (newer / "status-sitting.json").write_text("{")
    with pytest.raises(DataError, match=r"2026-12-01-h100-aaaaaaa/status-sitting.json: not a runner's status"):
        gpu_measures.measured_evaluation(tmp_path)
    # an evaluation its deadline cut (a BLEU lack for time): its slice's reserve is short, whatever the rate
    (newer / "status-sitting.json").write_text(json.dumps({"calls": [{"phases": {"evaluate": {"wall_s": 70.0}}}]}))
    (newer / "provenance.json").write_text(json.dumps({
        **provenance, "created": "2026-12-01 10:00:00 UTC", "atlas": {"wall_s": 0.0},
        "evaluation_wall_s": {"translate": 63.0, "all": 66.0},
        "lacks_by_cause": {"deadline": ["BLEU and chrF on test sentences 251-1000 of test_2016_flickr: not translated "
                                        "before the deadline (scored on the first 250)"]}}))
    cut = gpu_measures.measured_evaluation(tmp_path)
    assert (cut.sitting, cut.evaluated, cut.seconds, cut.cut, cut.translate_s) == (
        "A-T1-deep/2026-12-01-h100-aaaaaaa", 3, 70.0, True, 63.0)
    rate = ("the sitting A-T1-deep/2026-12-01-h100-aaaaaaa (3 rows in 70 s, 63 s of it translating, its head atlas "
            "aside; cut by its deadline: at least that rate)")
    assert gpu_plan.stale_throughput(plan, tmp_path) == [
        f"slices.A-T1-deep.eval_reserve_s: A-T1-deep keeps 80 s, which {rate} ran out of",
        f"sitting.eval_reserve_s: D-gates-8L keeps 110 s to score its 5 rows, ~128 s {margins} {rate}"]
    # a sitting of before the translations' time was recorded: the whole evaluation stands for it
    del provenance["evaluation_wall_s"]
    (newer / "provenance.json").write_text(json.dumps({**provenance, "created": "2026-12-01 10:00:00 UTC"}))
    older = gpu_measures.measured_evaluation(tmp_path)
    assert older.translate_s is None and older.reserve_for(3) == pytest.approx(70.0 - provenance["atlas"]["wall_s"] + 23)
    # no sitting with a status: nothing to check, and the queue says so
    assert gpu_measures.measured_evaluation(tmp_path / "none") is None
    assert gpu_plan.stale_throughput(short, tmp_path / "none") == []


def test_every_ready_slices_reserve_leaves_its_translations_the_time_the_newest_sitting_took():
    """A slice's evaluation reserve starts when its trainings stop. The runner gives the
    evaluation that reserve less its margin (``EVAL_MARGIN_S``) and the trainings' stop
    (``STOP_S``); the evaluation ends its translations ``SCORING_S`` before its deadline.
    What is left must hold the translations as long as the newest sitting's took (993e600:
    47.3 s for 3 rows from the evaluation's start to its last translation; scaled by rows).
    With 25 s kept for scoring, A-T1-deep's 80 s held the whole evaluation (53.4 s) but left
    its translations 42 s: BLEU on the first 250 of the 1,000 test sentences."""
    import json

    from headlab.workflow import gpu_runner, sitting

    assert sitting.SCORING_S is gpu_runner.SCORING_S          # the figures the evaluation keeps to
    provenance = json.loads((gpu_plan.PUBLISHED / "A-T1-deep/2026-11-27-h100-993e600/provenance.json").read_text())
    per_row = provenance["evaluation_wall_s"]["translate"] / 3
    for found in gpu_plan.load().slices:
        if found.entry["ready"]:
            left = (found.eval_reserve_s - gpu_runner.EVAL_MARGIN_S - gpu_runner.STOP_S
                    - gpu_runner.SCORING_S["cuda"])
            assert left >= per_row * found.evaluations, (found.name, left, per_row * found.evaluations)


def test_the_docs_slice_table_names_each_slices_rows_as_the_plan_does():
    """docs/studies/gpu-rows.md's table of slices: each slice's study, table and rows (its
    models', its chain's and the chain's initial checkpoints'), as the plan publishes them;
    paper A's tables name a row by its heads."""
    docs = gpu_plan.REPO / "docs/studies/gpu-rows.md"
    lines = [line for line in docs.read_text().splitlines() if line.startswith("| `")]
    written = {}
    for line in lines:
        name, where, rows, _ = (cell.strip() for cell in line.strip("|").split("|"))
        written[name.strip("`")] = (where, rows)
    plan = gpu_plan.load()
    assert list(written) == [found.name for found in plan.slices]
    for found in plan.slices:
        where, rows = written[found.name]
        study = found.entry["study"].replace("_", " ")
        assert where.startswith(f"{study}, {found.entry['table']}"), (found.name, where)
        by = "heads" if found.entry["study"] == "paper_A" else "row"
        names = [model[by] for model in found.entry["models"]] + [
            name for link in found.chain for name in (link["row"], link.get("initial_row")) if name]
        assert re.findall(r"`([^`]+)`", rows) == names, found.name


def test_a_chain_sittings_start_up_is_its_slowest_models_whatever_its_stage(tmp_path):
    """Paper D's sitting: the parent alone (no start-up timed), then a pair at 80 and 78 s:
    the plan's 55 s start-up is 45% off, whichever count's measure comes first."""
    from headlab.errors import DataError
    from headlab.workflow.sitting_speed import SPEED_COLUMNS

    folder = tmp_path / "D-gates-8L/2026-12-01-h100-aaaaaaa"
    folder.mkdir(parents=True)
    (folder / "provenance.json").write_text('{"created": "2026-12-01 10:00:00 UTC"}\n')

    def write(rows):
        with open(folder / "throughput.csv", "w", newline="") as handle:
            writer = csv.DictWriter(handle, SPEED_COLUMNS)
            writer.writeheader()
            for model, count, step_ms, start in rows:
                writer.writerow({"gpu": "h100", "model": model, "models_side_by_side": count, "step_ms": step_ms,
                                 "start_first_batch_s": start})

    rows = [("8L", 1, 100, ""), ("gated", 1, 100, ""), ("pruned", 2, 120, 80), ("control", 2, 118, 78)]
    write(rows)
    measured = gpu_measures.measured_speed(tmp_path)
    assert {count: (measure.step_s, measure.startup_s) for count, measure in measured.items()} == {
        1: (0.1, 80), 2: (0.12, 80)}
    assert gpu_plan.stale_throughput(gpu_plan.load(), tmp_path) == [
        "throughput.startup_s: the plan says 55 s, the sitting D-gates-8L/2026-12-01-h100-aaaaaaa measured 80 s "
        "to its first batch"]
    write(rows[:3] + [("control", 2.5, 118, 78)])
    with pytest.raises(DataError, match=r"throughput.csv:5: \[models_side_by_side\] models_side_by_side '2.5' is not "
                                        r"a whole number"):
        gpu_measures.measured_speed(tmp_path)


def test_a_slices_model_listed_twice_is_one_line_naming_its_line(tmp_path):
    """Two rows of one model (8L in T1 and in T5): it would train once while the cost counts
    two, and the bundle would keep one of their table rows."""
    path = _bad_plan(tmp_path, "      - {heads: 8Ftoken, row: T5 deep}\n", "      - {heads: 8L, row: T5 deep}\n")
    with pytest.raises(ConfigError) as caught:
        gpu_plan.load(path)
    line = path.read_text().splitlines().index("      - {heads: 8L, row: T5 deep}") + 1
    assert str(caught.value) == f"{path}:{line}: [heads] slice A-T1-deep: heads '8L' names the same model as '8L': list it once"


def test_a_named_slice_that_cannot_reach_its_min_steps_is_refused_before_the_bundle(tmp_path):
    """The sitting would refuse it on the GPU machine (its window check), after the bundle's
    minutes and the machine's start-up; the queue's own choice skips it with the same figures."""
    plan = gpu_plan.load(_bad_plan(tmp_path, "    min_steps: 1000\n", "    min_steps: 3500\n"))
    found = plan.slice("A-T1-deep")
    assert not found.fits and found.steps_in_window == 3111
    with pytest.raises(ConfigError) as caught:
        gpu_plan.choose(plan, tmp_path, "A-T1-deep")
    assert str(caught.value).endswith("[min_steps] slice A-T1-deep: 3111 steps in a sitting at the plan's eager throughput, "
                                      "under its min_steps 3500: lower min_steps or the models side by side")
    assert gpu_plan.choose(plan, tmp_path).slice.name != "A-T1-deep"


def test_an_empty_throughput_table_is_one_line_naming_its_line(tmp_path):
    path = _bad_plan(tmp_path, "  seconds_per_step: {1: 0.10, 2: 0.12, 3: 0.135, 4: 0.16}\n",
                     "  seconds_per_step: {}\n")
    with pytest.raises(ConfigError) as caught:
        gpu_plan.load(path)
    line = path.read_text().splitlines().index("  seconds_per_step: {}") + 1
    assert "\n" not in str(caught.value) and f"gpu-plan.yaml:{line}:" in str(caught.value) \
        and "seconds_per_step" in str(caught.value)


def test_a_slice_for_a_table_that_shows_no_gpu_rows_is_one_line_naming_its_line(tmp_path):
    """Its rows would be published into no table, and the table it meant would say "not yet
    run" for ever; each study's GPU tables are those its builders extend (they check it)."""
    from headlab.studies import STUDIES

    path = _bad_plan(tmp_path, "    table: T1\n", "    table: T9\n")
    with pytest.raises(ConfigError) as caught:
        gpu_plan.load(path)
    line = path.read_text().splitlines().index("    table: T9") + 1
    assert str(caught.value) == f"{path}:{line}: [table] slice A-T1-deep: paper_A shows published GPU rows in T1 and T2, not 'T9'"
    for study in STUDIES.values():
        assert set(study.gpu_tables) <= set(study.tables), study.name


@pytest.mark.parametrize("old, new, key", [
    # paper C places a run in the column its row names: "+LPEA + RHE" would be a column of its own
    ("      - {heads: \"8RHElpea,*(8L)\", row: +LPEA+RHE}\n", "      - {heads: \"8RHElpea,*(8L)\", row: +LPEA + RHE}\n",
     "row"),
    # paper D's chain: the pruned model's untrained start, a row of Table 3
    ("        initial_row: Non-inverted (initial)", "        initial_row: Non-inverted (start)", "initial_row"),
])
def test_a_row_its_table_has_not_is_one_line_naming_its_line(tmp_path, old, new, key):
    """Published, the run would show beside the table under a label no paper row has, and the
    row it meant would say "not yet run"; refused when the plan is read, before any bundle."""
    path = _bad_plan(tmp_path, old, new)
    with pytest.raises(ConfigError) as caught:
        gpu_plan.load(path)
    line = next(number for number, text in enumerate(path.read_text().splitlines(), 1) if text.startswith(new.rstrip("\n")))
    row = new.split(f"{key}: ")[1].split("}")[0].split("  #")[0].strip()
    assert str(caught.value).startswith(f"{path}:{line}: [{key}] slice ") and f"row {row!r} is none of" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_rows_that_place_a_gpu_run_are_the_papers_own():
    """Every study's ``gpu_rows`` is of a table that shows GPU rows, and names the paper's
    systems (B: Table 3's columns, C: Table 1's rows, D: Table 3's rows and our fine-tuned
    baseline, the control the paper's text describes)."""
    import pandas as pd

    from headlab.studies import STUDIES

    for study in STUDIES.values():
        assert set(study.gpu_rows) <= set(study.gpu_tables), study.name
    folder = Path(__file__).resolve().parents[1] / "src/headlab/studies"
    reference = {name: pd.read_csv(folder / name / "reference.csv") for name in ("paper_B", "paper_C", "paper_D")}
    table_of = {name: frame[frame["table"] == STUDIES[name].gpu_tables[0]] for name, frame in reference.items()}
    assert set(STUDIES["paper_B"].gpu_rows["T3"]) == set(table_of["paper_B"]["column"])
    assert set(STUDIES["paper_C"].gpu_rows["T1"]) == set(table_of["paper_C"]["row"])
    assert set(STUDIES["paper_D"].gpu_rows["T3"]) - set(table_of["paper_D"]["row"]) == {"Baseline (fine-tuned, no pruning)"}
    assert "paper_A" not in {name for name, study in STUDIES.items() if study.gpu_rows}


def test_a_seed_published_by_an_earlier_recipe_is_trained_anew_after_the_seeds_never_run(tmp_path):
    """A session changed what trains the slice between two sittings: seeds 1-2 were published
    by one recipe, seed 3 by the next. Only seed 3 counts; seeds 1-2 come again after the seeds
    never run (none here), as the undertrained do; a rows.csv with no recipe counts as before."""
    plan = gpu_plan.load()
    found = plan.slice("A-T1-deep")
    _publish(tmp_path, "A-T1-deep", "2026-11-28-h100-aaaaaaa", {1: "converged", 2: "converged"}, found.rows)
    _publish(tmp_path, "A-T1-deep", "2026-11-30-h100-ccccccc", {3: "deadline"}, found.rows)
    assert gpu_plan.seed_states(found, tmp_path).converged == [1, 2]           # no recipe recorded
    for sitting, made_by in (("2026-11-28-h100-aaaaaaa", "1111aaaa2222"), ("2026-11-30-h100-ccccccc", "3333cccc4444")):
        rows = tmp_path / "A-T1-deep" / sitting / "rows.csv"
        lines = rows.read_text().splitlines()
        rows.write_text("\n".join([lines[0]] + [line + made_by for line in lines[1:]]) + "\n")   # recipe: last
    states = gpu_plan.seed_states(found, tmp_path)
    assert (states.converged, states.never_run, states.earlier_recipe, states.first_pass) == ([], [], [1, 2], [1, 2])
    assert gpu_plan.choose(plan, tmp_path).seeds == [1]
    assert "published by an earlier recipe only (shown apart, trained anew) [1, 2]" in gpu_plan.queue_line(
        found, tmp_path)
    # the next sittings are forecast by the newest recipe: seed 1, then seed 2
    assert [(ahead.choice.slice.name, ahead.choice.seeds) for ahead in gpu_plan.forecast(plan, tmp_path, 2)] == [
        ("A-T1-deep", [1]), ("A-T1-deep", [2])]


def test_a_bundle_says_when_it_trains_by_another_recipe_than_the_published_seeds(tmp_path, monkeypatch):
    """``headlab gpu-bundle`` compares each model's recipe with its newest published run's: the
    same, nothing; another, one warning line naming the sitting and what changed."""
    import json

    from headlab.workflow import bundle, recipe

    plan = gpu_plan.load()
    choice = gpu_plan.Choice(plan.slice("A-T1-deep"), [3], [])
    published = tmp_path / "published"
    _publish(published, "A-T1-deep", "2026-11-28-h100-aaaaaaa", {1: "converged"}, choice.slice.rows)
    options = {"learning_rate": 1.0, "warmup_steps": 1000, "enc_heads": "8L"}
    made = recipe.of(options)
    rows = published / "A-T1-deep" / "2026-11-28-h100-aaaaaaa" / "rows.csv"
    lines = rows.read_text().splitlines()
    rows.write_text("\n".join([lines[0]] + [line + recipe.digest(made) for line in lines[1:]]) + "\n")
    (rows.parent / "provenance.json").write_text(json.dumps({"models": {"8L": {"recipe": made}}}))
    config = tmp_path / "onmt.yaml"
    models = [{"name": "8L", "heads": "8L", "config": str(config)}]
    config.write_text(json.dumps(options))
    assert bundle.recipe_changes(choice, models, published) == []
    config.write_text(json.dumps({**options, "learning_rate": 0.7}))
    assert bundle.recipe_changes(choice, models, published) == [
        "8L trains by another recipe than its newest published run's (2026-11-28-h100-aaaaaaa: learning_rate "
        "1.0 -> 0.7); once this sitting publishes, that recipe's runs are shown apart and their seeds trained anew"]


def _compiled_probe(root: Path, sitting: str, created: str, eager_ms: float, compiled_ms: float | str,
                    compile_s: float | str, mode: str = "default", suite: dict[str, str] | None = None) -> Path:
    """A sitting of A-T1-deep whose clock agrees with the plan (three side by side at 130 ms,
    55 s to the first batch), whose probe alone ran 8L eager, then compiled, and whose CUDA
    suite passed its compiled cases (``suite``: case -> outcome, as its cuda-suite.csv has
    them; empty: no such file)."""
    table = _clock(root, "A-T1-deep", sitting, created, {"8L": 130.0, "7Ftoken+1L": 130.0, "8Ftoken": 130.0}, 55,
                   {"8L": {"step_ms_alone": eager_ms, "compile_mode": mode, "step_ms_alone_compiled": compiled_ms,
                           "compile_s": compile_s}})
    outcomes = dict.fromkeys(gpu_measures.COMPILED_CASES, "passed") if suite is None else suite
    if outcomes:
        _suite(table.parent, outcomes)
    return table


def _proven(sitting: str = "A-T1-deep/x") -> gpu_measures.CompiledSuite:
    """CUDA suites whose compiled cases all passed, newest in ``sitting``."""
    return gpu_measures.CompiledSuite(dict.fromkeys(gpu_measures.COMPILED_KINDS, ("passed", sitting)))


def _suite(folder: Path, outcomes: dict[str, str]) -> None:
    """A sitting's cuda-suite.csv: a test of another case first, then ``outcomes``."""
    with open(folder / "cuda-suite.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["test", "outcome", "when"])
        writer.writerow(["tests/gpu/test_gpu.py::test_layer_matches_cpu[cuda-enc-8L--fp32]", "passed", "call"])
        writer.writerows([test, outcome, "call"] for test, outcome in outcomes.items())


def test_the_plans_compile_is_judged_by_the_newest_compiled_probe_in_each_ready_slices_window(tmp_path, capsys):
    """The shipped plan's windows for the steps (budget 570 - packing 15 - reserve - start-up
    55): A-T1-deep 420 s (reserve 80), C, B and A-lowres 390 s (110), D 172 s (its two
    fine-tuning stages out). A probe 2x as fast compiled after 60 s of compile: A reaches
    (420 - 60) x 2 / 420 = 1.71x the steps eager, C 330 x 2 / 390 = 1.69x, D 112 x 2 / 172 =
    1.30x: it pays (every ready slice at least 1.1x), and a plan left off is stale."""
    from headlab.errors import DataError

    shipped = gpu_plan.load()
    assert shipped.compile == "off" and "compile" not in shipped.sitting
    assert gpu_measures.measured_compile(tmp_path) is None
    assert gpu_compile.compile_line(shipped, None) == (
        "compile: no published sitting's probe has compiled its model yet; the plan trains eager (sitting.compile off)")
    _compiled_probe(tmp_path, "2026-12-01-h100-aaaaaaa", "2026-12-01 10:00:00 UTC", 100.0, 50.0, 60.0)
    measure = gpu_measures.measured_compile(tmp_path)
    assert measure == gpu_measures.CompileMeasured("A-T1-deep/2026-12-01-h100-aaaaaaa", "2026-12-01 10:00:00 UTC",
                                                   "h100", "default", 100.0, 50.0, 60.0,
                                                   suite=_proven("A-T1-deep/2026-12-01-h100-aaaaaaa"))
    gains = gpu_compile.compile_gains(shipped, measure)
    assert gains == pytest.approx({"A-T1-deep": 360 * 2 / 420, "C-core-base": 330 * 2 / 390,
                                   "B-base-dhicm": 330 * 2 / 390, "D-gates-8L": 112 * 2 / 172,
                                   "A-lowres": 330 * 2 / 390})
    described = ("the sitting A-T1-deep/2026-12-01-h100-aaaaaaa's probe ran its model compiled (default) 2.00x as "
                 "fast as eager (50 against 100 ms a step alone) after 60 s of compile")
    assert gpu_plan.stale_throughput(shipped, tmp_path) == [
        f"sitting.compile: the plan says off; {described}: a sitting's trainings would reach A-T1-deep 1.71x, "
        f"C-core-base 1.69x, B-base-dhicm 1.69x, D-gates-8L 1.30x, A-lowres 1.69x the steps they reach eager: "
        f"set default"]
    assert gpu_plan.main(["--published", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert f"compile: {described}; a sitting's trainings would reach A-T1-deep 1.71x, C-core-base 1.69x, " \
           f"B-base-dhicm 1.69x, D-gates-8L 1.30x, A-lowres 1.69x the steps they reach eager: pays; the plan " \
           f"trains eager (sitting.compile off)" in out
    assert any(line.startswith("throughput stale: ") and "sitting.compile: the plan says off" in line for line in out)

    # the plan set to the measured mode agrees; set to another, or off in YAML's bare spelling
    compiled = gpu_plan.load(_bad_plan(tmp_path, "  eval_reserve_s: 110\n", "  eval_reserve_s: 110\n  compile: default\n"))
    assert compiled.compile == "default" and gpu_compile.stale_compile(compiled, measure) == []
    # (and the figures a compiled slice's steps are counted by, which this plan lacks)
    assert gpu_plan.stale_throughput(compiled, tmp_path) == [
        f"throughput.compiled: the plan says nothing, and a ready slice compiles in default; {described}: write "
        f"{{mode: default, speedup: 2.00, compile_s: 60}}"]
    assert gpu_plan.stale_throughput(compiled, tmp_path / "none") == [
        "sitting.compile: the plan says default, and no published sitting's probe has compiled its model: off until "
        "one has measured what it buys"]
    other = gpu_plan.load(_bad_plan(tmp_path, "  eval_reserve_s: 110\n",
                                    "  eval_reserve_s: 110\n  compile: reduce-overhead\n"))
    assert gpu_compile.stale_compile(other, measure) == [
        "sitting.compile: the plan says reduce-overhead, and the newest compiled probe "
        "(A-T1-deep/2026-12-01-h100-aaaaaaa) measured default: set default"]
    bare_off = gpu_plan.load(_bad_plan(tmp_path, "  eval_reserve_s: 110\n", "  eval_reserve_s: 110\n  compile: off\n"))
    assert bare_off.compile == "off"

    # D's own key, off where compiling pays in its window too: a line of its own
    d_off = ("  - name: D-gates-8L\n", "  - name: D-gates-8L\n    compile: off\n")
    compiled_but_d = gpu_plan.load(_plan_with(tmp_path, ("  eval_reserve_s: 110\n",
                                                         "  eval_reserve_s: 110\n  compile: default\n"), d_off))
    assert compiled_but_d.slice("D-gates-8L").compile == "off" and compiled_but_d.slice("A-T1-deep").compile == "default"
    assert gpu_compile.stale_compile(compiled_but_d, measure) == [
        f"slices.D-gates-8L.compile: the plan says off; {described}: a sitting's trainings would reach D-gates-8L "
        f"1.30x the steps they reach eager: set default"]

    # a newer probe: 100 s of compile for the same 2x: A (420 - 100) x 2 / 420 = 1.52x, C, B and A-lowres
    # 290 x 2 / 390 = 1.49x, D (172 - 100) x 2 / 172 = 0.84x: every slice but D compiles, D eager
    _compiled_probe(tmp_path, "2026-12-02-h100-bbbbbbb", "2026-12-02 10:00:00 UTC", 100.0, 50.0, 100.0)
    slower = gpu_measures.measured_compile(tmp_path)
    assert gpu_compile.compile_gains(shipped, slower) == pytest.approx(
        {"A-T1-deep": 320 * 2 / 420, "C-core-base": 290 * 2 / 390, "B-base-dhicm": 290 * 2 / 390,
         "D-gates-8L": 72 * 2 / 172, "A-lowres": 290 * 2 / 390})
    described = described.replace("12-01-h100-aaaaaaa", "12-02-h100-bbbbbbb").replace("60 s", "100 s")
    assert gpu_plan.stale_throughput(shipped, tmp_path) == [
        f"sitting.compile: the plan says off; {described}: a sitting's trainings would reach A-T1-deep 1.52x, "
        f"C-core-base 1.49x, B-base-dhicm 1.49x, A-lowres 1.49x the steps they reach eager: set default, and "
        f"slices.D-gates-8L.compile: off (D-gates-8L 0.84x)"]
    assert gpu_compile.stale_compile(compiled, slower) == [
        f"slices.D-gates-8L.compile: the plan says default, by sitting.compile; {described}: a sitting's trainings "
        f"would reach D-gates-8L 0.84x the steps they reach eager, under 1.1x: set off"]
    assert gpu_compile.stale_compile(compiled_but_d, slower) == []
    assert gpu_compile.compile_line(compiled_but_d, slower) == (
        f"compile: {described}; a sitting's trainings would reach A-T1-deep 1.52x, C-core-base 1.49x, B-base-dhicm "
        f"1.49x, D-gates-8L 0.84x, A-lowres 1.49x the steps they reach eager: pays in A-T1-deep, C-core-base, "
        f"B-base-dhicm, A-lowres, not in D-gates-8L; the plan trains A-T1-deep, C-core-base, B-base-dhicm, A-lowres "
        f"compiled (default); D-gates-8L eager")
    # where most slices' windows do not pay, sitting.compile goes off and the one that pays keeps its own
    # mode: compiled only in A's 420 s, the others on their own key
    only_a = gpu_measures.CompileMeasured("A-T1-deep/x", "2026-12-02 11:00:00 UTC", "h100", "default", 100.0, 80.0,
                                          50.0, suite=_proven())
    assert gpu_compile.compile_wanted(shipped, only_a) == {"A-T1-deep": "default", "C-core-base": "off",
                                                        "B-base-dhicm": "off", "D-gates-8L": "off", "A-lowres": "off"}
    assert gpu_compile.stale_compile(compiled, only_a) == [
        "sitting.compile: the plan says default; the sitting A-T1-deep/x's probe ran its model compiled (default) "
        "1.25x as fast as eager (80 against 100 ms a step alone) after 50 s of compile: a sitting's trainings would "
        "reach C-core-base 1.09x, B-base-dhicm 1.09x, D-gates-8L 0.89x, A-lowres 1.09x the steps they reach eager, "
        "under 1.1x: set off, and slices.A-T1-deep.compile: default (A-T1-deep 1.10x)"]
    assert gpu_compile.stale_compile(shipped, only_a) == [
        "slices.A-T1-deep.compile: the plan says off, by sitting.compile; the sitting A-T1-deep/x's probe ran its "
        "model compiled (default) 1.25x as fast as eager (80 against 100 ms a step alone) after 50 s of compile: a "
        "sitting's trainings would reach A-T1-deep 1.10x the steps they reach eager: set default"]

    # stopped while compiling after 150 s (a lower bound): D's 172 s might still pay, so not known;
    # after 500 s, longer than every window: it pays nowhere
    _compiled_probe(tmp_path, "2026-12-03-h100-ccccccc", "2026-12-03 10:00:00 UTC", 100.0, "", 150.0)
    cut = gpu_measures.measured_compile(tmp_path)
    assert cut.speedup is None and cut.steps_gain(420) is None and cut.steps_gain(150) == 0.0
    assert gpu_compile.compile_pays(gpu_compile.compile_gains(shipped, cut)) is None
    assert gpu_compile.stale_compile(compiled, cut) == [
        "sitting.compile: the plan says default; the sitting A-T1-deep/2026-12-03-h100-ccccccc's probe was stopped "
        "after 150 s compiling its model (default): whether it pays is not known: set off"]
    # after 200 s: D's 172 s cannot pay, the others' windows are not known to
    cut_200 = gpu_measures.CompileMeasured("A-T1-deep/y", "2026-12-03 11:00:00 UTC", "h100", "default", 100.0, None,
                                           200.0, suite=_proven())
    assert gpu_compile.compile_line(shipped, cut_200) == (
        "compile: the sitting A-T1-deep/y's probe was stopped after 200 s compiling its model (default); a sitting's "
        "trainings would reach A-T1-deep ?, C-core-base ?, B-base-dhicm ?, D-gates-8L 0.00x, A-lowres ? the steps "
        "they reach eager: not in D-gates-8L, not known in A-T1-deep, C-core-base, B-base-dhicm, A-lowres; the plan "
        "trains eager (sitting.compile off)")
    _compiled_probe(tmp_path, "2026-12-04-h100-ddddddd", "2026-12-04 10:00:00 UTC", 100.0, "", 500.0)
    assert set(gpu_compile.compile_gains(shipped, gpu_measures.measured_compile(tmp_path)).values()) == {0.0}

    # a compile that failed: never pays, whatever the windows; it is the sitting's measure over
    # a model of the same sitting that compiled
    _clock(tmp_path, "A-T1-deep", "2026-12-04-h100-fffffff", "2026-12-04 11:00:00 UTC",
           {"8L": 130.0, "7Ftoken+1L": 130.0, "8Ftoken": 130.0}, 55,
           {"8L": {"step_ms_alone": 100.0, "compile_mode": "default", "step_ms_alone_compiled": 50.0, "compile_s": 60},
            "8Ftoken": {"step_ms_alone": 100.0, "compile_mode": "default",
                        "compile_error": "RuntimeError: backend='inductor' raised:"}})
    failed = gpu_measures.measured_compile(tmp_path)
    assert failed.error == "RuntimeError: backend='inductor' raised:" and failed.speedup is None
    assert set(gpu_compile.compile_gains(shipped, failed).values()) == {0.0}
    failure = ("the sitting A-T1-deep/2026-12-04-h100-fffffff's probe failed to compile its model (default): "
               "RuntimeError: backend='inductor' raised:")
    assert gpu_compile.stale_compile(shipped, failed) == []
    assert gpu_compile.stale_compile(compiled, failed) == [
        f"sitting.compile: the plan says default; {failure}: a compiled training would stop there: set off"]
    assert gpu_compile.compile_line(shipped, failed) == (
        f"compile: {failure}: a compiled training would stop there; the plan trains eager (sitting.compile off)")

    # a compile time that is no number: one line naming its file, line and column
    table = _compiled_probe(tmp_path, "2026-12-05-h100-eeeeeee", "2026-12-05 10:00:00 UTC", 100.0, 50.0, "soon")
    with pytest.raises(DataError) as caught:
        gpu_measures.measured_compile(tmp_path)
    assert str(caught.value) == f"{table}:2: [compile_s] compile_s 'soon' is not a number"


def test_a_slice_compiles_once_the_cuda_suite_shows_its_own_kinds_compiled_training_as_eager(tmp_path, capsys):
    """A probe 2x as fast after 60 s of compile pays in every window (1.30-1.71x), but a
    slice's sitting trains compiled only once the newest run of each of the CUDA suite's
    compiled cases that stand for its kinds and mixers passed (in fp16, inductor against
    eager on the GPU; gpu_measures.COMPILED_KINDS): fixed for paper A's patterns, learned for
    learned heads, gates and DHICM, syntax for paper C's kinds, stock_decoder for the plain
    8L layer (L too) and OpenNMT-py's own decoder. A-T1-deep and A-lowres need fixed, learned
    and stock_decoder; C-core-base learned, syntax and stock_decoder; B (a headlab decoder)
    and D learned and stock_decoder. Until a sitting has run a slice's cases, or where the
    newest run of one failed, that slice is off, and a plan that compiles it is told why."""
    stock = gpu_measures.STOCK_DECODER
    shipped = gpu_plan.load()
    assert {found.name: sorted(found.compiled_kinds) for found in shipped.slices} == {
        "A-T1-deep": ["Ftoken", "L", stock], "C-core-base": ["DEA", "L", "LPEA", "RHElpea", stock],
        "B-base-dhicm": ["L", "dhicm"], "D-gates-8L": ["L", stock], "A-lowres": ["Ftoken", "L", stock]}
    compiled = gpu_plan.Plan({**shipped.data, "sitting": {**shipped.sitting, "compile": "default"}}, shipped.path)
    fixed, learned, syntax, stock_case = gpu_measures.COMPILED_CASES
    assert fixed.endswith("::test_the_compiled_model_trains_as_the_eager_one[cuda-fixed-fp16]")
    # the published sittings ran a CUDA suite without these cases
    shutil.copytree(gpu_plan.PUBLISHED / "A-T1-deep", tmp_path / "A-T1-deep")
    _compiled_probe(tmp_path, "2026-12-01-h100-aaaaaaa", "2026-12-01 10:00:00 UTC", 100.0, 50.0, 60.0, suite={})
    measure = gpu_measures.measured_compile(tmp_path)
    run_of = f"of {gpu_measures.COMPILED_TEST} (a compiled model against the eager one on the GPU)"
    never = (f"no published sitting's CUDA suite has run [cuda-fixed-fp16], [cuda-learned-fp16], "
             f"[cuda-syntax-fp16], [cuda-stock_decoder-fp16] {run_of}")
    assert measure.speedup == 2.0 and measure.unproven() == never
    assert measure.unproven({"L", "dhicm"}) == (
        f"no published sitting's CUDA suite has run [cuda-learned-fp16], [cuda-stock_decoder-fp16] {run_of}")
    assert set(gpu_compile.compile_wanted(shipped, measure).values()) == {"off"}
    assert gpu_compile.stale_compile(shipped, measure) == []          # off, as it should be
    described = ("the sitting A-T1-deep/2026-12-01-h100-aaaaaaa's probe ran its model compiled (default) 2.00x as "
                 "fast as eager (50 against 100 ms a step alone) after 60 s of compile")
    gains = ("A-T1-deep 1.71x, C-core-base 1.69x, B-base-dhicm 1.69x, D-gates-8L 1.30x, A-lowres 1.69x the steps "
             "they reach eager")
    assert gpu_compile.stale_compile(compiled, measure) == [
        f"sitting.compile: the plan says default; {described}: a sitting's trainings would reach {gains}, but "
        f"{never}: set off"]
    assert gpu_compile.compile_line(shipped, measure) == (
        f"compile: {described}; a sitting's trainings would reach {gains}: pays, but {never}; the plan trains "
        f"eager (sitting.compile off)")

    # a later sitting ran all but syntax: every slice but C may compile
    _suite(tmp_path / "A-T1-deep" / "2026-12-01-h100-aaaaaaa", {fixed: "passed", learned: "passed",
                                                                 stock_case: "passed"})
    measure = gpu_measures.measured_compile(tmp_path)
    no_syntax = f"no published sitting's CUDA suite has run [cuda-syntax-fp16] {run_of}"
    assert measure.unproven() == gpu_measures.compiled_suite(tmp_path).unproven() == no_syntax
    assert measure.unproven({"Ftoken", "L", "gate", "dhicm", "Lwide", "Fword", stock}) is None
    assert gpu_compile.compile_wanted(shipped, measure) == {
        "A-T1-deep": "default", "C-core-base": "off", "B-base-dhicm": "default", "D-gates-8L": "default",
        "A-lowres": "default"}
    assert gpu_compile.stale_compile(shipped, measure) == [
        f"sitting.compile: the plan says off; {described}: a sitting's trainings would reach A-T1-deep 1.71x, "
        f"B-base-dhicm 1.69x, D-gates-8L 1.30x, A-lowres 1.69x the steps they reach eager: set default, and "
        f"slices.C-core-base.compile: off (C-core-base 1.69x)"]
    assert gpu_compile.stale_compile(compiled, measure) == [
        f"slices.C-core-base.compile: the plan says default, by sitting.compile; {described}: a sitting's trainings "
        f"would reach C-core-base 1.69x the steps they reach eager, but {no_syntax}: set off"]
    assert gpu_compile.compile_line(shipped, measure) == (
        f"compile: {described}; a sitting's trainings would reach {gains}: pays, but {no_syntax} (kept eager: "
        f"C-core-base); the plan trains eager (sitting.compile off)")
    # all four passed in a newer sitting: the probe decides
    _compiled_probe(tmp_path, "2026-12-02-h100-bbbbbbb", "2026-12-02 10:00:00 UTC", 100.0, 50.0, 60.0)
    assert gpu_measures.compiled_suite(tmp_path).unproven() is None
    assert set(gpu_compile.compile_wanted(shipped, gpu_measures.measured_compile(tmp_path)).values()) == {"default"}
    # the newest run of syntax failed, though an older one passed: C alone is off
    _compiled_probe(tmp_path, "2026-12-03-h100-ccccccc", "2026-12-03 10:00:00 UTC", 100.0, 50.0, 60.0,
                    suite={fixed: "passed", learned: "passed", syntax: "failed"})
    failed = gpu_measures.measured_compile(tmp_path)
    assert failed.unproven() == (
        "the CUDA suite's [cuda-syntax-fp16] failed in A-T1-deep/2026-12-03-h100-ccccccc: no compiled model of DEA, "
        "LPEA, RelPos, Local, RHEdea, RHElpea, RHErel, RHEloc is shown to train as the eager one on the GPU")
    assert [name for name, mode in gpu_compile.compile_wanted(shipped, failed).items() if mode == "off"] == [
        "C-core-base"]
    c_failed = ("the CUDA suite's [cuda-syntax-fp16] failed in A-T1-deep/2026-12-03-h100-ccccccc: no compiled model "
                "of DEA, LPEA, RHElpea is shown to train as the eager one on the GPU")
    assert gpu_compile.stale_compile(compiled, failed)[0].endswith(f"but {c_failed}: set off")
    # and then learned was skipped: every slice trains learned heads, so every slice is off
    _compiled_probe(tmp_path, "2026-12-04-h100-ddddddd", "2026-12-04 10:00:00 UTC", 100.0, 50.0, 60.0,
                    suite={fixed: "passed", learned: "skipped"})
    skipped = gpu_measures.measured_compile(tmp_path)
    assert set(gpu_compile.compile_wanted(shipped, skipped).values()) == {"off"}
    assert gpu_compile.slices_unproven(shipped, skipped, ["B-base-dhicm"]) == (
        "the CUDA suite's [cuda-learned-fp16] skipped in A-T1-deep/2026-12-04-h100-ddddddd: no compiled model of L, "
        "dhicm is shown to train as the eager one on the GPU")
    everything = ("the CUDA suite's [cuda-learned-fp16] skipped in A-T1-deep/2026-12-04-h100-ddddddd; the CUDA "
                  "suite's [cuda-syntax-fp16] failed in A-T1-deep/2026-12-03-h100-ccccccc: no compiled model of L, "
                  "dhicm, DEA, LPEA, RHElpea is shown to train as the eager one on the GPU")
    assert gpu_compile.stale_compile(compiled, skipped)[0].endswith(f"but {everything}: set off")
    assert gpu_plan.main(["--published", str(tmp_path)]) == 0
    assert f"pays, but {everything}; the plan trains eager (sitting.compile off)" in capsys.readouterr().out
    # a name the plan lacks proves nothing
    with pytest.raises(KeyError):
        gpu_compile.slices_unproven(shipped, skipped, ["A-T1-dep"])


def test_a_line_on_several_slices_gives_each_its_own_reason_to_stay_eager(tmp_path):
    """fixed failed and the compile takes 100 s at 2x: A-T1-deep (1.52x) and A-lowres (1.49x)
    would pay but are held by the suite; D-gates-8L is shown (it trains no fixed heads) but
    its 172 s window gains 0.84x; C and B pay and are shown. sitting.compile: default is
    stale (three of five want off), and its line says which slice is off for which reason."""
    shipped = gpu_plan.load()
    compiled = gpu_plan.Plan({**shipped.data, "sitting": {**shipped.sitting, "compile": "default"}}, shipped.path)
    fixed, learned, syntax, stock_case = gpu_measures.COMPILED_CASES
    _compiled_probe(tmp_path, "2026-12-05-h100-eeeeeee", "2026-12-05 10:00:00 UTC", 100.0, 50.0, 100.0,
                    suite={fixed: "failed", learned: "passed", syntax: "passed", stock_case: "passed"})
    measure = gpu_measures.measured_compile(tmp_path)
    assert gpu_compile.compile_wanted(shipped, measure) == {
        "A-T1-deep": "off", "C-core-base": "default", "B-base-dhicm": "default", "D-gates-8L": "off",
        "A-lowres": "off"}
    assert gpu_compile.stale_compile(compiled, measure) == [
        "sitting.compile: the plan says default; the sitting A-T1-deep/2026-12-05-h100-eeeeeee's probe ran its model "
        "compiled (default) 2.00x as fast as eager (50 against 100 ms a step alone) after 100 s of compile: a "
        "sitting's trainings would reach A-T1-deep 1.52x, D-gates-8L 0.84x, A-lowres 1.49x the steps they reach "
        "eager, but the CUDA suite's [cuda-fixed-fp16] failed in A-T1-deep/2026-12-05-h100-eeeeeee: no compiled "
        "model of Ftoken is shown to train as the eager one on the GPU (A-T1-deep, A-lowres), and D-gates-8L under "
        "1.1x: set off, and slices.C-core-base.compile: default (C-core-base 1.49x), and "
        "slices.B-base-dhicm.compile: default (B-base-dhicm 1.49x)"]


def test_a_kind_no_compiled_case_stands_for_keeps_its_slice_eager(tmp_path):
    """OpenNMT-py's own encoder (a preset's encoder_type: transformer) and a kind registered
    without a case have no compiled case: the suites never show them, so a slice that trains
    one stays eager whatever else passed, and the reason says which."""
    stock_encoder = gpu_measures.STOCK_ENCODER
    shipped = gpu_plan.load()
    slices = [{**entry, "overrides": {"encoder_type": "transformer"}} if entry["name"] == "D-gates-8L" else entry
              for entry in shipped.data["slices"]]
    plan = gpu_plan.Plan({**shipped.data, "slices": slices}, shipped.path)
    found = next(found for found in plan.slices if found.name == "D-gates-8L")
    assert found.compiled_kinds == {"L", gpu_measures.STOCK_DECODER, stock_encoder}
    _compiled_probe(tmp_path, "2026-12-02-h100-bbbbbbb", "2026-12-02 10:00:00 UTC", 100.0, 50.0, 60.0)
    measure = gpu_measures.measured_compile(tmp_path)
    assert measure.unproven({"L", stock_encoder, "Tnew"}) == (
        f"no compiled case of {gpu_measures.COMPILED_TEST} trains Tnew, {stock_encoder}")
    wanted = gpu_compile.compile_wanted(plan, measure)
    assert wanted["D-gates-8L"] == "off" and wanted["A-T1-deep"] == "default"


def test_each_kind_and_mixer_has_a_compiled_case_that_trains_it():
    """gpu_measures.COMPILED_KINDS gives every registered kind and mixer a case of the CUDA
    suite's compiled test, and each case's model (tests/headcases.py) trains what it stands
    for: a kind added without a case would keep every slice that trains it eager, one listed
    under a case that does not train it would let a slice compile on a proof of something
    else. stock_decoder's encoder is plain (one group, no mixer: the 8L baselines' layer) and
    its decoder OpenNMT-py's; OpenNMT-py's encoder has no case."""
    import headcases

    from headlab.heads.spec import HEAD_KINDS, HEAD_MIXERS, kinds_used, parse_spec

    listed = {kind for kinds in gpu_measures.COMPILED_KINDS.values() for kind in kinds}
    assert listed == {*HEAD_KINDS, *HEAD_MIXERS, gpu_measures.STOCK_DECODER}
    for case, kinds in gpu_measures.COMPILED_KINDS.items():
        specs = headcases.CASES[case]
        if specs.get("decoder_type") == "transformer":
            trained = kinds_used(specs["enc_heads"]) | {gpu_measures.STOCK_DECODER}
        else:
            trained = kinds_used(f"{specs['enc_heads']}@dec={specs['dec_heads']}@cross={specs['cross_heads']}")
        assert set(kinds) <= trained, case
    plain = parse_spec(headcases.CASES["stock_decoder"]["enc_heads"], 2)
    assert all(len(layer.terms) == 1 and not layer.mixers for layer in plain)


def test_the_compiled_cases_the_plan_reads_are_those_the_cuda_suite_runs():
    """gpu_measures.COMPILED_CASES names the CUDA suite's compiled cases as a sitting's
    cuda-suite.csv will: a case renamed, added or dropped in tests/gpu/test_gpu.py without it
    would leave the slices of its kinds off, or judged by fewer cases."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                             "tests/gpu/test_gpu.py", "-k", "test_the_compiled_model_trains_as_the_eager_one"],
                            cwd=gpu_plan.PUBLISHED.parents[1], capture_output=True, text=True, timeout=300)
    collected = [line for line in result.stdout.splitlines() if "::" in line]
    assert result.returncode == 0 and len(collected) == 5
    assert [line for line in collected if "[cuda-" in line] == list(gpu_measures.COMPILED_CASES)


def test_a_compile_key_that_decides_no_ready_slice_still_names_a_measured_mode():
    """A slice not ready, or sitting.compile where every ready slice has its own: not weighed
    (no sitting of theirs is next), but a mode no probe measured is still a stale line."""
    shipped = gpu_plan.load()
    measure = gpu_measures.CompileMeasured("A-T1-deep/x", "2026-12-01 10:00:00 UTC", "h100", "default", 100.0, 50.0,
                                           60.0, suite=_proven())

    def plan_with(**by_slice) -> gpu_plan.Plan:
        slices = [{**entry, **by_slice.get(entry["name"], {})} for entry in shipped.data["slices"]]
        return gpu_plan.Plan({**shipped.data, "slices": slices}, shipped.path)

    resting = plan_with(**{"A-lowres": {"ready": False, "compile": "reduce-overhead"}})
    assert gpu_compile.stale_compile(resting, None) == [
        "slices.A-lowres.compile: the plan says reduce-overhead, and no published sitting's probe has compiled its "
        "model: off until one has measured what it buys"]
    assert gpu_compile.stale_compile(resting, measure)[-1] == (
        "slices.A-lowres.compile: the plan says reduce-overhead, and the newest compiled probe (A-T1-deep/x) "
        "measured default: set off")
    assert not any(line.startswith("slices.A-lowres") for line in
                   gpu_compile.stale_compile(plan_with(**{"A-lowres": {"ready": False, "compile": "default"}}), measure))
    # every ready slice on its own key (each as the probe wants it): sitting.compile decides none
    own = plan_with(**{entry["name"]: {"compile": "default"} for entry in shipped.data["slices"]})
    assert gpu_compile.stale_compile(own, measure) == []
    other = gpu_plan.Plan({**own.data, "sitting": {**own.sitting, "compile": "max-autotune-no-cudagraphs"}}, own.path)
    assert gpu_compile.stale_compile(other, measure) == [
        "sitting.compile: the plan says max-autotune-no-cudagraphs, and the newest compiled probe (A-T1-deep/x) "
        "measured default: set off"]


def test_a_compiled_slice_reaches_the_steps_the_plans_compiled_figures_give_and_reopens_its_seeds(tmp_path):
    """throughput.compiled {default, 2x, 60 s}: A-T1-deep compiled steps 420 s less 60 s of
    compile at twice 1 / 0.135 s: int(420 / 0.135 x 360 x 2 / 420) = 5,333 steps a sitting,
    not 3,111; its seed trained eager to 3,000 steps (at its limit eager: 3,000 x 1.1 > 3,111)
    is short of convergence again. D, on its own key off, reaches what it did."""
    compiled_figures = ("  prepare_s: 10\n", "  prepare_s: 10\n  compiled: {mode: default, speedup: 2.0, compile_s: 60}\n")
    sitting = ("  eval_reserve_s: 110\n", "  eval_reserve_s: 110\n  compile: default\n")
    d_off = ("  - name: D-gates-8L\n", "  - name: D-gates-8L\n    compile: off\n")
    shipped = gpu_plan.load()
    plan = gpu_plan.load(_plan_with(tmp_path, compiled_figures, sitting, d_off))
    a_slice, eager_a = plan.slice("A-T1-deep"), shipped.slice("A-T1-deep")
    assert a_slice.compile_gain == pytest.approx(360 * 2 / 420) and eager_a.compile_gain == 1.0
    assert (eager_a.steps_in_window, a_slice.steps_in_window) == (3111, 5333)
    assert plan.slice("D-gates-8L").steps_in_window == shipped.slice("D-gates-8L").steps_in_window
    # figures for another mode than the slice's: counted eager
    other = gpu_plan.load(_plan_with(tmp_path, compiled_figures, ("  eval_reserve_s: 110\n",
                                                                   "  eval_reserve_s: 110\n  compile: reduce-overhead\n")))
    assert other.slice("A-T1-deep").steps_in_window == 3111

    published = tmp_path / "published"
    _publish(published, "A-T1-deep", "2026-11-28-h100-aaaaaaa", {1: "deadline"}, eager_a.rows,
             dict.fromkeys(eager_a.heads, 3000))
    assert gpu_plan.seed_states(eager_a, published).at_limit == [1]
    assert gpu_plan.seed_states(a_slice, published).short == [1]

    # the figures against the newest compiled probe (2x after 60 s)
    _compiled_probe(published, "2026-12-01-h100-bbbbbbb", "2026-12-01 10:00:00 UTC", 100.0, 50.0, 60.0)
    measure = gpu_measures.measured_compile(published)
    assert gpu_compile.stale_compiled_figures(plan, measure) == []
    lacking = gpu_plan.load(_plan_with(tmp_path, sitting, d_off))
    described = ("the sitting A-T1-deep/2026-12-01-h100-bbbbbbb's probe ran its model compiled (default) 2.00x as "
                 "fast as eager (50 against 100 ms a step alone) after 60 s of compile")
    assert gpu_compile.stale_compiled_figures(lacking, measure) == [
        f"throughput.compiled: the plan says nothing, and a ready slice compiles in default; {described}: write "
        f"{{mode: default, speedup: 2.00, compile_s: 60}}"]
    assert gpu_compile.stale_compiled_figures(shipped, measure) == []        # nothing compiles: nothing to write
    slower = gpu_plan.load(_plan_with(tmp_path, (compiled_figures[0], compiled_figures[1].replace("2.0", "1.7")),
                                      sitting, d_off))
    assert gpu_compile.stale_compiled_figures(slower, measure) == [
        f"throughput.compiled: the plan says {{mode: default, speedup: 1.7, compile_s: 60}}; {described}: write "
        f"{{mode: default, speedup: 2.00, compile_s: 60}}"]
    assert gpu_plan.stale_throughput(slower, published)[-1].startswith("throughput.compiled: ")
    # a probe stopped after 150 s compiling: 60 s written is under that lower bound; 140 s is within 10%
    cut = gpu_measures.CompileMeasured("A-T1-deep/z", "2026-12-02 10:00:00 UTC", "h100", "default", 100.0, None, 150.0,
                                       suite=_proven())
    assert gpu_compile.stale_compiled_figures(plan, cut) == [
        "throughput.compiled: the plan says compile_s 60; the sitting A-T1-deep/z's probe was stopped after 150 s "
        "compiling its model (default): write compile_s 150 at least"]
    within = gpu_plan.load(_plan_with(tmp_path, (compiled_figures[0], compiled_figures[1].replace("60", "140")),
                                      sitting, d_off))
    assert gpu_compile.stale_compiled_figures(within, cut) == []
    # a compile longer than the window: no steps compiled; whether it fits is judged eager, as the runner does
    long = gpu_plan.load(_plan_with(tmp_path, (compiled_figures[0], compiled_figures[1].replace("60", "500")),
                                    sitting, d_off))
    assert long.slice("A-T1-deep").steps_in_window == 0 and long.slice("A-T1-deep").fits
    assert long.slice("A-T1-deep").eager_steps_in_window == 3111
    bad = _plan_with(tmp_path, ("  prepare_s: 10\n", "  prepare_s: 10\n  compiled: {mode: off, speedup: 2, compile_s: 1}\n"))
    with pytest.raises(ConfigError, match=r"\[mode\]"):
        gpu_plan.load(bad)


def test_a_compiled_trainings_clock_is_no_measure_of_the_plans_eager_steps(tmp_path):
    """seconds_per_step are eager (a slice may train eager where others compile): a newer
    sitting whose trainings compiled (70 ms a step side by side) leaves the eager 130 ms of
    three side by side measured before; its probe alone (eager, 100 ms; validation and
    checkpoints 10% of its training's 70 ms: 107 ms) and its start-up (to the first batch,
    before the compile) count."""
    eager = {"8L": 130.0, "7Ftoken+1L": 130.0, "8Ftoken": 130.0}
    _clock(tmp_path, "A-T1-deep", "2026-12-01-h100-aaaaaaa", "2026-12-01 10:00:00 UTC", eager, 55)
    compiled = {model: {"train_compile": "default"} for model in eager}
    compiled["8L"].update(step_ms_alone=100.0, validation_share=0.1)
    _clock(tmp_path, "A-T1-deep", "2026-12-02-h100-bbbbbbb", "2026-12-02 10:00:00 UTC",
           {model: 70.0 for model in eager}, 58, compiled)
    measured = gpu_measures.measured_speed(tmp_path)
    assert measured[3] == gpu_measures.Measured("A-T1-deep/2026-12-01-h100-aaaaaaa", "2026-12-01 10:00:00 UTC",
                                                "h100", 3, 0.13, 55)
    assert measured[1].sitting == "A-T1-deep/2026-12-02-h100-bbbbbbb" and measured[1].probe
    assert measured[1].step_s == pytest.approx(0.107) and measured[1].startup_s == 58
    assert gpu_plan.stale_throughput(gpu_plan.load(), tmp_path) == []
    # the same sitting trained eager (an empty train_compile: before the column, or off) is one
    for folder in ("2026-12-03-h100-ccccccc", "2026-12-04-h100-ddddddd"):
        mode = {"2026-12-03-h100-ccccccc": "", "2026-12-04-h100-ddddddd": "off"}[folder]
        _clock(tmp_path, "A-T1-deep", folder, f"2026-12-0{folder[9]} 10:00:00 UTC", {model: 70.0 for model in eager},
               55, {model: {"train_compile": mode} for model in eager})
        assert gpu_measures.measured_speed(tmp_path)[3].step_s == 0.07


def test_a_plans_compile_mode_is_checked_against_headlab_trains(tmp_path):
    from headlab.engine.opts import COMPILE_MODES

    import yaml

    schema = yaml.safe_load(gpu_plan.SCHEMA.read_text())
    assert set(schema["definitions"]["compile"]["enum"]) - {False} == set(COMPILE_MODES)
    assert schema["properties"]["sitting"]["properties"]["compile"]["$ref"] == "#/definitions/compile"
    assert schema["properties"]["slices"]["items"]["properties"]["compile"]["$ref"] == "#/definitions/compile"
    path = _bad_plan(tmp_path, "  - name: C-core-base\n", "  - name: C-core-base\n    compile: max-autotune\n")
    with pytest.raises(ConfigError) as caught:
        gpu_plan.load(path)
    number = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if text == "    compile: max-autotune")
    assert str(caught.value).startswith(f"{path}:{number}: [compile] ") and "\n" not in str(caught.value)
    path = _bad_plan(tmp_path, "  eval_reserve_s: 110\n", "  eval_reserve_s: 110\n  compile: fast\n")
    with pytest.raises(ConfigError) as caught:
        gpu_plan.load(path)
    number = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if text == "  compile: fast")
    assert str(caught.value).startswith(f"{path}:{number}: [compile] ") and "\n" not in str(caught.value)
