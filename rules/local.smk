# Your own corpora (corpora.NAME.dataset: local): one split of one pair read from the files
# named in the config, checked and cleaned (src/headlab/data/local.py), beside a JSON report
# (sha256 of every file, lines removed and normalised) that READMEs and publish include.
import functools
import hashlib
import re

import headlab.data.local

LOCAL_CORPORA = {n: c for n, c in config["corpora"].items() if headlab.data.local.is_local(c)}


def _alternatives(names):
    return "|".join(re.escape(n) for n in sorted(names)) or "(?!)"


@functools.lru_cache(maxsize=None)
def _sha256(path, stat_key):
    """sha256 of a file, once per process and state (size, mtime, ctime, inode: copying or
    restoring a file changes its ctime even where its mtime is set back)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _input_digests(w):
    """The sha256 of every file a split reads, a param of its job: snakemake reruns a job
    whose params changed, so a corpus replaced under its old mtime (`touch -r`, a restore
    from a backup) is prepared again, and everything downstream with it; an unchanged
    corpus, touched or not, reruns nothing."""
    digests = []
    for path in headlab.data.local.input_files(corpus(w.corpus), w.split):
        stat = os.stat(path)
        digests.append(_sha256(path, (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)))
    return " ".join(digests)


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
        sha256=_input_digests,
    log:
        f"{LOGS}/prepare/{{corpus}}/{{pair}}/{{size}}/{{split}}.log",
    conda:
        "../envs/data.yaml"
    shell:
        "headlab prepare-local --corpus-json {params.corpus:q} --pair {wildcards.pair} --split {wildcards.split} "
        "--out-src {output.src} --out-tgt {output.tgt} --report {output.report} {params.size} 2> {log}"


ruleorder: prepare_local > prepare
