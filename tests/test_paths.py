"""Every artifact path comes from one table, :data:`headlab.naming.PATHS`: the rules write
to its patterns, the studies, the atlas and publish read its paths, so the layout of the
results folder changes in one place."""
from __future__ import annotations

import re
from pathlib import Path

from headlab import naming

ROOT = Path(__file__).resolve().parents[1]
#: what ships (every study, the atlas): what the tests load
SHIPPED = ROOT / "config/config.yaml"


def _workflow(api, configfile: Path, config: dict | None = None):
    from snakemake.api import ConfigSettings, ResourceSettings

    return api.workflow(resource_settings=ResourceSettings(cores=1), snakefile=ROOT / "Snakefile", workdir=ROOT,
                        config_settings=ConfigSettings(configfiles=[configfile], config=config or {}))


def _api():
    from snakemake.api import OutputSettings, SnakemakeApi
    from snakemake.settings.enums import Quietness

    return SnakemakeApi(OutputSettings(quiet={Quietness.ALL}))


def _kind_regex(kind: str, root: str) -> re.Pattern:
    """``pattern(kind, root)`` as a regex over the rules' patterns: the model's and the data
    folder's fields are their own wildcards; any other field may also be fixed by the rule,
    to a literal without ``/`` (``part="heads.csv"``) possibly around wildcards
    (``split="distil_{suite}"``)."""
    regex, at = "", 0
    template = naming.pattern(kind, root)
    for field in re.finditer(r"{(\w+)}", template):
        regex += re.escape(template[at:field.start()])
        if field.group(1) in naming.MODEL_KEYS:
            regex += re.escape(field.group(0))
        else:
            regex += r"(?:[^/{}]|\{\w+\})+"
        at = field.end()
    return re.compile(regex + re.escape(template[at:]))


def test_every_rule_output_resolves_through_the_path_table(monkeypatch):
    from snakemake.io import strip_wildcard_constraints

    monkeypatch.chdir(ROOT)
    kinds = {kind: _kind_regex(kind, "results") for kind in naming.PATHS}
    with _api() as api:
        workflow = _workflow(api, SHIPPED)._workflow
        files = [(rule.name, str(f)) for rule in workflow.rules for f in rule.output]
        files += [(rule.name, str(rule.benchmark)) for rule in workflow.rules if rule.name == "train"]
    assert any(name == "train" for name, _ in files) and len(files) > 50
    unresolved = [f"{name}: {file}" for name, file in files
                  if not any(regex.fullmatch(strip_wildcard_constraints(file)) for regex in kinds.values())]
    assert not unresolved, "outputs not built from headlab.naming.PATHS:\n" + "\n".join(unresolved)


def _renamed(template: str) -> str:
    """The template with its top folder renamed (``data/…`` -> ``data_x/…``,
    ``{outdir}/…`` -> ``{outdir}_x/…``), or a top-level file (``effects.md`` -> ``effects_x.md``)."""
    top, slash, rest = template.partition("/")
    if slash:
        return f"{top}_x/{rest}"
    stem, dot, ext = template.rpartition(".")
    return f"{stem}_x.{ext}" if dot else f"{template}_x"


def _old_prefixes(templates: list[str], results: Path, config: dict) -> list[str]:
    """The folders (and top-level files) of the original ``templates`` under ``results``."""
    from headlab.studies import STUDIES

    outdirs = {STUDIES[name].outdir for name in config["studies"]} | {"paper_C"}  # paper C's parser scores
    prefixes = set()
    for template in templates:
        top, slash, _ = template.partition("/")
        names = [top.replace("{outdir}", outdir) for outdir in outdirs] if "{outdir}" in top else [top]
        prefixes |= {f"{results}/{name}{slash}" for name in names}
    return sorted(prefixes)


def test_renaming_every_folder_of_the_table_moves_the_whole_dag(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    original = list(naming.PATHS.values())
    for kind, template in list(naming.PATHS.items()):
        monkeypatch.setitem(naming.PATHS, kind, _renamed(template))
    results = tmp_path / "results"
    with _api() as api:
        workflow_api = _workflow(api, SHIPPED, {"results": str(results)})
        # no MissingInputException: every rule's and every study's input names a renamed output
        workflow_api.dag().execute_workflow(executor="dryrun")
        workflow = workflow_api._workflow
        config = workflow.config
        files = {str(f) for job in workflow.dag.jobs for f in [*job.input, *job.output]}
    planned = sorted(f for f in files if f.startswith(f"{results}/"))
    assert any("/models_x/" in f and f.endswith("/model.pt") for f in planned), planned[:20]
    assert any(f.startswith(f"{results}/atlas_x/") for f in planned)
    old = tuple(_old_prefixes(original, results, config))
    stale = [f for f in planned if f.startswith(old)]
    assert not stale, "paths built by hand (not from headlab.naming.PATHS):\n" + "\n".join(stale[:30])
