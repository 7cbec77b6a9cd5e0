# Your own corpora (corpora.NAME.dataset: local): one split of one pair read from the files
# named in the config, checked and cleaned (src/headlab/data/local.py), beside a JSON report
# (sha256 of every file, lines removed and normalised) that READMEs and publish include.
import re

import headlab.data.local

LOCAL_CORPORA = {n: c for n, c in config["corpora"].items() if headlab.data.local.is_local(c)}


def _alternatives(names):
    return "|".join(re.escape(n) for n in sorted(names)) or "(?!)"


rule prepare_local:
    input:
        lambda w: headlab.data.local.input_files(corpus(w.corpus), w.split),
    output:
        src=pattern("raw", side="src"),
        tgt=pattern("raw", side="tgt"),
        report=pattern("raw_report"),
    wildcard_constraints:
        corpus=_alternatives(LOCAL_CORPORA),
        split=_alternatives({s for c in LOCAL_CORPORA.values() for s in c["files"]}),
    params:
        corpus=lambda w: json.dumps(headlab.data.local.split_config(corpus(w.corpus), w.split), sort_keys=True),
        size=_prepare_size_args,
    log:
        f"{LOGS}/prepare/{{corpus}}/{{pair}}/{{size}}/{{split}}.log",
    conda:
        "../envs/data.yaml"
    shell:
        "headlab prepare-local --corpus-json {params.corpus:q} --pair {wildcards.pair} --split {wildcards.split} "
        "--out-src {output.src} --out-tgt {output.tgt} --report {output.report} {params.size} 2> {log}"


ruleorder: prepare_local > prepare
