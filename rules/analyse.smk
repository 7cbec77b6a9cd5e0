# Analyses shared by all papers: contrastive suites brought into each model's own
# preprocessing (as extra "splits"), forced-decoding scores, DistilLingEval accuracy (by
# subject-verb distance), MuCoW WSD accuracy, and compare-mt bootstrap / length bins.


def _mucow_domains():
    return ",".join(config.get("evaluation", {}).get("mucow_domains", ["ted", "tatoeba"]))


rule suite_distil:
    input:
        f"{DATA}/raw/distil-lingeval/.verified",
    output:
        src=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/raw/distil_{{suite}}.src",
        tgt=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/raw/distil_{{suite}}.tgt",
    wildcard_constraints:
        suite=r"[a-z_]+",
    log:
        f"{LOGS}/suites/{{corpus}}/{{pair}}/{{size}}/distil_{{suite}}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab suite-split --suite distil_{wildcards.suite} --pair {wildcards.pair} --root {DATA}/raw "
        "--out-prefix {DATA}/{wildcards.corpus}/{wildcards.pair}/{wildcards.size}/raw/distil_{wildcards.suite} 2> {log}"


rule suite_mucow:
    input:
        f"{DATA}/raw/mucow/.verified",
    output:
        src=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/raw/mucow.src",
        tgt=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/raw/mucow.tgt",
        key=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/raw/mucow.key",
    params:
        domains=_mucow_domains(),
    log:
        f"{LOGS}/suites/{{corpus}}/{{pair}}/{{size}}/mucow.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab suite-split --suite mucow --pair {wildcards.pair} --root {DATA}/raw --domains {params.domains} "
        "--out-prefix {DATA}/{wildcards.corpus}/{wildcards.pair}/{wildcards.size}/raw/mucow 2> {log}"


ruleorder: suite_mucow > suite_distil > prepare


rule forced_score:
    input:
        model=f"{MODELS}/{MODEL}/model.pt",
        src=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/bpe/{{split}}.src",
        tgt=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/bpe/{{split}}.tgt",
    output:
        f"{SCORES}/{MODEL}/{{split}}.{{ablation}}.logprob.tsv",
    params:
        ablation=_ablation_args,
        gpu="-gpu 0" if config.get("training", {}).get("device") == "gpu" else "",
    log:
        f"{LOGS}/forced/{MODEL}/{{split}}.{{ablation}}.log",
    benchmark:
        f"{LOGS}/forced/{MODEL}/{{split}}.{{ablation}}.benchmark.tsv"
    threads: config["translation"].get("threads", 1)
    conda:
        "../envs/onmt.yaml"
    shell:
        "OMP_NUM_THREADS={threads} headlab score -model {input.model} -src {input.src} -tgt {input.tgt} "
        "-out {output} -batch_size 64 {params.gpu} {params.ablation} > {log} 2>&1"


rule distil_accuracy:
    input:
        scores=f"{SCORES}/{MODEL}/distil_{{suite}}.{{ablation}}.logprob.tsv",
        fetched=f"{DATA}/raw/distil-lingeval/.verified",
    output:
        f"{SCORES}/{MODEL}/distil_{{suite}}.{{ablation}}.accuracy.csv",
    wildcard_constraints:
        suite=r"[a-z_]+",
    params:
        distance=lambda w: "" if w.suite == "subj_verb_agreement" else "--no-distance",
    log:
        f"{LOGS}/contrastive/{MODEL}/distil_{{suite}}.{{ablation}}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab contrastive distil --suite {DATA}/raw/distil-lingeval/{wildcards.suite}.mt "
        "--scores {input.scores} --out {output} --system {wildcards.heads} {params.distance} "
        "--parse-cache {DATA}/raw/distil-lingeval/{wildcards.suite}.parses.json 2> {log}"


rule mucow_accuracy:
    input:
        hyp=f"{TRANS}/{MODEL}/mucow.{{ablation}}.txt",
        key=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/raw/mucow.key",
    output:
        f"{SCORES}/{MODEL}/mucow.{{ablation}}.mucow.csv",
    log:
        f"{LOGS}/contrastive/{MODEL}/mucow.{{ablation}}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab contrastive mucow --hyp {input.hyp} --key {input.key} --lang-pair {wildcards.pair} "
        "--system {wildcards.heads} --out {output} 2> {log}"
