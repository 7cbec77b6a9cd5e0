"""The atlas explorer in a real browser: Debian's headless Chromium driven by selenium
through Debian's chromedriver (no browser download at run time), the page opened from
file:// with every network request sent to a dead proxy (so any request would fail and
show as a console error).

What is rendered is checked against the data: the matrix drawn for a clicked head against
that head's attention in the model's ``examples.json``, cell by cell, opacity included; the
grid's colours against the order of the criterion's values in ``heads.csv``, across two
models side by side. These checks run on the atlas the workflow writes
(tests/atlas_workflow.py) and, in :func:`test_broken_explorers_fail_the_checks`, on copies
of it whose ``explorer.js`` is broken on purpose: each must fail.

As root, a missing chromium / chromium-driver is installed with apt-get (``make setup``
does it too). Without them the tests are skipped, except where a browser is required
(``$CI`` set, or ``$HEADLAB_REQUIRE_BROWSER``, which ``make test`` sets): there they fail.
Screenshots are kept in ``tmp/artefacts/atlas-browser/`` of the checkout
(``$HEADLAB_ARTEFACTS`` to put them elsewhere)."""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import atlas_workflow
from atlas_workflow import DHICM, MODEL_DIR, SPECS
from hangguard import hang_guard

ROOT = Path(__file__).resolve().parents[1]
ARTEFACTS = Path(os.environ.get("HEADLAB_ARTEFACTS", ROOT / "tmp" / "artefacts")) / "atlas-browser"
PACKAGES = ("chromium", "chromium-driver")
CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
WORDS = ["un@@", "der", "stand@@", "ing", "the", "cat"]
#: which way a head is more important, written here and not read from the code under test:
#: the grid must put the more important end of every scale at the bright / red end
MORE_IMPORTANT = {"loss_delta": +1, "grad_raw": +1, "value_norm": +1, "entropy": -1, "confidence": +1}
DIVERGING = {"loss_delta"}


@pytest.fixture(scope="session")
def atlas_run(tmp_path_factory, mirror):
    """The workflow's atlas: one snakemake run per test session, shared by the test files."""
    return atlas_workflow.build(tmp_path_factory, mirror)


def _required() -> bool:
    return bool(os.environ.get("CI") or os.environ.get("HEADLAB_REQUIRE_BROWSER"))


def _install() -> str | None:
    """Install Debian's chromium and its driver when missing (root only); None when they
    are there, else why the tests cannot run."""
    if os.path.exists(CHROMIUM) and os.path.exists(DRIVER):
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return f"{CHROMIUM} / {DRIVER} missing: install Debian's {' '.join(PACKAGES)} (root installs them itself)"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *PACKAGES]):
        done = subprocess.run(command, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=hang_guard(1200))
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return None


@pytest.fixture(scope="module")
def browser():
    why = _install()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError as error:
        why = why or f"selenium missing ({error})"
    if why:
        (pytest.fail if _required() else pytest.skip)(why)
    os.environ["SE_OFFLINE"] = "true"          # selenium-manager never downloads anything
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1700,1500", "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """An explorer over four toy models characterised by the real code, for what the
    workflow's atlas lacks: fixed heads with a stock decoder and a ΔBLEU per head index,
    DHICM at every site, encoder gates, and one model left out."""
    import torch
    from headlab.atlas.agree import agreement, claims
    from headlab.atlas.model import characterise
    from headlab.engine.model import build_model, model_opt, save_checkpoint, toy_vocabs
    from headlab.report.atlas import payload, scales, write_explorer

    tmp = tmp_path_factory.mktemp("atlas")
    sentences = [" ".join(WORDS), "the cat w1 w2 w3", "w4 un@@ der w5"]
    (tmp / "v.src").write_text("\n".join(sentences) + "\n")
    (tmp / "v.tgt").write_text("\n".join(["w3 w4 the", "cat w6", "w7 w8 w9 w1"]) + "\n")
    base = dict(hidden_size=32, heads=4, transformer_ff=32, enc_layers=2, dec_layers=2, dropout=0.0,
                attention_dropout=0.0)
    specs = {"toy/fixed": (["paper_A"], dict(enc_heads="3Ftoken+1L", enc_layers=3)),
             "toy/dhicm": (["paper_B"], dict(enc_heads="*(4L),4L|dhicm", decoder_type="headlab",
                                             dec_heads="*(4L),4L|dhicm", cross_heads="*(4L),4L|dhicm")),
             "toy/gated": (["paper_D"], dict(enc_heads="4L|gate"))}
    data, frames = {}, []
    for name, (studies, spec) in specs.items():
        torch.manual_seed(len(name))
        vocabs = toy_vocabs(30, share=True, src_tokens=WORDS)
        opt = model_opt(**{**base, **spec})
        path = tmp / f"{name.split('/')[1]}.pt"
        model = build_model(opt, vocabs)
        with torch.no_grad():      # DHICM at initialisation weighs every head alike: sharpen it
            for key, param in model.named_parameters():
                if ".mixers." in key and key.endswith(("W.weight", "U.weight")):
                    param.mul_(40.0)
        save_checkpoint(model, opt, vocabs, path)
        heads = characterise(str(path), str(tmp / "v.src"), str(tmp / "v.tgt"), str(tmp / name), name, examples=2)
        if name == "toy/fixed":    # paper A T4's ablation: one BLEU change per encoder head index
            heads.loc[heads.site == "enc", "delta_bleu"] = -heads.loc[heads.site == "enc", "head"].astype(float)
        data[name] = payload(name, studies, heads, json.loads((tmp / name / "examples.json").read_text()))
        frames.append(heads)
    models = [{"path": p, "studies": s} for p, (s, _) in specs.items()] + [{"path": "toy/left-out", "studies": ["paper_A"]}]
    heads = pd.concat(frames, ignore_index=True)
    studies = {p: s for p, (s, _) in specs.items()}
    write_explorer(tmp / "atlas", models, data, ["paper_A", "paper_B", "paper_D"], scales(heads),
                   agreement(heads, studies), claims(heads))
    return tmp / "atlas", data


# -- page helpers -------------------------------------------------------------------------

def _errors(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _open(driver, folder: Path):
    from selenium.webdriver.support.ui import WebDriverWait
    driver.get((folder / "index.html").as_uri())
    WebDriverWait(driver, 10).until(lambda d: d.find_elements("css selector", "#panel-0 table.grid td.cell"))


def _choose(driver, panel: int, path: str):
    from selenium.webdriver.support.ui import Select, WebDriverWait
    select = Select(driver.find_element("css selector", f"#panel-{panel} select.model"))
    select.select_by_visible_text(path)
    WebDriverWait(driver, 10).until(
        lambda d: d.find_elements("css selector", f"#panel-{panel} table.grid[data-site=enc] td.cell"))


def _criterion(driver, name: str):
    from selenium.webdriver.support.ui import Select
    Select(driver.find_element("id", "criterion")).select_by_value(name)


def _cells(driver, panel: int, site: str):
    return driver.find_elements("css selector", f"#panel-{panel} table.grid[data-site={site}] td.cell:not(.unit)")


def _cell(driver, panel: int, site: str, layer, head):
    return driver.find_element(
        "css selector", f"#panel-{panel} td.cell[data-site={site}][data-layer='{layer}'][data-head='{head}']")


def _rgb(text: str) -> tuple[float, ...]:
    return tuple(float(v) for v in text[text.index("(") + 1:text.index(")")].split(",")[:3])


def _score(rgb, diverging: bool) -> float:
    """Where a colour sits from the less to the more important end: luminance on the
    sequential scale (dark to bright), red minus blue on the diverging one (blue to red)."""
    r, g, b = rgb
    return r - b if diverging else 0.2126 * r + 0.7152 * g + 0.0722 * b


# -- the checks against the data (also run on the broken copies) ----------------------------

def check_clicked_head_draws_its_attention(driver, folder: Path, models: dict[str, Path]):
    """Click heads of each site of each model: every matrix cell's visible opacity
    (attribute and computed style) is that head's weight (floor 0.02) in examples.json, and
    the matrix is not another head's."""
    _open(driver, folder)
    for path, model_dir in models.items():
        examples = json.loads((model_dir / "examples.json").read_text())["sentences"]
        _choose(driver, 0, path)
        for site, layer, head in (("enc", 1, 2), ("enc", 2, 5), ("dec", 1, 3), ("cross", 1, 8)):
            att = examples[0]["maps"][site][layer - 1][head - 1]
            other = examples[0]["maps"][site][layer - 1][0]
            assert max(abs(a - b) for ra, rb in zip(att, other) for a, b in zip(ra, rb)) > 0.01, \
                "heads too alike to tell apart"
            _cell(driver, 0, site, layer, head).click()
            detail = driver.find_element("css selector", "#panel-0 .detail")
            assert detail.find_element("css selector", "h3").text.endswith(f"layer {layer}, head {head}")
            drawn = driver.execute_script(
                "return [].map.call(arguments[0].querySelectorAll('svg.matrix rect'), function (r) {"
                "  var s = getComputedStyle(r), p = getComputedStyle(r.parentNode);"
                "  return [parseFloat(r.getAttribute('fill-opacity')),"
                "          parseFloat(s.fillOpacity) * parseFloat(s.opacity) * parseFloat(p.opacity)]; });", detail)
            expected = [max(0.02, w) for row in att for w in row]
            assert len(drawn) == len(expected), (path, site, layer, head)
            for (attribute, visible), w in zip(drawn, expected):
                assert attribute == pytest.approx(w, abs=1e-6), (path, site, layer, head)
                assert visible == pytest.approx(w, abs=1e-3), (path, site, layer, head)
    assert _errors(driver) == []


def check_colours_follow_values(driver, folder: Path, models: dict[str, Path]):
    """Two models side by side, one criterion at a time: over the cells of both panels, a
    more important value never gets a colour nearer the less important end (one shared
    scale), and the most important head's colour is strictly nearer the important end than
    the least important one's."""
    _open(driver, folder)
    paths = list(models)
    _choose(driver, 0, paths[0])
    _choose(driver, 1, paths[-1])
    for name, sign in MORE_IMPORTANT.items():
        _criterion(driver, name)
        points = []
        for panel, path in ((0, paths[0]), (1, paths[-1])):
            heads = pd.read_csv(models[path] / "heads.csv").set_index(["site", "layer", "head"])
            for cell in driver.find_elements("css selector", f"#panel-{panel} table.grid td.cell:not(.unit)"):
                key = (cell.get_attribute("data-site"), int(cell.get_attribute("data-layer")),
                       int(cell.get_attribute("data-head")))
                value = heads.loc[key, name]
                if pd.notna(value):
                    points.append((sign * float(value),
                                   _score(_rgb(cell.value_of_css_property("background-color")), name in DIVERGING)))
        assert len(points) > 8, name
        points.sort()
        scores = [s for _, s in points]
        for i in range(len(points)):
            for j in range(i + 1, len(points)):
                if points[j][0] > points[i][0]:
                    assert scores[j] >= scores[i] - 1.0, (name, points[i], points[j])
        assert scores[-1] > scores[0] + 10, name
        legend = driver.find_element("css selector", "#legend .legend").text
        assert "more important" in legend, legend
    assert _errors(driver) == []


#: criteria pairs the agreement check plots (x, y): one with an inverted criterion (entropy)
AGREEMENT_PAIRS = (("grad_raw", "value_norm"), ("entropy", "loss_delta"))


def _oriented_ranks(values: pd.Series, name: str) -> pd.Series:
    """Each value's rank among ``values`` in (0, 1], ties at their mean rank, the more
    important end (MORE_IMPORTANT, not the page's own orientation) highest. The values
    are first rounded to the 4 significant digits the model's data file carries."""
    shown = values.map(lambda v: float(f"{v:.4g}"))
    return (MORE_IMPORTANT[name] * shown).rank(method="average") / len(shown)


def check_agreement_points_follow_ranks(driver, folder: Path, models: dict[str, Path]):
    """The agreement view of each model and pair of criteria: every point sits at its two
    ranks, computed here from heads.csv (pruned heads left out), within the plot's frame;
    the "most disagreement" list names the heads with the largest |rank difference|, in
    that order, with their ranks in percent."""
    from selenium.webdriver.support.ui import Select
    _open(driver, folder)
    for path, model_dir in models.items():
        _choose(driver, 0, path)
        heads = pd.read_csv(model_dir / "heads.csv")
        heads = heads[~heads["pruned"].astype(str).str.lower().isin(("true", "1"))]
        for x_name, y_name in AGREEMENT_PAIRS:
            panel = driver.find_element("id", "panel-0")
            Select(panel.find_element("css selector", "select.agree-x")).select_by_value(x_name)
            Select(panel.find_element("css selector", "select.agree-y")).select_by_value(y_name)
            units = heads.dropna(subset=[x_name, y_name]).copy()
            units["rx"], units["ry"] = _oriented_ranks(units[x_name], x_name), _oriented_ranks(units[y_name], y_name)
            units = units.set_index(["site", "layer", "head"])
            frame, points = driver.execute_script(
                "var s = arguments[0].querySelector('svg.scatter'), f = s.querySelector('rect');"
                "return [['x', 'y', 'width', 'height'].map(function (k) { return +f.getAttribute(k); }),"
                "  [].map.call(s.querySelectorAll('circle.point'), function (c) {"
                "    return [c.getAttribute('data-site'), +c.getAttribute('data-layer'), +c.getAttribute('data-head'),"
                "            +c.getAttribute('cx'), +c.getAttribute('cy')]; })];", panel)
            left, top, width, height = frame
            assert len(points) == len(units) > 8, (path, x_name, y_name, len(points), len(units))
            for site, layer, head, cx, cy in points:
                expected = units.loc[(site, layer, head)]
                where = (path, x_name, y_name, site, layer, head)
                assert (cx - left) / width == pytest.approx(expected["rx"], abs=1e-6), where
                assert (top + height - cy) / height == pytest.approx(expected["ry"], abs=1e-6), where
            gaps = (units["rx"] - units["ry"]).abs().sort_values(ascending=False, kind="stable")
            listed = panel.find_elements("css selector", "ol.disagree li")
            assert len(listed) == 6, (path, x_name, y_name)
            for rank, item in enumerate(listed):
                key = (item.get_attribute("data-site"), int(item.get_attribute("data-layer")),
                       int(item.get_attribute("data-head")))
                unit = units.loc[key]
                # ties may list either head: the gap at each place of the list is what is fixed
                assert abs(unit["rx"] - unit["ry"]) == pytest.approx(gaps.iloc[rank], abs=1e-9), (path, rank, key)
                percent = [math.floor(100 * unit[r] + 0.5 + 1e-9) for r in ("rx", "ry")]    # half up
                assert f"{x_name} rank {percent[0]}%, {y_name} rank {percent[1]}%" in item.text, (item.text, percent)
    assert _errors(driver) == []


CHECKS = {"attention": check_clicked_head_draws_its_attention, "colours": check_colours_follow_values,
          "agreement": check_agreement_points_follow_ranks}


def _workflow_models(atlas_run) -> tuple[Path, dict[str, Path]]:
    atlas = atlas_run / "results/atlas"
    return atlas, {MODEL_DIR.format(spec): atlas / MODEL_DIR.format(spec) for spec in SPECS}


# -- the workflow's atlas -----------------------------------------------------------------

@pytest.mark.slow
def test_explorer_files_load_nothing_from_the_network(atlas_run):
    folder, _ = _workflow_models(atlas_run)
    for path in [folder / "index.html", *folder.joinpath("explorer").rglob("*.*")]:
        text = path.read_text(encoding="utf-8").replace("http://www.w3.org/2000/svg", "")
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, path


@pytest.mark.slow
@pytest.mark.parametrize("check", sorted(CHECKS))
def test_workflow_atlas_renders_its_data(browser, atlas_run, check):
    folder, models = _workflow_models(atlas_run)
    CHECKS[check](browser, folder, models)
    browser.save_screenshot(str(ARTEFACTS / f"workflow-{check}.png"))


#: explorer.js broken on purpose: (what it breaks, the check that must catch it, text, replacement)
MUTANTS = {
    "head 1 drawn for any clicked head": (
        "attention", "s.maps[site][layer - 1][head - 1]", "s.maps[site][layer - 1][0]"),
    "inverted colour scale": (
        "colours", "return ramp(C.criteria[name].signed ? DIVERGING : STOPS, t);",
        "return ramp(C.criteria[name].signed ? DIVERGING : STOPS, 1 - t);"),
    "every matrix cell at opacity 0.02": (
        "attention", '"fill-opacity": opacity(w)', '"fill-opacity": 0.02'),
    "agreement scatter plots x against itself": (
        "agreement", "rb = ranks(units.map(function (u) { return u.b; }), b)",
        "rb = ranks(units.map(function (u) { return u.a; }), a)"),
    "most disagreement listed least first": (
        "agreement", ".sort(function (p, q) { return q[0] - p[0]; }).slice(0, 6)",
        ".sort(function (p, q) { return p[0] - q[0]; }).slice(0, 6)"),
}


@pytest.mark.slow
@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_broken_explorers_fail_the_checks(browser, atlas_run, tmp_path, mutant):
    """Each mutant of explorer.js, in a copy of the workflow's atlas, fails the check aimed
    at it (the checks would catch a page broken so)."""
    folder, models = _workflow_models(atlas_run)
    check, text, replacement = MUTANTS[mutant]
    copy = tmp_path / "atlas"
    shutil.copytree(folder / "explorer", copy / "explorer")
    shutil.copy(folder / "index.html", copy / "index.html")
    script = copy / "explorer/explorer.js"
    source = script.read_text(encoding="utf-8")
    assert source.count(text) == 1, f"the mutant no longer applies to explorer.js: {text}"
    script.write_text(source.replace(text, replacement), encoding="utf-8")
    with pytest.raises(AssertionError) as caught:
        CHECKS[check](browser, copy, models)
    print(f"{mutant}: {str(caught.value).splitlines()[0][:300]}")


@pytest.mark.slow
def test_agreement_view_links_points_to_cells(browser, atlas_run):
    """The scatter of two criteria: one point per head, the model's rho and interval as in
    its data, hovering a point outlines its grid cell, clicking it opens the head; the
    heads the criteria disagree on most are listed."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import Select
    folder, models = _workflow_models(atlas_run)
    _open(browser, folder)
    path = MODEL_DIR.format(DHICM)
    _choose(browser, 0, path)
    panel = browser.find_element("id", "panel-0")
    Select(panel.find_element("css selector", "select.agree-x")).select_by_value("grad_raw")
    Select(panel.find_element("css selector", "select.agree-y")).select_by_value("value_norm")
    points = panel.find_elements("css selector", "svg.scatter circle.point")
    assert len(points) == 4 * 8
    heads = pd.read_csv(models[path] / "heads.csv")
    from headlab.atlas.agree import model_pairs
    pair = next(p for p in model_pairs(heads) if {p["a"], p["b"]} == {"grad_raw", "value_norm"})
    rho = panel.find_element("css selector", ".rho").text
    assert f"ρ = {pair['rho']:.3g}" in rho and "over 32 heads" in rho, rho
    assert "[" in rho and "95% bootstrap" in rho
    point = panel.find_element("css selector", "svg.scatter circle[data-site=dec][data-layer='1'][data-head='4']")
    ActionChains(browser).move_to_element(point).perform()
    assert "linked" in _cell(browser, 0, "dec", 1, 4).get_attribute("class")
    point.click()
    assert panel.find_element("css selector", ".detail h3").text == "decoder self-attention, layer 1, head 4"
    assert len(panel.find_elements("css selector", "ol.disagree li")) == 6
    claims = [r.text for r in browser.find_elements("css selector", "table.claims tr")]
    assert any("grad_raw ~ loss_delta: raw" in r for r in claims), claims
    browser.save_screenshot(str(ARTEFACTS / "agreement.png"))
    assert _errors(browser) == []


@pytest.mark.slow
def test_agreement_redrawn_by_keyboard_under_the_pointer_leaves_no_outline(browser, atlas_run):
    """Hover a point (its cell outlined), then change the y criterion from the keyboard
    without moving the pointer: the view is redrawn, the old point is gone without a
    mouseleave, and no cell, point or list entry may stay outlined but the head of whatever
    point now lies under the pointer."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select
    folder, _ = _workflow_models(atlas_run)
    _open(browser, folder)
    _choose(browser, 0, MODEL_DIR.format(DHICM))
    panel = browser.find_element("id", "panel-0")
    Select(panel.find_element("css selector", "select.agree-x")).select_by_value("grad_raw")
    Select(panel.find_element("css selector", "select.agree-y")).select_by_value("value_norm")
    point = panel.find_element("css selector", "svg.scatter circle[data-site=dec][data-layer='1'][data-head='4']")
    centre = browser.execute_script("var r = arguments[0].getBoundingClientRect();"
                                    "return [r.left + r.width / 2, r.top + r.height / 2];", point)
    ActionChains(browser).move_to_element(point).perform()
    assert "linked" in _cell(browser, 0, "dec", 1, 4).get_attribute("class")
    select = panel.find_element("css selector", "select.agree-y")
    browser.execute_script("arguments[0].focus();", select)
    ActionChains(browser).send_keys(Keys.ARROW_DOWN).perform()
    assert panel.find_element("css selector", "select.agree-y").get_attribute("value") != "value_norm"
    under = browser.execute_script(
        "var e = document.elementFromPoint(arguments[0], arguments[1]);"
        "return e && e.classList.contains('point') ? [e.getAttribute('data-site'), e.getAttribute('data-layer'),"
        "  e.getAttribute('data-head')] : null;", *centre)
    linked = [(e.get_attribute("data-site"), e.get_attribute("data-layer"), e.get_attribute("data-head"))
              for e in panel.find_elements("css selector", ".linked")]
    assert all(under is not None and head == tuple(under) for head in linked), (linked, under)
    assert _errors(browser) == []


#: viridis at five stops (the sequential scale's published colours), to interpolate here
VIRIDIS = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))


def _viridis(t: float) -> tuple[float, ...]:
    t = min(max(t, 0.0), 1.0) * (len(VIRIDIS) - 1)
    i = min(int(t), len(VIRIDIS) - 2)
    return tuple(a + (t - i) * (b - a) for a, b in zip(VIRIDIS[i], VIRIDIS[i + 1]))


def test_value_norm_scale_is_logarithmic_and_not_set_by_pruned_heads(browser, tmp_path):
    """A hand-made model: 14 live encoder heads with value norms 0.05 x 1.5^k (k = 0..13,
    0.05 to 9.73, the spread of a pooled atlas) and 2 pruned heads at 1e-6. Each live cell's
    colour is viridis at log(v / lo) / log(hi / lo), lo and hi the 2nd and 98th percentiles
    of the live heads (computed here): the pruned heads do not stretch the scale, and the
    middle heads are not crushed into its darkest shades as on a linear scale."""
    from headlab.report.atlas import payload, scales, write_explorer
    live = 0.05 * 1.5 ** np.arange(14)
    heads = pd.DataFrame({"model": "hand/log", "site": "enc", "layer": np.repeat([1, 2], 8),
                          "head": np.tile(np.arange(1, 9), 2), "kind": "L", "family": ["learned"] * 14 + ["pruned"] * 2,
                          "pruned": [False] * 14 + [True] * 2, "sentences": 3,
                          "value_norm": np.r_[live, [1e-6, 1e-6]], "confidence": np.linspace(0.3, 0.9, 16),
                          "loss_delta": np.linspace(-0.1, 0.5, 16)})
    data = {"hand/log": payload("hand/log", ["paper_D"], heads, {"sentences": []})}
    write_explorer(tmp_path / "atlas", [{"path": "hand/log", "studies": ["paper_D"]}], data, ["paper_D"], scales(heads))
    _open(browser, tmp_path / "atlas")
    _criterion(browser, "value_norm")
    low, high = np.percentile(live, [2, 98])
    assert "logarithmic" in browser.find_element("css selector", "#legend .legend").text
    for cell in _cells(browser, 0, "enc"):
        index = 8 * (int(cell.get_attribute("data-layer")) - 1) + int(cell.get_attribute("data-head")) - 1
        value = heads["value_norm"][index]
        expected = _viridis(math.log(value / low) / math.log(high / low)) if index < 14 else VIRIDIS[0]
        drawn = _rgb(cell.value_of_css_property("background-color"))
        assert drawn == pytest.approx(expected, abs=1.5), (index, value, drawn, expected)
    browser.save_screenshot(str(ARTEFACTS / "4-log-scale.png"))
    assert _errors(browser) == []


# -- the toy atlas: kinds the workflow's lacks --------------------------------------------

def test_page_loads_from_file_with_no_console_error(browser, toy):
    folder, data = toy
    _open(browser, folder)
    browser.save_screenshot(str(ARTEFACTS / "1-loaded.png"))
    assert browser.find_element("id", "status").text == "4 models, 3 characterised"
    options = [o.text for o in browser.find_elements("css selector", "#panel-0 select.model option")]
    assert "toy/left-out (not characterised: config atlas.models)" in options
    assert _errors(browser) == []


def test_grid_has_a_cell_per_layer_and_head_of_each_site(browser, toy):
    folder, _ = toy
    _open(browser, folder)
    _choose(browser, 0, "toy/fixed")
    assert len(_cells(browser, 0, "enc")) == 3 * 4          # 3 encoder layers of 3Ftoken+1L
    assert len(_cells(browser, 0, "dec")) == 2 * 4 and len(_cells(browser, 0, "cross")) == 2 * 4
    _choose(browser, 0, "toy/dhicm")
    assert len(_cells(browser, 0, "enc")) == 2 * 4
    assert _errors(browser) == []


def test_click_draws_the_heads_matrix_and_arcs_with_its_tokens(browser, toy):
    folder, data = toy
    _open(browser, folder)
    _choose(browser, 0, "toy/fixed")
    _cell(browser, 0, "enc", 2, 2).click()
    detail = browser.find_element("css selector", "#panel-0 .detail")
    assert detail.find_element("css selector", "h3").text == "encoder self-attention, layer 2, head 2"
    example = data["toy/fixed"]["examples"][0]
    assert example["src"] == WORDS
    keys = [t.text for t in detail.find_elements("css selector", "svg.matrix text.key")]
    queries = [t.text for t in detail.find_elements("css selector", "svg.matrix text.query")]
    assert keys == WORDS and queries == WORDS
    words = [t.text for t in detail.find_elements("css selector", "svg.arcs text.word")]
    assert words == ["under", "standing", "the", "cat"]
    # head 2 is the fixed 'previous' pattern: from each word one arc, to the word before
    assert len(detail.find_elements("css selector", "svg.arcs path[stroke-opacity]")) >= 3
    rows = {r.find_element("css selector", "th").text: r.find_element("css selector", "td").text
            for r in detail.find_elements("css selector", "table.headrow tr")}
    assert rows["kind"] == "Ftoken:previous" and rows["confidence"] == "1"
    browser.save_screenshot(str(ARTEFACTS / "2-head.png"))
    # a cross-attention head: target words over source words
    _cell(browser, 0, "cross", 1, 3).click()
    detail = browser.find_element("css selector", "#panel-0 .detail")
    assert [t.text for t in detail.find_elements("css selector", "svg.arcs text.word.query")] == ["<s>", "w3", "w4", "the"]
    assert [t.text for t in detail.find_elements("css selector", "svg.arcs text.word.key")] == ["under", "standing", "the", "cat"]
    assert _errors(browser) == []


def test_delta_bleu_is_one_row_per_head_index(browser, toy):
    """ΔBLEU (head k disabled in every layer) is drawn once per head index, in an 'every
    layer' row, the layers' cells uncoloured; its agreement points are head indices."""
    from selenium.webdriver.support.ui import Select
    folder, _ = toy
    _open(browser, folder)
    _choose(browser, 0, "toy/fixed")
    _criterion(browser, "delta_bleu")
    row = browser.find_elements("css selector", "#panel-0 table.grid[data-site=enc] tr.every-layer td.cell.unit")
    assert len(row) == 4
    colours = [_rgb(c.value_of_css_property("background-color")) for c in row]
    # ΔBLEU = -k: head 4's disabling costs most BLEU, the most important (red) end
    assert _score(colours[3], True) > _score(colours[0], True)
    assert {_rgb(c.value_of_css_property("background-color")) for c in _cells(browser, 0, "enc")} == {(221, 221, 221)}
    assert "more important" in browser.find_element("css selector", "#legend").text
    panel = browser.find_element("id", "panel-0")
    Select(panel.find_element("css selector", "select.agree-x")).select_by_value("delta_bleu")
    Select(panel.find_element("css selector", "select.agree-y")).select_by_value("loss_delta")
    points = panel.find_elements("css selector", "svg.scatter circle.point")
    assert len(points) == 4 and {p.get_attribute("data-layer") for p in points} == {"all"}
    assert _errors(browser) == []


def test_one_scale_for_two_models_side_by_side(browser, toy):
    folder, _ = toy
    _open(browser, folder)
    _choose(browser, 0, "toy/gated")
    colours = lambda: [c.value_of_css_property("background-color") for c in _cells(browser, 0, "enc")]  # noqa: E731
    _criterion(browser, "confidence")
    before = colours()
    _criterion(browser, "grad_importance")
    after = colours()
    assert before != after and len(set(after)) > 1
    _criterion(browser, "gate")
    assert "not defined" not in browser.find_element("css selector", "#panel-0 .defined").text
    _choose(browser, 1, "toy/dhicm")
    _criterion(browser, "dhicm_importance")
    assert len(_cells(browser, 0, "enc")) == len(_cells(browser, 1, "enc")) == 2 * 4
    assert "not defined" in browser.find_element("css selector", "#panel-0 .defined").text
    dhicm = [c.value_of_css_property("background-color") for c in _cells(browser, 1, "enc")]
    assert len(set(dhicm[4:])) > 1 and len(set(dhicm[:4])) == 1      # G exists in the last layer only
    browser.save_screenshot(str(ARTEFACTS / "3-side-by-side.png"))
    assert _errors(browser) == []
