# headlab: attention-head experiments for Transformer NMT.
#
#   snakemake --profile profiles/local --configfile config/config.yaml --cores all
#
# The config says which studies, corpora, pairs, sizes, layer counts and head specs to run;
# the rules below are generic (fetch, prepare, preprocess, bpe, vocab, train, translate,
# score, table) and never copied per paper.
import os
import sys

from snakemake.utils import min_version, validate

import headlab.workflow.config_check
import headlab.workflow.config_types
import headlab.workflow.configfile
import headlab.workflow.hints
import headlab.data.fetch
import headlab.studies
from headlab.errors import HeadlabError

min_version("9.0")


def _stop(message: str):
    """Bad input: one line naming the file or config key, exit status 1 (a WorkflowError
    would add snakemake's own location lines about this file)."""
    print(f"headlab: {message}", file=sys.stderr)
    sys.exit(1)


# the embedded default, only when no --configfile is given (snakemake would otherwise
# merge the two, mixing the default's studies into another config's)
if not workflow.overwrite_configfiles:
    # relative to the working directory: run elsewhere, say which config to pass
    if not os.path.isfile("config/config.yaml"):
        _stop(f"no config: pass --configfile config/config.yaml (the embedded default, in "
              f"{workflow.basedir}) or a config of your own; {os.getcwd()} has no config/config.yaml")

    configfile: "config/config.yaml"


# --config values arrive as strings below the top level: give them the schema's types first.
# Both they and overlay configfiles (every --configfile after the first, e.g. config/cpu/*.yaml
# on a GPU config) drop a key with null where the schema allows no null: snakemake merges
# mappings key by key, so null is the only way an overlay can remove a study or a grid key.
_schema = headlab.workflow.config_types.load_schema(os.path.join(workflow.basedir, "config/schema.yaml"))
# Each source is read on its own, so that an error names the file (or --config) it is in:
# strictly (a key given twice in one mapping, which snakemake's YAML reading took silently,
# is an error naming its line), then typed from the one that wins first (a merged value is
# that of the last source that sets it; once typed, the sources below it pass).
_sources = []
for _configfile in workflow.overwrite_configfiles or ["config/config.yaml"]:
    try:
        _sources.append((_configfile, headlab.workflow.configfile.read(_configfile)))
    except HeadlabError as err:
        _stop(f"config error: {err}")
_sources.append(("--config", dict(workflow.config_settings.config)))
for _source, _values in reversed(_sources):
    try:
        headlab.workflow.config_types.coerce_overrides(config, _values, _schema, typed=_source != "--config")
    except HeadlabError as err:
        _stop(f"config error: {_source}: {err}")
# a schema violation as one line naming key, value, what is allowed and where it was written
# (snakemake's validate prints jsonschema's 10-100 lines); validate then sets the defaults
_schema_error = headlab.workflow.config_types.schema_error(config, _schema, _sources)
if _schema_error:
    _stop(f"config error: {_schema_error}")
validate(config, "config/schema.yaml")

# Rule shells never glob: model paths may hold a head spec's "*" (headlab.naming.MODEL).
shell.prefix("set -euo pipefail; set -f; ")
# everything checkable without running a job (head specs, presets, pairs, sizes, option
# names), once, in the main process (cluster jobs re-read this file: already checked)
if workflow.is_main_process:
    try:
        _mirror = config.get("data", {}).get("mirror") or headlab.data.fetch.default_mirror()
        headlab.workflow.config_check.check(config, mirror=_mirror and os.path.join(workflow.basedir, _mirror))
    except HeadlabError as err:
        _stop(f"config error: {err}")
# head specs as model paths name them (`4L|gate` is 4L~gate), in every process, after the
# check (whose errors quote them as written): the studies' tables and files name each model
# exactly as its directory does
headlab.studies.name_head_specs(config)


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/syntax.smk"
include: "rules/local.smk"
include: "rules/train.smk"
include: "rules/curves.smk"
include: "rules/evaluate.smk"
include: "rules/analyse.smk"
include: "rules/tables.smk"
include: "rules/atlas.smk"


rule all:
    input:
        final_outputs(),
    default_target: True


onerror:
    # a job killed at its memory limit: say which rule and which resource to raise
    headlab.workflow.hints.print_memory_hints(log)
