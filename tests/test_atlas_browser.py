"""The atlas explorer in a real browser: Debian's headless Chromium driven by selenium
through Debian's chromedriver (no browser download at run time), the page opened from
file:// with every network request sent to a dead proxy (so any request would fail and
show as a console error).

As root, a missing chromium / chromium-driver is installed with apt-get (as tests/slurm/up.sh
installs SLURM); otherwise the tests are skipped, saying so. Screenshots of each step are
kept in ``tmp/artefacts/atlas-browser/`` of the checkout (``$HEADLAB_ARTEFACTS`` to put them
elsewhere)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTEFACTS = Path(os.environ.get("HEADLAB_ARTEFACTS", ROOT / "tmp" / "artefacts")) / "atlas-browser"
PACKAGES = ("chromium", "chromium-driver")
CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
WORDS = ["un@@", "der", "stand@@", "ing", "the", "cat"]


def _install() -> str | None:
    """Install Debian's chromium and its driver when missing (root only); None when they
    are there, else why the tests cannot run."""
    if os.path.exists(CHROMIUM) and os.path.exists(DRIVER):
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return f"{CHROMIUM} / {DRIVER} missing: install Debian's {' '.join(PACKAGES)} (root installs them itself)"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *PACKAGES]):
        done = subprocess.run(command, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=1200)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return None


@pytest.fixture(scope="module")
def browser():
    why = _install()
    if why:
        pytest.skip(why)
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

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
def explorer(tmp_path_factory):
    """An explorer over four toy models characterised by the real code: fixed heads with a
    stock decoder, DHICM at every site, encoder gates, and one model left out."""
    import torch
    from headlab.atlas.model import characterise
    from headlab.engine.model import build_model, model_opt, save_checkpoint, toy_vocabs
    from headlab.report.atlas import payload, write_explorer
    from headlab.atlas.agree import CRITERIA

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
    data = {}
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
        data[name] = payload(name, studies, heads, json.loads((tmp / name / "examples.json").read_text()))
    models = [{"path": p, "studies": s} for p, (s, _) in specs.items()] + [{"path": "toy/left-out", "studies": ["paper_A"]}]
    write_explorer(tmp / "atlas", models, data, ["paper_A", "paper_B", "paper_D"], CRITERIA)
    return tmp / "atlas", data


def _errors(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _choose(driver, panel: int, path: str):
    from selenium.webdriver.support.ui import Select, WebDriverWait
    select = Select(driver.find_element("css selector", f"#panel-{panel} select.model"))
    select.select_by_visible_text(path)
    WebDriverWait(driver, 10).until(
        lambda d: d.find_elements("css selector", f"#panel-{panel} table.grid[data-site=enc] td.cell"))


def _cells(driver, panel: int, site: str):
    return driver.find_elements("css selector", f"#panel-{panel} table.grid[data-site={site}] td.cell")


def test_explorer_files_load_nothing_from_the_network(explorer):
    folder, _ = explorer
    for path in [folder / "index.html", *folder.joinpath("explorer").rglob("*.*")]:
        text = path.read_text(encoding="utf-8").replace("http://www.w3.org/2000/svg", "")
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, path


def test_page_loads_from_file_with_no_console_error(browser, explorer):
    from selenium.webdriver.support.ui import WebDriverWait
    folder, data = explorer
    browser.get((folder / "index.html").as_uri())
    WebDriverWait(browser, 10).until(lambda d: _cells(d, 0, "enc"))
    browser.save_screenshot(str(ARTEFACTS / "1-loaded.png"))
    assert browser.find_element("id", "status").text == "4 models, 3 characterised"
    options = [o.text for o in browser.find_elements("css selector", "#panel-0 select.model option")]
    assert "toy/left-out (not characterised: config atlas.models)" in options
    assert _errors(browser) == []


def test_grid_has_a_cell_per_layer_and_head_of_each_site(browser, explorer):
    folder, _ = explorer
    browser.get((folder / "index.html").as_uri())
    _choose(browser, 0, "toy/fixed")
    assert len(_cells(browser, 0, "enc")) == 3 * 4          # 3 encoder layers of 3Ftoken+1L
    assert len(_cells(browser, 0, "dec")) == 2 * 4 and len(_cells(browser, 0, "cross")) == 2 * 4
    _choose(browser, 0, "toy/dhicm")
    assert len(_cells(browser, 0, "enc")) == 2 * 4
    assert _errors(browser) == []


def test_click_draws_the_heads_matrix_and_arcs_with_its_tokens(browser, explorer):
    folder, data = explorer
    browser.get((folder / "index.html").as_uri())
    _choose(browser, 0, "toy/fixed")
    cell = browser.find_element("css selector", "#panel-0 td.cell[data-site=enc][data-layer='2'][data-head='2']")
    cell.click()
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
    browser.find_element("css selector", "#panel-0 td.cell[data-site=cross][data-layer='1'][data-head='3']").click()
    detail = browser.find_element("css selector", "#panel-0 .detail")
    assert [t.text for t in detail.find_elements("css selector", "svg.arcs text.word.query")] == ["<s>", "w3", "w4", "the"]
    assert [t.text for t in detail.find_elements("css selector", "svg.arcs text.word.key")] == ["under", "standing", "the", "cat"]
    assert _errors(browser) == []


def test_criterion_switch_recolours_the_grid_and_two_models_stand_side_by_side(browser, explorer):
    from selenium.webdriver.support.ui import Select
    folder, _ = explorer
    browser.get((folder / "index.html").as_uri())
    _choose(browser, 0, "toy/gated")
    colours = lambda: [c.value_of_css_property("background-color") for c in _cells(browser, 0, "enc")]  # noqa: E731
    Select(browser.find_element("id", "criterion")).select_by_value("confidence")
    before = colours()
    Select(browser.find_element("id", "criterion")).select_by_value("grad_importance")
    after = colours()
    assert before != after and len(set(after)) > 1
    Select(browser.find_element("id", "criterion")).select_by_value("gate")
    assert "not defined" not in browser.find_element("css selector", "#panel-0 .legend").text
    _choose(browser, 1, "toy/dhicm")
    Select(browser.find_element("id", "criterion")).select_by_value("dhicm_importance")
    assert len(_cells(browser, 0, "enc")) == len(_cells(browser, 1, "enc")) == 2 * 4
    assert "not defined" in browser.find_element("css selector", "#panel-0 .legend").text
    dhicm = [c.value_of_css_property("background-color") for c in _cells(browser, 1, "enc")]
    assert len(set(dhicm[4:])) > 1 and len(set(dhicm[:4])) == 1      # G exists in the last layer only
    browser.save_screenshot(str(ARTEFACTS / "3-side-by-side.png"))
    assert _errors(browser) == []
