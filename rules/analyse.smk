# Analyses shared by all papers: contrastive suites brought into each model's own
# preprocessing (as extra "splits"), forced-decoding scores, DistilLingEval accuracy (by
# subject-verb distance), MuCoW WSD accuracy, and compare-mt bootstrap / length bins.


def _suite_limit(w):
    limit = corpus(w.corpus).get("test_limit")
    return f"--limit {limit}" if limit else ""


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
    params:
        limit=_suite_limit,
    log:
        f"{LOGS}/suites/{{corpus}}/{{pair}}/{{size}}/distil_{{suite}}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab suite-split --suite distil_{wildcards.suite} --pair {wildcards.pair} --root {DATA}/raw "
        "{params.limit} --out-prefix {DATA}/{wildcards.corpus}/{wildcards.pair}/{wildcards.size}/raw/distil_{wildcards.suite} 2> {log}"


rule suite_mucow:
    input:
        f"{DATA}/raw/mucow/.verified",
    output:
        src=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/raw/mucow.src",
        tgt=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/raw/mucow.tgt",
        key=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/raw/mucow.key",
    params:
        domains=_mucow_domains(),
        limit=_suite_limit,
    log:
        f"{LOGS}/suites/{{corpus}}/{{pair}}/{{size}}/mucow.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab suite-split --suite mucow --pair {wildcards.pair} --root {DATA}/raw --domains {params.domains} "
        "{params.limit} --out-prefix {DATA}/{wildcards.corpus}/{wildcards.pair}/{wildcards.size}/raw/mucow 2> {log}"


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
        gpu="--gpu 0" if GPU else "",
    log:
        f"{LOGS}/forced/{MODEL}/{{split}}.{{ablation}}.log",
    benchmark:
        f"{LOGS}/forced/{MODEL}/{{split}}.{{ablation}}.benchmark.tsv"
    threads: config["translation"].get("threads", 1)
    resources:
        **gpu_resources(GPU),
    conda:
        "../envs/onmt.yaml"
    shell:
        "OMP_NUM_THREADS={threads} headlab score --model {input.model} --src {input.src} --tgt {input.tgt} "
        "--out {output} --batch-size 24 {params.gpu} {params.ablation} > {log} 2>&1"


# The spaCy parses of a DistilLingEval suite's sources, for subject-verb distances (paper A
# Figure 3): once, as data, before any model is scored (each distil_accuracy job parsed them
# itself before, concurrent jobs all of them, and spaCy had to be where the models are scored).
rule distil_parses:
    input:
        f"{DATA}/raw/distil-lingeval/.verified",
    output:
        f"{DATA}/raw/distil-lingeval/{{suite}}.parses{{limit}}.json",
    wildcard_constraints:
        suite=r"[a-z_]+",
        limit=r"|\.first[0-9]+",
    params:
        limit=lambda w: f"--limit {w.limit[len('.first'):]}" if w.limit else "",
    log:
        f"{LOGS}/suites/distil_{{suite}}.parses{{limit}}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab contrastive distil-parse --suite {DATA}/raw/distil-lingeval/{wildcards.suite}.mt "
        "{params.limit} --out {output} 2> {log}"


def _distil_parses(w):
    """The parse cache a suite's accuracy reads (subject-verb distances: subj_verb_agreement only)."""
    if w.suite != "subj_verb_agreement":
        return []
    limit = corpus(w.corpus).get("test_limit")
    return [f"{DATA}/raw/distil-lingeval/{w.suite}.parses{f'.first{limit}' if limit else ''}.json"]


rule distil_accuracy:
    input:
        scores=f"{SCORES}/{MODEL}/distil_{{suite}}.{{ablation}}.logprob.tsv",
        fetched=f"{DATA}/raw/distil-lingeval/.verified",
        parses=_distil_parses,
    output:
        f"{SCORES}/{MODEL}/distil_{{suite}}.{{ablation}}.accuracy.csv",
    wildcard_constraints:
        suite=r"[a-z_]+",
    params:
        distance=lambda w: "" if w.suite == "subj_verb_agreement" else "--no-distance",
        limit=_suite_limit,
        parses=lambda w, input: f"--parse-cache {input.parses}" if input.parses else "",
    log:
        f"{LOGS}/contrastive/{MODEL}/distil_{{suite}}.{{ablation}}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab contrastive distil --suite {DATA}/raw/distil-lingeval/{wildcards.suite}.mt "
        "--scores {input.scores} --out {output} --system {wildcards.heads} {params.distance} {params.limit} "
        "{params.parses} 2> {log}"


rule mucow_accuracy:
    input:
        hyp=f"{TRANS}/{MODEL}/mucow.{{ablation}}.txt",
        key=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/raw/mucow.key",
    output:
        csv=f"{SCORES}/{MODEL}/mucow.{{ablation}}.mucow.csv",
        # hit / miss / other per sentence: the paired tests of effects.csv resample them
        details=f"{SCORES}/{MODEL}/mucow.{{ablation}}.mucow.details.txt",
    log:
        f"{LOGS}/contrastive/{MODEL}/mucow.{{ablation}}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab contrastive mucow --hyp {input.hyp} --key {input.key} --lang-pair {wildcards.pair} "
        "--system {wildcards.heads} --details {output.details} --out {output.csv} 2> {log}"


# compare-mt over several systems of one group (same data, preset, layers and seed):
# systems = "HEADS.ABLATION--HEADS.ABLATION--..." with the baseline first ("--": head
# names hold "~" for mixers).
GROUP = "{corpus}/{pair}/{size}/{preset}/{variant}/{layers}/seed{seed}"


def _compare_hyps(w):
    hyps = {}
    for system in w.systems.split("--"):
        heads, ablation = system.rsplit(".", 1)
        hyps[system] = (f"{TRANS}/{w.corpus}/{w.pair}/{w.size}/{w.preset}/{w.variant}/{w.layers}/{heads}/"
                        f"seed{w.seed}/{w.split}.{ablation}.txt")
    return hyps


rule compare:
    input:
        unpack(_compare_hyps),
        ref=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/raw/{{split}}.tgt",
    output:
        bootstrap=f"{SCORES}/compare/{GROUP}/{{split}}/{{systems}}.bootstrap.csv",
        length=f"{SCORES}/compare/{GROUP}/{{split}}/{{systems}}.length.csv",
    wildcard_constraints:
        systems=r"[^/]+",
    params:
        systems=lambda w, input: " ".join(f"--sys {s}::{input[s]}" for s in w.systems.split("--")),
        baseline=lambda w: w.systems.split("--")[0],
        samples=config.get("evaluation", {}).get("bootstrap_samples", 1000),
        p=config.get("evaluation", {}).get("significance", 0.05),
    log:
        f"{LOGS}/compare/{GROUP}/{{split}}/{{systems}}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab compare --ref {input.ref} {params.systems} --baseline {params.baseline} "
        "--samples {params.samples} --p {params.p} --bootstrap-out {output.bootstrap} "
        "--length-out {output.length} --tag pair={wildcards.pair} --tag layers={wildcards.layers} 2> {log}"


rule params:
    input:
        f"{MODELS}/{MODEL}/model.pt",
    output:
        f"{SCORES}/{MODEL}/params.json",
    log:
        f"{LOGS}/params/{MODEL}.log",
    conda:
        "../envs/onmt.yaml"
    shell:
        "headlab params --model {input} --out {output} 2> {log}"


# Per-layer, per-head attention of one site on the first test sentences (encoder self-,
# decoder self- and cross-attention, teacher-forced on the reference) and, for DHICM
# layers, the importance of each head for each token (paper B Figures 1-3).
rule export_attention:
    input:
        model=f"{MODELS}/{MODEL}/model.pt",
        # syntax models (paper C): the featured source, read with its feature columns
        src=_translate_source,
        tgt=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/bpe/{{split}}.tgt",
    output:
        f"{SCORES}/{MODEL}/{{split}}.{{site}}.attention.npz",
    wildcard_constraints:
        site="enc|dec|cross",
    params:
        sents=config.get("evaluation", {}).get("attention_sentences", 100),
    log:
        f"{LOGS}/export_attention/{MODEL}/{{split}}.{{site}}.log",
    conda:
        "../envs/onmt.yaml"
    shell:
        "headlab export-attention --model {input.model} --src {input.src} --tgt {input.tgt} "
        "--site {wildcards.site} --max-sents {params.sents} --out {output} 2> {log}"


# Paper D §2.2: the syntactic profile of a model's encoder heads against gold trees.
# TREEBANK is "ud-<prefix>" (a UD test file of the `ud` dataset, e.g. ud-en_ewt, ud-en_pud)
# or "spacy-<split>" (the corpus's own split parsed with spaCy). A UD treebank's text
# becomes the split "ud_<prefix>" of the model's corpus, so the pair's own tokenize /
# truecase / bpe rules (rules/data.smk) preprocess it as they do every split.
TREEBANK = r"ud-[a-z]+_[a-z]+|spacy-[A-Za-z0-9_]+"


def _ud_gold(prefix):
    return f"{DATA}/raw/ud/{prefix}-ud-test.conllu.gz"


rule treebank_text:
    input:
        f"{DATA}/raw/ud/.verified",
    output:
        f"{DATA}/{{corpus}}/{{pair}}/{{size}}/raw/ud_{{prefix}}.src",
    wildcard_constraints:
        prefix=r"[a-z]+_[a-z]+",
    params:
        gold=lambda w: _ud_gold(w.prefix),
    log:
        f"{LOGS}/treebank/{{corpus}}/{{pair}}/{{size}}/ud_{{prefix}}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab treebank text --in {params.gold} --out {output} --pair {wildcards.pair} 2> {log}"


ruleorder: treebank_text > prepare


rule treebank_parse:
    input:
        f"{DATA}/{{corpus}}/{{pair}}/{{size}}/raw/{{split}}.src",
    output:
        f"{DATA}/{{corpus}}/{{pair}}/{{size}}/gold/{{split}}.spacy.conllu",
    log:
        f"{LOGS}/treebank/{{corpus}}/{{pair}}/{{size}}/{{split}}.spacy.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab treebank parse --in {input} --out {output} --pair {wildcards.pair} 2> {log}"


def _profile_inputs(w):
    kind, name = w.treebank.split("-", 1)
    folder = f"{DATA}/{w.corpus}/{w.pair}/{w.size}"
    if kind == "ud":
        return {"gold": f"{DATA}/raw/ud/.verified", "src": f"{folder}/bpe/ud_{name}.src"}
    return {"gold": f"{folder}/gold/{name}.spacy.conllu", "src": f"{folder}/bpe/{name}.src"}


def _profile_gold(w, input):
    kind, name = w.treebank.split("-", 1)
    return _ud_gold(name) if kind == "ud" else input.gold


rule profile_heads:
    input:
        unpack(_profile_inputs),
        model=f"{MODELS}/{MODEL}/model.pt",
    output:
        csv=f"{SCORES}/{MODEL}/profile/{{treebank}}.csv",
        baselines=f"{SCORES}/{MODEL}/profile/{{treebank}}.baselines.csv",
        alignment=f"{SCORES}/{MODEL}/profile/{{treebank}}.alignment.json",
        attention=f"{SCORES}/{MODEL}/profile/{{treebank}}.attention.npz",
    wildcard_constraints:
        treebank=TREEBANK,
    params:
        gold=_profile_gold,
        prefix=lambda w, output: output.csv[:-len(".csv")],
        sents=lambda w: (f"--max-sents {config['evaluation']['profile_sentences']}"
                         if config.get("evaluation", {}).get("profile_sentences") else ""),
        figure=config.get("evaluation", {}).get("profile_figure_sentences", 10),
        gpu="--gpu 0" if GPU else "",
    log:
        f"{LOGS}/profile/{MODEL}/{{treebank}}.log",
    benchmark:
        f"{LOGS}/profile/{MODEL}/{{treebank}}.benchmark.tsv"
    resources:
        **gpu_resources(GPU),
    conda:
        "../envs/onmt.yaml"
    shell:
        "headlab profile-heads --model {input.model} --treebank {params.gold} --src {input.src} "
        "--pair {wildcards.pair} --out {params.prefix} {params.sents} --figure-sents {params.figure} "
        "{params.gpu} 2> {log}"
