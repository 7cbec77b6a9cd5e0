"""``headlab atlas-index``: the head atlas's explorer and its agreement table and figure.

    headlab atlas-index --results DIR --config-json JSON --out DIR/atlas [--published results/published]

Reads every characterised model's ``heads.csv`` and ``examples.json``
(:mod:`headlab.atlas.model`), and with ``--published`` every GPU sitting's
(:mod:`headlab.atlas.published`: models of their own, ``GPU <slice> <sitting> <model>``,
in the group "GPU sittings"), and writes under ``--out``:

* ``explorer/``: ``index.html`` (the catalog of every model of the run by study, inline),
  ``explorer.js`` / ``explorer.css`` (written here, no library) and ``data/mNNNN.js``, one
  file per characterised model, loaded by a ``<script>`` element when the model is chosen
  (browsers block ``fetch()`` of ``file://``; nothing is loaded from the network);
* ``index.html``: the same page with ``<base href="explorer/">``, to open from the atlas
  folder (the explorer folder alone is what the Snakemake report embeds). The catalog
  carries each criterion's one colour scale over every model (:func:`scales`), the pooled
  agreement and the claims; each model's file its rank agreement of every pair of criteria
  (:func:`headlab.atlas.agree.model_pairs`), for the page's agreement view;
* ``agreement.csv`` / ``.md``: Spearman's rho between criteria per study and over all
  models, with bootstrap intervals; ``claims.csv`` / ``.md``: the papers' claims that are
  agreements in disguise (:mod:`headlab.atlas.agree`); ``agreement.png`` / ``.pdf``: the
  pooled correlation matrix beside the claims' intervals.
"""
from __future__ import annotations

import argparse
import json
import math
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from headlab.io import atomic_write

ASSETS = ("explorer.js", "explorer.css")
PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
{base}<title>headlab head atlas</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="explorer.css">
</head>
<body>
<header>
<h1>headlab head atlas</h1>
<label>colour by <select id="criterion"></select></label>
<span id="status"></span>
</header>
<p class="note">Every head of every model by every criterion (heads.csv under the atlas folder). Two models side
by side, one colour scale per criterion for every model and panel, the more important end always on the right
of the legend (bright, or red on a diverging scale); grey: the criterion is not defined for that head. Badges:
F fixed pattern, g gated, D DHICM-mixed, × pruned, first letter of other kinds. Below each model's grids: any
two criteria against each other, head by head. <a href="../agreement.png">Agreement over all models</a>.</p>
<div id="legend"></div>
<div id="panels">
<div class="panel" id="panel-0"><select class="model"></select><div class="body"></div></div>
<div class="panel" id="panel-1"><select class="model"></select><div class="body"></div></div>
</div>
<section id="claims"><h2>The papers' claims as agreements</h2></section>
<script>window.ATLAS_CATALOG = {catalog};</script>
<script src="explorer.js"></script>
</body>
</html>
"""


def _clean(value):
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(f"{value:.4g}")
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def payload(path: str, studies: list[str], heads: pd.DataFrame, examples: dict) -> dict:
    """One model's data file content: the head table, the example sentences and the rank
    agreement of every pair of criteria over its heads."""
    from headlab.atlas.agree import model_pairs

    sites = {site: {"layers": int(g["layer"].max()), "heads": int(g["head"].max())}
             for site, g in heads.groupby("site", sort=False)}
    rows = [[_clean(v) for v in row] for row in heads.itertuples(index=False)]
    return {"path": path, "studies": studies, "sentences": int(heads["sentences"].max()),
            "columns": list(heads.columns), "rows": rows, "sites": sites, "examples": examples["sentences"],
            "pairs": [{k: _clean(v) for k, v in pair.items()} for pair in model_pairs(heads)]}


#: the share of heads beyond each end of a sequential scale (their colour is the end's): one
#: extreme head would otherwise leave every other one in the scale's first shades
CLIP = 2.0
#: a positive sequential scale whose ends differ by this factor or more is logarithmic: the
#: value norm and the gradient of 36 models pooled span decades, and on a linear scale the
#: encoder heads (1-2 of a top near 10) all sat in its darkest quarter
LOG_SPAN = 10.0
#: criteria that a switched-off head still sets: a closed gate is what ``gate`` shows
SWITCH_CRITERIA = ("gate",)


def switched_off(heads: pd.DataFrame) -> pd.Series:
    """Heads whose output is switched off: pruned (a head mask) or behind a closed L0 gate
    (``gate_kept`` false). Their value norm and gradient are about 0 and would set the low
    end of every scale, so they are left out of the ranges (their cells take the end's
    colour)."""
    pruned = heads["pruned"].astype(str).str.lower().isin(("true", "1")) if "pruned" in heads else False
    closed = heads["gate_kept"].astype(str).str.lower().isin(("false", "0", "0.0")) if "gate_kept" in heads else False
    return pd.Series(pruned, index=heads.index) | pd.Series(closed, index=heads.index)


def scales(heads: pd.DataFrame) -> dict[str, dict]:
    """Per criterion of :data:`headlab.atlas.agree.CRITERIA`, how to read it and its one
    colour scale over every head of every characterised model: ``lo``, ``hi`` in oriented
    units (value × ``important``, so that more important is always higher; ``important`` 0
    keeps the value), the CLIP-th to (100 - CLIP)-th percentile; a signed criterion gets
    -m..m around 0 (m: the (100 - CLIP)-th percentile of |value|), a diverging scale.
    Switched-off heads (:func:`switched_off`) do not set a range but for ``gate``. ``log``:
    a sequential scale with important >= 0 whose ends are positive and LOG_SPAN apart or more
    is read on a log axis. Per-head-index criteria count each index once."""
    from dataclasses import asdict

    from headlab.atlas.agree import CRITERIA

    out, off = {}, switched_off(heads)
    for name, criterion in CRITERIA.items():
        entry = {**asdict(criterion), "lo": None, "hi": None, "log": False}
        out[name] = entry
        if name not in heads:
            continue
        kept = heads if name in SWITCH_CRITERIA else heads[~off]
        frame = kept.assign(value=pd.to_numeric(kept[name], errors="coerce")).dropna(subset=["value"])
        if criterion.unit == "head index":
            frame = frame.drop_duplicates(["model", "head"])
        oriented = frame["value"].to_numpy(dtype=float) * (criterion.important or 1)
        if not len(oriented):
            continue
        if criterion.signed:
            m = float(np.percentile(np.abs(oriented), 100 - CLIP)) or float(np.abs(oriented).max()) or 1.0
            entry["lo"], entry["hi"] = -m, m
        else:
            lo, hi = (float(v) for v in np.percentile(oriented, [CLIP, 100 - CLIP]))
            if hi <= lo:
                lo, hi = float(oriented.min()), float(oriented.max())
            entry["lo"], entry["hi"] = lo, hi
            entry["log"] = bool(criterion.important >= 0 and lo > 0 and hi >= LOG_SPAN * lo)
    return out


def _script_json(data) -> str:
    """JSON safe inside a <script> element."""
    return json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")


def write_explorer(out: Path, models: list[dict], data: dict[str, dict], studies: list[str], criteria: dict,
                   agreement: pd.DataFrame | None = None, claims: pd.DataFrame | None = None) -> dict:
    """The explorer under ``out`` (module doc); ``models``: [{path, studies}] of the run,
    ``data``: path -> payload of the characterised ones, ``criteria``: :func:`scales`,
    ``agreement`` / ``claims``: the pooled tables shown beside each model's own. Returns
    {path: bytes of its file}."""
    explorer = out / "explorer"
    (explorer / "data").mkdir(parents=True, exist_ok=True)
    entries, sizes = [], {}
    for number, m in enumerate(models, 1):
        ident = f"m{number:04d}"
        entry = {"id": ident, "path": m["path"], "label": m["path"], "studies": m["studies"], "file": None}
        if m["path"] in data:
            entry["file"] = f"data/{ident}.js"
            text = f"ATLAS_ADD({json.dumps(ident)},{_script_json(data[m['path']])});\n"
            with atomic_write(explorer / entry["file"]) as handle:
                handle.write(text)
            sizes[m["path"]] = len(text.encode())
        entries.append(entry)
    for name in ASSETS:
        with atomic_write(explorer / name) as handle:
            handle.write(resources.files("headlab.report").joinpath(name).read_text(encoding="utf-8"))
    pooled = [] if agreement is None else agreement[agreement["group"] == "all"]
    catalog = _script_json({"models": entries, "studies": studies, "criteria": criteria,
                            "agreement": _records(pooled, ["a", "b", "units", "n", "models", "rho", "low", "high"]),
                            "claims": _records(claims, ["claim", "paper", "a", "b", "compares", "expected", "rows",
                                                        "units", "n", "models", "rho", "low", "high", "verdict"])})
    for path, base in ((explorer / "index.html", ""), (out / "index.html", '<base href="explorer/">\n')):
        with atomic_write(path) as handle:
            handle.write(PAGE.replace("{base}", base).replace("{catalog}", catalog))
    return sizes


def _records(frame, columns: list[str]) -> list[dict]:
    if frame is None or not len(frame):
        return []
    return [{c: _clean(row.get(c)) for c in columns} for row in frame.to_dict("records")]


# -- agreement ------------------------------------------------------------------------------

def _tables(agreement: pd.DataFrame, claims: pd.DataFrame, out: Path) -> None:
    from headlab.studies.tables import Table
    from headlab.report.tables import to_markdown

    with atomic_write(out / "agreement.csv") as handle:
        agreement.to_csv(handle, index=False)
    with atomic_write(out / "claims.csv") as handle:
        claims.to_csv(handle, index=False)
    shown = agreement.assign(row=agreement["group"] + ": " + agreement["a"] + " ~ " + agreement["b"]
                             + " (per " + agreement["units"] + ")").set_index("row")
    table = Table(shown[["n", "models", "rho", "low", "high"]].astype(float), decimals=2,
                  column_decimals={"n": 0, "models": 0}, best=None, index_name="criteria",
                  caption="Spearman's rho between head criteria (95% percentile bootstrap over the units, 1000 "
                          "resamples), per study and over all atlas models; pruned heads left out. n: distinct "
                          "units, heads, or head indices where a criterion is per head index (ΔBLEU: head k "
                          "disabled in every layer; the other criterion averaged over the layers).")
    with atomic_write(out / "agreement.md") as handle:
        handle.write(to_markdown(table))
    rows = claims.assign(row=claims["claim"] + " (" + claims["paper"] + "; " + claims["a"] + " ~ " + claims["b"]
                         + ": " + claims["compares"] + ", expected " + claims["expected"] + "): "
                         + claims["verdict"]).set_index("row")
    table = Table(rows[["n", "models", "rho", "low", "high"]].astype(float), decimals=2,
                  column_decimals={"n": 0, "models": 0}, best=None, index_name="claim",
                  caption="The papers' claims that two criteria agree: Spearman's rho over the heads the claim "
                          "is about, 95% bootstrap interval; agrees / contradicts: the interval excludes 0 on the "
                          "claimed / the other side, undecided: it holds 0.")
    with atomic_write(out / "claims.md") as handle:
        handle.write(to_markdown(table))


def figure(agreement: pd.DataFrame, claims: pd.DataFrame, prefix: Path) -> None:
    """Left: rho over all models for every pair of criteria; right: each claim's rho and interval."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from headlab.atlas.agree import BOOTSTRAP, CORRELATED
    from headlab.report.figures import save

    pooled = agreement[agreement["group"] == "all"]
    names = [c for c in CORRELATED if c in set(pooled["a"]) | set(pooled["b"])]
    matrix = pd.DataFrame(np.nan, index=names, columns=names)
    for r in pooled.itertuples():
        matrix.loc[r.a, r.b] = matrix.loc[r.b, r.a] = r.rho
    for n in names:
        matrix.loc[n, n] = 1.0
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.5), gridspec_kw={"width_ratios": [1.1, 1]})
    if names:
        image = left.imshow(matrix.to_numpy(dtype=float), vmin=-1, vmax=1, cmap="RdBu_r")
        left.set_xticks(range(len(names)), names, rotation=60, ha="right")
        left.set_yticks(range(len(names)), names)
        for i in range(len(names)):
            for j in range(len(names)):
                v = matrix.iloc[i, j]
                if not math.isnan(v):
                    left.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7)
        fig.colorbar(image, ax=left, shrink=0.7, label="Spearman's rho")
    else:
        left.text(0.5, 0.5, "no pair of criteria with enough heads", ha="center", transform=left.transAxes)
    left.set_title("criteria over all atlas heads")
    y = np.arange(len(claims))
    for i, c in enumerate(claims.itertuples()):
        colour = {"agrees": "tab:green", "contradicts": "tab:red"}.get(c.verdict, "tab:gray")
        # the interval as it is, low to high: a percentile bootstrap interval need not hold rho
        if not (math.isnan(c.low) or math.isnan(c.high)):
            right.hlines(i, c.low, c.high, colors=colour)
            right.plot([c.low, c.high], [i, i], linestyle="none", marker="|", markersize=8, color=colour)
        if not math.isnan(c.rho):
            right.plot(c.rho, i, "o", color=colour)
    right.axvline(0, color="k", lw=0.8)
    right.set_yticks(y, [f"{c.claim}\n({c.paper}; {c.a} ~ {c.b}, expect {c.expected}): {c.verdict}"
                         + (f"\n{c.compares}" if isinstance(getattr(c, "compares", None), str) else "")
                         for c in claims.itertuples()], fontsize=8)
    right.set_xlim(-1, 1)
    right.invert_yaxis()
    right.set_xlabel(f"Spearman's rho (dot)\nbar: 95% percentile bootstrap interval over heads ({BOOTSTRAP} "
                     "resamples), which need not contain rho")
    right.set_title("the papers' claims as agreements")
    fig.tight_layout()
    save(fig, str(prefix))


def build(config: dict, root: str, out: str, published: str | None = None) -> dict:
    """Write everything of the module doc; returns {model path: bytes of its data file}.
    ``published``: the GPU sittings' tree, whose head tables join as models of their own
    (:mod:`headlab.atlas.published`)."""
    from headlab.atlas import published as gpu
    from headlab.atlas.agree import agreement, claims
    from headlab.atlas.model import COLUMNS
    from headlab.atlas.select import model_dir, run_models, selected

    out_dir = Path(out)
    models = run_models(config, root)
    chosen = selected(config, root)
    data, frames = {}, []
    for path, entry in chosen.items():
        folder = Path(model_dir(root, entry["model"]))
        heads = pd.read_csv(folder / "heads.csv")
        examples = json.loads((folder / "examples.json").read_text(encoding="utf-8"))
        data[path] = payload(path, entry["studies"], heads, examples)
        frames.append(heads)
    listing = [{"path": p, "studies": e["studies"]} for p, e in models.items()]
    studies = {p: e["studies"] for p, e in chosen.items()}
    groups = list(config["studies"])
    for name, entry in (gpu.read(published) if published else {}).items():
        data[name] = payload(name, [gpu.STUDY], entry["heads"], entry["examples"])
        frames.append(entry["heads"])
        listing.append({"path": name, "studies": [gpu.STUDY]})
        studies[name] = [gpu.STUDY]
        groups += [gpu.STUDY] if gpu.STUDY not in groups else []
    heads = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    agree, said = agreement(heads, studies), claims(heads)
    sizes = write_explorer(out_dir, listing, data, groups, scales(heads), agree, said)
    _tables(agree, said, out_dir)
    figure(agree, said, out_dir / "agreement")
    return sizes


def main(argv: list[str]) -> int:
    from headlab.studies import merge_config

    parser = argparse.ArgumentParser(prog="headlab atlas-index", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", required=True, help="the workflow's results folder")
    parser.add_argument("--config-json", required=True, action="append", help="the workflow's config as JSON (repeatable: merged in order)")
    parser.add_argument("--out", required=True, help="the atlas folder to write (index.html, data)")
    parser.add_argument("--published", default=None,
                        help="the GPU sittings' tree whose atlas/<model>/heads.csv join the atlas (results/published)")
    args = parser.parse_args(argv)
    sizes = build(merge_config(args.config_json), args.results, args.out, args.published)
    total = sum(sizes.values())
    print(f"{args.out}/index.html: {len(sizes)} characterised models, data {total / 1e6:.2f} MB "
          f"(largest {max(sizes.values(), default=0) / 1e3:.0f} kB)")
    return 0
