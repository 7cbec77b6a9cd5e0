# headlab: attention-head experiments for Transformer NMT.
#
#   snakemake --profile profiles/local --configfile config/config.yaml --cores all
#
# The config says which studies, corpora, pairs, sizes, layer counts and head specs to run;
# the rules below are generic (fetch, prepare, preprocess, bpe, vocab, train, translate,
# score, table) and never copied per paper.
from snakemake.utils import min_version, validate

min_version("9.0")


# the embedded default, only when no --configfile is given (snakemake would otherwise
# merge the two, mixing the default's studies into another config's)
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


validate(config, "config/schema.yaml")


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/analyse.smk"
include: "rules/tables.smk"


rule all:
    input:
        final_outputs(),
    default_target: True


onerror:
    # a job killed at its memory limit: say which rule and which resource to raise
    headlab.workflow.print_memory_hints(log)
