# Data: fetch (mirror first, sha256-verified) -> prepare (pair/split, validated, subsampled)
# -> Moses tokenise (or IndicNLP: corpora.NAME.tokenizers) -> truecase -> joint BPE -> shared
# vocabulary (paper A §4.1).


rule fetch:
    output:
        touch(pattern("fetched")),
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
        lambda w: headlab.naming.path("fetched", RESULTS, dataset=corpus(w.corpus)["dataset"]),
    output:
        src=pattern("raw", side="src"),
        tgt=pattern("raw", side="tgt"),
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
        pattern("raw"),
    output:
        pattern("tokenized"),
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
        lambda w: data_file("tokenized", w, split=corpus(w.corpus)["train"], side=w.side),
    output:
        pattern("truecase_model"),
    log:
        f"{LOGS}/truecase/{{corpus}}/{{pair}}/{{size}}/{{side}}.log",
    conda:
        "../envs/data.yaml"
    shell:
        "headlab preprocess truecase-train --in {input} --model {output} 2> {log}"


rule truecase:
    input:
        text=pattern("tokenized"),
        model=pattern("truecase_model"),
    output:
        pattern("truecased"),
    log:
        f"{LOGS}/truecase/{{corpus}}/{{pair}}/{{size}}/{{split}}.{{side}}.log",
    conda:
        "../envs/data.yaml"
    shell:
        "headlab preprocess truecase --model {input.model} --in {input.text} --out {output} 2> {log}"


rule bpe_learn:
    input:
        lambda w: [data_file("truecased", w, split=corpus(w.corpus)["train"], side=side) for side in ("src", "tgt")],
    output:
        pattern("bpe_codes"),
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
        lambda w: data_file("truecased", w, split=corpus(w.corpus)["train"], side=w.side),
    output:
        pattern("bpe_side_codes"),
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
        return data_file("bpe_codes", w)
    return data_file("bpe_side_codes", w, side=w.side)


rule bpe_apply:
    input:
        text=pattern("truecased"),
        codes=bpe_codes,
    output:
        pattern("bpe"),
    log:
        f"{LOGS}/bpe/{{corpus}}/{{pair}}/{{size}}/{{split}}.{{side}}.log",
    conda:
        "../envs/data.yaml"
    shell:
        "headlab preprocess bpe-apply --codes {input.codes} --in {input.text} --out {output} 2> {log}"


rule vocab:
    input:
        lambda w: [data_file("bpe", w, split=corpus(w.corpus)["train"], side=side) for side in ("src", "tgt")],
    output:
        pattern("vocab"),
    log:
        f"{LOGS}/vocab/{{corpus}}/{{pair}}/{{size}}.log",
    conda:
        "../envs/onmt.yaml"
    shell:
        "headlab vocab --train {input} --out {output} 2> {log}"


rule vocab_separate:
    # `bpe_joint: false`: one vocabulary per side, from one OpenNMT-py build_vocab run
    input:
        lambda w: [data_file("bpe", w, split=corpus(w.corpus)["train"], side=side) for side in ("src", "tgt")],
    output:
        src=pattern("vocab_side", side="src"),
        tgt=pattern("vocab_side", side="tgt"),
    log:
        f"{LOGS}/vocab/{{corpus}}/{{pair}}/{{size}}.separate.log",
    conda:
        "../envs/onmt.yaml"
    shell:
        "headlab vocab --train {input} --out {output.src} --out-tgt {output.tgt} 2> {log}"


def vocabularies(w):
    """The model's vocabulary file(s): one shared (joint BPE), or source then target."""
    if corpus(w.corpus).get("bpe_joint", True):
        return [data_file("vocab", w)]
    return [data_file("vocab_side", w, side=side) for side in ("src", "tgt")]


# One-sentence test splits that studies declare (paper C Figure 5's sentence): written as
# raw text, then tokenised, truecased, BPE-segmented and parsed like any test set.
SENTENCE_SPLITS = headlab.studies.sentence_splits(config)


rule sentence_split:
    output:
        src=pattern("raw", side="src"),
        tgt=pattern("raw", side="tgt"),
    wildcard_constraints:
        split="|".join(SENTENCE_SPLITS) or "(?!)",
    params:
        src=lambda w: SENTENCE_SPLITS[w.split][0],
        tgt=lambda w: SENTENCE_SPLITS[w.split][1],
    shell:
        "printf '%s\\n' {params.src:q} > {output.src} && printf '%s\\n' {params.tgt:q} > {output.tgt}"


ruleorder: sentence_split > prepare_local > prepare
