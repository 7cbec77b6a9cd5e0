# Data: fetch (mirror first, sha256-verified) -> prepare (pair/split, validated, subsampled)
# -> Moses tokenise (or IndicNLP: corpora.NAME.tokenizers) -> truecase -> joint BPE -> shared
# vocabulary (paper A §4.1).


rule fetch:
    output:
        touch(f"{DATA}/raw/{{dataset}}/.verified"),
    params:
        flags=mirror_args(),
        files=lambda w: fetch_files(w.dataset),
    log:
        f"{LOGS}/fetch/{{dataset}}.log",
    conda:
        "../envs/data.yaml"
    shell:
        "headlab fetch --dataset {wildcards.dataset} --dest {DATA}/raw/{wildcards.dataset} "
        "{params.files} {params.flags} 2> {log}"


def _prepare_size_args(w):
    """Training data is subsampled to the size wildcard (a full-size one to train_limit where
    the corpus sets it); test sets only where the corpus sets test_limit (smoke tests and the
    GPU configs' CPU overlays: a random subset, same for every model)."""
    c = corpus(w.corpus)
    seed = c.get("subsample_seed", 1)
    if w.split == c["train"]:
        count = headlab.naming.size_count(w.size) or c.get("train_limit")
        return "" if count is None else f"--size {count} --seed {headlab.naming.size_seed(w.size, seed)}"
    if c.get("test_limit"):
        return f"--size {c['test_limit']} --seed {seed}"
    return ""


rule prepare:
    input:
        lambda w: f"{DATA}/raw/{corpus(w.corpus)['dataset']}/.verified",
    output:
        src=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/raw/{{split}}.src",
        tgt=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/raw/{{split}}.tgt",
    params:
        dataset=lambda w: corpus(w.corpus)["dataset"],
        size=_prepare_size_args,
    log:
        f"{LOGS}/prepare/{{corpus}}/{{pair}}/{{size}}/{{split}}.log",
    conda:
        "../envs/data.yaml"
    shell:
        "headlab prepare --dataset {params.dataset} --pair {wildcards.pair} --split {wildcards.split} "
        "--raw {DATA}/raw/{params.dataset} --out-src {output.src} --out-tgt {output.tgt} {params.size} 2> {log}"


rule tokenize:
    input:
        f"{DATA}/{{corpus}}/{{pair}}/{{size}}/raw/{{split}}.{{side}}",
    output:
        f"{DATA}/{{corpus}}/{{pair}}/{{size}}/tok/{{split}}.{{side}}",
    params:
        lang=lambda w: lang(w.pair, w.side),
        tokenizer=lambda w: tokenizer_arg(w.corpus, w.pair, w.side),
    log:
        f"{LOGS}/tokenize/{{corpus}}/{{pair}}/{{size}}/{{split}}.{{side}}.log",
    conda:
        "../envs/data.yaml"
    shell:
        "headlab preprocess tokenize --lang {params.lang} {params.tokenizer} --in {input} --out {output} 2> {log}"


rule truecase_train:
    input:
        lambda w: f"{DATA}/{w.corpus}/{w.pair}/{w.size}/tok/{corpus(w.corpus)['train']}.{w.side}",
    output:
        f"{DATA}/{{corpus}}/{{pair}}/{{size}}/truecase.{{side}}",
    log:
        f"{LOGS}/truecase/{{corpus}}/{{pair}}/{{size}}/{{side}}.log",
    conda:
        "../envs/data.yaml"
    shell:
        "headlab preprocess truecase-train --in {input} --model {output} 2> {log}"


rule truecase:
    input:
        text=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/tok/{{split}}.{{side}}",
        model=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/truecase.{{side}}",
    output:
        f"{DATA}/{{corpus}}/{{pair}}/{{size}}/tc/{{split}}.{{side}}",
    log:
        f"{LOGS}/truecase/{{corpus}}/{{pair}}/{{size}}/{{split}}.{{side}}.log",
    conda:
        "../envs/data.yaml"
    shell:
        "headlab preprocess truecase --model {input.model} --in {input.text} --out {output} 2> {log}"


rule bpe_learn:
    input:
        lambda w: expand(f"{DATA}/{w.corpus}/{w.pair}/{w.size}/tc/{corpus(w.corpus)['train']}.{{side}}",
                         side=["src", "tgt"]),
    output:
        f"{DATA}/{{corpus}}/{{pair}}/{{size}}/bpe.codes",
    params:
        merges=lambda w: corpus(w.corpus)["bpe_merges"],
    log:
        f"{LOGS}/bpe/{{corpus}}/{{pair}}/{{size}}/learn.log",
    conda:
        "../envs/data.yaml"
    shell:
        "headlab preprocess bpe-learn --merges {params.merges} --in {input} --codes {output} 2> {log}"


rule bpe_learn_side:
    # corpora with `bpe_joint: false` (paper A §4.2: "independent for Korean-English")
    input:
        lambda w: f"{DATA}/{w.corpus}/{w.pair}/{w.size}/tc/{corpus(w.corpus)['train']}.{w.side}",
    output:
        f"{DATA}/{{corpus}}/{{pair}}/{{size}}/bpe.{{side}}.codes",
    params:
        merges=lambda w: corpus(w.corpus)["bpe_merges"],
    log:
        f"{LOGS}/bpe/{{corpus}}/{{pair}}/{{size}}/learn.{{side}}.log",
    conda:
        "../envs/data.yaml"
    shell:
        "headlab preprocess bpe-learn --merges {params.merges} --in {input} --codes {output} 2> {log}"


def bpe_codes(w):
    if corpus(w.corpus).get("bpe_joint", True):
        return f"{DATA}/{w.corpus}/{w.pair}/{w.size}/bpe.codes"
    return f"{DATA}/{w.corpus}/{w.pair}/{w.size}/bpe.{w.side}.codes"


rule bpe_apply:
    input:
        text=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/tc/{{split}}.{{side}}",
        codes=bpe_codes,
    output:
        f"{DATA}/{{corpus}}/{{pair}}/{{size}}/bpe/{{split}}.{{side}}",
    log:
        f"{LOGS}/bpe/{{corpus}}/{{pair}}/{{size}}/{{split}}.{{side}}.log",
    conda:
        "../envs/data.yaml"
    shell:
        "headlab preprocess bpe-apply --codes {input.codes} --in {input.text} --out {output} 2> {log}"


rule vocab:
    input:
        lambda w: expand(f"{DATA}/{w.corpus}/{w.pair}/{w.size}/bpe/{corpus(w.corpus)['train']}.{{side}}",
                         side=["src", "tgt"]),
    output:
        f"{DATA}/{{corpus}}/{{pair}}/{{size}}/vocab.txt",
    log:
        f"{LOGS}/vocab/{{corpus}}/{{pair}}/{{size}}.log",
    conda:
        "../envs/onmt.yaml"
    shell:
        "headlab vocab --train {input} --out {output} 2> {log}"


rule vocab_separate:
    # `bpe_joint: false`: one vocabulary per side, from one OpenNMT-py build_vocab run
    input:
        lambda w: expand(f"{DATA}/{w.corpus}/{w.pair}/{w.size}/bpe/{corpus(w.corpus)['train']}.{{side}}",
                         side=["src", "tgt"]),
    output:
        src=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/vocab.src.txt",
        tgt=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/vocab.tgt.txt",
    log:
        f"{LOGS}/vocab/{{corpus}}/{{pair}}/{{size}}.separate.log",
    conda:
        "../envs/onmt.yaml"
    shell:
        "headlab vocab --train {input} --out {output.src} --out-tgt {output.tgt} 2> {log}"


def vocabularies(w):
    """The model's vocabulary file(s): one shared (joint BPE), or source then target."""
    folder = f"{DATA}/{w.corpus}/{w.pair}/{w.size}"
    if corpus(w.corpus).get("bpe_joint", True):
        return [f"{folder}/vocab.txt"]
    return [f"{folder}/vocab.src.txt", f"{folder}/vocab.tgt.txt"]


# One-sentence test splits that studies declare (paper C Figure 5's sentence): written as
# raw text, then tokenised, truecased, BPE-segmented and parsed like any test set.
SENTENCE_SPLITS = headlab.studies.sentence_splits(config)


rule sentence_split:
    output:
        src=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/raw/{{split}}.src",
        tgt=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/raw/{{split}}.tgt",
    wildcard_constraints:
        split="|".join(SENTENCE_SPLITS) or "(?!)",
    params:
        src=lambda w: SENTENCE_SPLITS[w.split][0],
        tgt=lambda w: SENTENCE_SPLITS[w.split][1],
    shell:
        "printf '%s\\n' {params.src:q} > {output.src} && printf '%s\\n' {params.tgt:q} > {output.tgt}"


ruleorder: sentence_split > prepare_local > prepare
