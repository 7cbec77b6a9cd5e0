"""The shipped GPU plan's slices of papers B, C and D, published as their sittings would write
them (the plan's own rows, heads, pair and layers), land beside the toy rows of the shipped
config's tables and are judged with the toy claims' tests (effects.csv, ``scale`` column)."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from headlab.workflow import gpu_plan

REPO = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((REPO / "config/config.yaml").read_text())
TEST = "test_2016_flickr"
#: 120 sentences; a system "drops" the last word of every other one (a worse system)
LINES = [f"a man number {index} rides a red bicycle down the long street" for index in range(120)]


def _translation(drops: bool, seed: int) -> str:
    return "\n".join(" ".join(line.split()[:-1 - (index + seed) % 2]) if drops else line
                     for index, line in enumerate(LINES)) + "\n"


def publish(root: Path, slice_name: str, bleu: dict[str, float], worse: set[str], seeds=(1, 2, 3)) -> list[dict]:
    """A sitting of the shipped plan's slice per seed: each of its (row, heads) converged, named
    as the bundle names the sitting's models (one per row), BLEU ``bleu[row]`` (+ seed / 10),
    and a translation exact but for the rows in ``worse``. Returns the rows written."""
    found = gpu_plan.load().slice(slice_name)
    entry, written = found.entry, []
    for seed in seeds:
        sitting = f"2026-12-0{seed}-h100-abc123{seed}"
        folder = root / slice_name / sitting
        folder.mkdir(parents=True)
        rows = []
        for number, (row, heads) in enumerate(sorted(found.rows)):
            model = f"m{number}"
            (folder / f"{model}.{TEST}.txt").write_text(_translation(row in worse, seed))
            value = bleu[row] + seed / 10
            rows.append({"slice": slice_name, "sitting": sitting, "study": entry["study"], "table": entry["table"],
                         "row": row, "heads": heads, "model": model, "layers": entry["layers"], "pair": entry["pair"],
                         "seed": seed, "test": TEST, "step": 2400, "best_step": 2200, "stop_reason": "patience",
                         "status": "converged", "bleu": value, "bleu_ci_low": value - 1.5,
                         "bleu_ci_high": value + 1.5, "chrf": 50, "gpu": "NVIDIA H100", "commit": "abc1234",
                         "date": sitting[:10], "selected_by": "lowest validation cross-entropy"})
        with open(folder / "rows.csv", "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=gpu_plan.ROW_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        # the plan's check of a received sitting passes on what this fixture writes
        gpu_plan.check_rows_in_plan(found, folder / "rows.csv")
        written += rows
    return written


def _fake(inputs, root: Path, toy_bleu: float = 25.0) -> None:
    """The toy outputs the builders read: scores, parameter counts, an empty bootstrap (n/a
    marks), and every translation and reference as the same sentences."""
    for file in map(str, inputs):
        if file.startswith(str(root)):
            continue
        Path(file).parent.mkdir(parents=True, exist_ok=True)
        if file.endswith(".json"):
            Path(file).write_text(json.dumps({"bleu": toy_bleu, "params": 400_000}))
        elif file.endswith(".csv"):
            Path(file).write_text("system,win_system,p_value,significantly_higher\n")
        else:
            Path(file).write_text("\n".join(LINES) + "\n")


def _files(module, tmp_path, root, study):
    return module.Files(CONFIG, CONFIG["studies"][study], str(tmp_path / "results"), published=str(root))


def test_paper_Cs_core_slice_lands_in_its_pairs_bleu_row_under_each_systems_column(tmp_path):
    """C-core-base's four systems are the columns of Table 1 (as the toy systems are), on
    a GPU row of its pair's BLEU: never a row per system with a column per head spec."""
    from headlab.studies.paper_C import outputs

    root = tmp_path / "published"
    bleu = {"Transformer": 30.0, "+DEA": 31.0, "+LPEA": 31.5, "+LPEA+RHE": 32.0}
    publish(root, "C-core-base", bleu, worse={"Transformer"})
    files = _files(outputs, tmp_path, root, "paper_C")
    inputs, build = outputs.t1(files)
    _fake(inputs, root)
    table, tidy = build()
    values = table.values
    gpu = "multi30k en-de BLEU (GPU C-core-base)"
    toy_columns = [column for column in values.columns if column != "scale"]
    assert list(values.index[:2]) == ["multi30k en-de BLEU", "multi30k en-de #Para (K)"]
    for system, value in bleu.items():
        assert values.loc[gpu, f"{system} ours"] == pytest.approx(value + 0.2)      # the mean of seeds 1-3
    assert set(toy_columns) == {f"{system} {side}" for system in outputs.T1_SYSTEMS for side in ("ours", "paper")}
    # one row, four systems: its scale names each system's seeds and interval
    scale = values.loc[gpu, "scale"]
    assert scale.startswith("GPU base: C-core-base; Transformer: seeds 1, 2, 3, converged ×3 at steps 2,200, ")
    assert [part.split(":")[0] for part in scale.split("; ", 1)[1].split(" / ")] == list(bleu)
    assert "+LPEA+RHE: seeds 1, 2, 3, converged ×3" in scale and scale.count("95% t interval of the mean [") == 4
    gpu_tidy = tidy[tidy["scale"] != "toy"]
    assert set(gpu_tidy["column"]) == set(bleu) and set(gpu_tidy["row"]) == {gpu}


def test_paper_Cs_claims_judge_the_core_slice_in_one_family_with_the_toy_claims(tmp_path):
    from headlab.studies.paper_C import claims

    root = tmp_path / "published"
    publish(root, "C-core-base", {"Transformer": 30.0, "+DEA": 31.0, "+LPEA": 31.5, "+LPEA+RHE": 32.0},
            worse={"Transformer"})
    files = _files(claims, tmp_path, root, "paper_C")
    inputs, build = claims.effects(files)
    assert {str(file) for file in root.glob(f"*/*/*.{TEST}.txt")} <= set(inputs)
    _fake(inputs, root)
    frame = build()
    assert list(frame.columns[:4]) == ["study", "claim", "compared", "scale"]
    gpu = frame[frame["scale"] != "toy"].set_index("compared")
    # the slice trains no +DEA+RHE: §5.2's DEA claim is the toy runs' only
    assert sorted(gpu.index) == ["+LPEA+RHE − +LPEA (GPU base C-core-base, en-de, 6+6)",
                                 "+LPEA+RHE − Transformer (GPU base C-core-base, en-de, 6+6)"]
    beats = gpu.loc["+LPEA+RHE − Transformer (GPU base C-core-base, en-de, 6+6)"]
    assert beats["seeds"] == 3 and beats["verdict"] == "holds" and beats["ours"] > 0
    lifts = gpu.loc["+LPEA+RHE − +LPEA (GPU base C-core-base, en-de, 6+6)"]
    assert lifts["ours"] == 0 and lifts["verdict"] == "inconclusive at this scale"     # the same translations
    assert gpu["p_adjusted"].notna().all() and frame["p_value"].notna().sum() > len(gpu)   # Holm over both


def test_paper_Bs_slice_lands_in_its_pairs_row_and_its_headline_is_judged(tmp_path):
    from headlab.studies.common import stage_file
    from headlab.studies.effects import Judge
    from headlab.studies import published
    from headlab.studies.paper_B import claims, grid, outputs

    root = tmp_path / "published"
    publish(root, "B-base-dhicm", {"T-base": 34.0, "DHICM": 35.0}, worse={"T-base"})
    study = CONFIG["studies"]["paper_B"]
    for stage in grid.STAGES:
        path = Path(stage_file(str(tmp_path / "results"), grid.OUTDIR, "multi30k", "de-en", stage))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"chosen": {key: values[0] for block in study["grid"].values()
                                               for key, values in block.items()}}))
    files = _files(outputs, tmp_path, root, "paper_B")
    inputs, build = outputs.t3(files)
    _fake(inputs, root)
    table, _ = build()
    gpu = "multi30k de-en (GPU B-base-dhicm)"
    assert table.values.loc[gpu, "T-base ours"] == pytest.approx(34.2)
    assert table.values.loc[gpu, "DHICM ours"] == pytest.approx(35.2)
    assert table.values.loc[gpu, "scale"].startswith("GPU base: B-base-dhicm; T-base: seeds 1, 2, 3, converged ×3")
    assert " / DHICM: seeds 1, 2, 3, converged ×3" in table.values.loc[gpu, "scale"]
    assert {column for column in table.values.columns if column != "scale"} == {
        f"{system} {side}" for system in grid.SYSTEMS for side in ("ours", "paper")}

    reference = tmp_path / "ref.txt"
    reference.write_text("\n".join(LINES) + "\n")
    judge = Judge("paper_B", 200)
    scales = claims.judge_published(judge, files, published.read(str(root)), lambda pair, test: str(reference))
    row = judge.frame().set_index("compared").loc["DHICM − T-base (GPU base B-base-dhicm, de-en, 6+6)"]
    assert row["claim"] == claims.HEADLINE and row["verdict"] == "holds" and row["seeds"] == 3
    assert list(scales.values()) == ["GPU base: B-base-dhicm, seeds 1, 2, 3, converged"]


def test_paper_Ds_chain_is_judged_on_each_rows_own_translation(tmp_path):
    """D-gates-8L's rows share their parent's heads (8L): each claim scores each row's own
    model's translation. Here only the pruned fine-tune is worse: the claims comparing it
    fail or hold as its rows say, those without it are level."""
    from headlab.studies import published
    from headlab.studies.effects import Judge
    from headlab.studies.paper_D import claims, outputs

    root = tmp_path / "published"
    rows = publish(root, "D-gates-8L", dict.fromkeys(
        ["Baseline (converged)", "Pruned (converged)", "Non-inverted (fine-tuned)", "Non-inverted (initial)",
         "Baseline (fine-tuned, no pruning)"], 30.0), worse={"Non-inverted (fine-tuned)"})
    assert {row["heads"] for row in rows} == {"8L"}
    reference = tmp_path / "ref.txt"
    reference.write_text("\n".join(LINES) + "\n")
    files = _files(outputs, tmp_path, root, "paper_D")
    judge = Judge("paper_D", 200)
    claims.judge_published(judge, files, published.read(str(root)), lambda pair, test: str(reference))
    frame = judge.frame().set_index("claim")
    texts = [text for text, *_ in claims.T3_CLAIMS]
    # the inverted fine-tunes are not in the slice: their two claims are the toy runs' only
    assert sorted(frame.index) == sorted(texts[:3])
    kept = frame.loc[texts[0]]          # Pruned − 0.9 × control: both exact, 10% of 100 BLEU to spare
    assert kept["compared"].endswith("(GPU base D-gates-8L, en-de, 6+6)") and kept["verdict"] == "holds"
    within = frame.loc[texts[1]]        # fine-tuned (worse) − 0.95 × initial (exact)
    assert within["ours"] < 0 and within["verdict"] == "reversed"
