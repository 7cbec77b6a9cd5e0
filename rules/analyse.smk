# Analyses shared by all papers: contrastive suites brought into each model's own
# preprocessing (as extra "splits"), forced-decoding scores, DistilLingEval accuracy (by
# subject-verb distance), MuCoW WSD accuracy, and compare-mt bootstrap / length bins.
import headlab.workflow.code_digest


def _suite_limit(w):
    limit = corpus(w.corpus).get("test_limit")
    return f"--limit {limit}" if limit else ""


def _mucow_domains():
    return ",".join(config.get("evaluation", {}).get("mucow_domains", ["ted", "tatoeba"]))


rule suite_distil:
    input:
        headlab.naming.path("fetched", RESULTS, dataset="distil-lingeval"),
    output:
        src=pattern("raw", split="distil_{suite}", side="src"),
        tgt=pattern("raw", split="distil_{suite}", side="tgt"),
    wildcard_constraints:
        suite=r"[a-z_]+",
    params:
        limit=_suite_limit,
        code=module_code("headlab.eval.suite_split"),
    log:
        f"{LOGS}/suites/{{corpus}}/{{pair}}/{{size}}/distil_{{suite}}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab suite-split --suite distil_{wildcards.suite} --pair {wildcards.pair} --root {DATA}/raw "
        "{params.limit} --out-prefix {DATA}/{wildcards.corpus}/{wildcards.pair}/{wildcards.size}/raw/distil_{wildcards.suite} 2> {log}"


rule suite_mucow:
    input:
        headlab.naming.path("fetched", RESULTS, dataset="mucow"),
    output:
        src=pattern("raw", split="mucow", side="src"),
        tgt=pattern("raw", split="mucow", side="tgt"),
        key=pattern("mucow_key"),
    params:
        domains=_mucow_domains(),
        limit=_suite_limit,
        code=module_code("headlab.eval.suite_split"),
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
        model=pattern("checkpoint"),
        src=pattern("bpe", side="src"),
        tgt=pattern("bpe", side="tgt"),
    output:
        pattern("logprob"),
    params:
        ablation=_ablation_args,
        gpu="--gpu 0" if GPU else "",
        code=model_code("headlab.eval.forced"),
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
        headlab.naming.path("fetched", RESULTS, dataset="distil-lingeval"),
    output:
        pattern("distil_parses"),
    wildcard_constraints:
        suite=r"[a-z_]+",
        limit=r"|\.first[0-9]+",
    params:
        # the parser of the suite's sources (headlab contrastive distil-parse runs these two)
        code=module_code("headlab.eval.sva", "headlab.eval.suites"),
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
    return [headlab.naming.path("distil_parses", RESULTS, suite=w.suite, limit=f".first{limit}" if limit else "")]


rule distil_accuracy:
    input:
        scores=pattern("logprob", split="distil_{suite}"),
        fetched=headlab.naming.path("fetched", RESULTS, dataset="distil-lingeval"),
        parses=_distil_parses,
    output:
        pattern("distil_accuracy"),
    wildcard_constraints:
        suite=r"[a-z_]+",
    params:
        code=module_code("headlab.eval.contrastive"),  # a changed scorer rescores
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
        hyp=pattern("translation", split="mucow"),
        key=pattern("mucow_key"),
    output:
        csv=pattern("mucow_accuracy"),
        # hit / miss / other per sentence: the paired tests of effects.csv resample them
        details=pattern("mucow_details"),
    params:
        code=module_code("headlab.eval.contrastive"),  # a changed scorer rescores
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
        model = {k: w[k] for k in ("corpus", "pair", "size", "preset", "variant", "layers", "seed")}
        hyps[system] = headlab.naming.path("translation", RESULTS, {**model, "heads": heads}, split=w.split,
                                           ablation=ablation)
    return hyps


rule compare:
    input:
        unpack(_compare_hyps),
        ref=pattern("raw", side="tgt"),
    output:
        bootstrap=pattern("compare", part="bootstrap"),
        length=pattern("compare", part="length"),
    wildcard_constraints:
        systems=r"[^/]+",
    params:
        code=module_code("headlab.eval.compare"),  # a changed scorer rescores
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
        pattern("checkpoint"),
    output:
        pattern("params"),
    params:
        code=model_code("headlab.engine.params"),
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
        model=pattern("checkpoint"),
        # syntax models (paper C): the featured source, read with its feature columns
        src=_translate_source,
        tgt=pattern("bpe", side="tgt"),
    output:
        pattern("attention"),
    wildcard_constraints:
        site="enc|dec|cross",
    params:
        sents=config.get("evaluation", {}).get("attention_sentences", 100),
        code=model_code("headlab.engine.export"),
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
    return release_file("ud", f"{prefix}-ud-test.conllu.gz")


rule treebank_text:
    input:
        headlab.naming.path("fetched", RESULTS, dataset="ud"),
    output:
        pattern("raw", split="ud_{prefix}", side="src"),
    wildcard_constraints:
        prefix=r"[a-z]+_[a-z]+",
    params:
        gold=lambda w: _ud_gold(w.prefix),
        code=module_code("headlab.syntax.run"),
    log:
        f"{LOGS}/treebank/{{corpus}}/{{pair}}/{{size}}/ud_{{prefix}}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab treebank text --in {params.gold} --out {output} --pair {wildcards.pair} 2> {log}"


ruleorder: treebank_text > prepare


rule treebank_parse:
    input:
        pattern("raw", side="src"),
    output:
        pattern("gold_parse"),
    params:
        code=module_code("headlab.syntax.run"),
    log:
        f"{LOGS}/treebank/{{corpus}}/{{pair}}/{{size}}/{{split}}.spacy.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab treebank parse --in {input} --out {output} --pair {wildcards.pair} 2> {log}"


def _profile_inputs(w):
    kind, name = w.treebank.split("-", 1)
    if kind == "ud":
        return {"gold": headlab.naming.path("fetched", RESULTS, dataset="ud"),
                "src": data_file("bpe", w, split=f"ud_{name}", side="src")}
    return {"gold": data_file("gold_parse", w, split=name), "src": data_file("bpe", w, split=name, side="src")}


def _profile_gold(w, input):
    kind, name = w.treebank.split("-", 1)
    return _ud_gold(name) if kind == "ud" else input.gold


rule profile_heads:
    input:
        unpack(_profile_inputs),
        model=pattern("checkpoint"),
    output:
        csv=pattern("profile", part="csv"),
        baselines=pattern("profile", part="baselines.csv"),
        alignment=pattern("profile", part="alignment.json"),
        attention=pattern("profile", part="attention.npz"),
    wildcard_constraints:
        treebank=TREEBANK,
    params:
        gold=_profile_gold,
        prefix=lambda w, output: output.csv[:-len(".csv")],
        sents=lambda w: (f"--max-sents {config['evaluation']['profile_sentences']}"
                         if config.get("evaluation", {}).get("profile_sentences") else ""),
        figure=config.get("evaluation", {}).get("profile_figure_sentences", 10),
        gpu="--gpu 0" if GPU else "",
        code=model_code("headlab.syntax.run"),
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
