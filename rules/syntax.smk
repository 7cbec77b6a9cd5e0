# Syntax as data (paper C): parse the Moses-tokenised English source of each split once
# (cached), write the BPE'd source with per-piece syntax feature columns, the numeric
# feature vocabularies, and each parser's bracketing F1 on the PTB sample (Table A3).
# Only models whose head spec has a kind with `needs_syntax` (DEA, LPEA, RHE*) use them:
# rules/train.smk and rules/evaluate.smk switch to the featured files for those models.
import headlab.heads.spec
import headlab.syntax.features
import headlab.syntax.parse

SYNTAX_PARSERS = "|".join(headlab.syntax.parse.PARSERS)


def syntax_parser(w):
    """The model's -syntax_parser: its variant's override (training.overrides or the study's),
    else the default (`depconv`)."""
    return study_overrides(w).get("syntax_parser", headlab.syntax.parse.DEFAULT_PARSER)


def model_needs_syntax(w):
    return headlab.heads.spec.needs_syntax(w.heads)


def featured(w, split):
    """The source file a syntax model reads for `split`: featured by the model's parser."""
    return f"{DATA}/{w.corpus}/{w.pair}/{w.size}/feat/{syntax_parser(w)}/{split}.src"


def model_feature_columns(w):
    """The source-feature columns the model reads: the word boundaries (from the text) for
    head kinds that read words (Fword, syntax kinds), then a syntax model's parse columns."""
    return headlab.heads.spec.feature_columns(w.heads)


def feature_vocabularies(w):
    """{src_vocab}_feat{i} of the model's columns: OpenNMT-py reads them beside the source vocabulary."""
    return headlab.syntax.features.feature_vocab_paths(vocabularies(w)[0], len(model_feature_columns(w)))


def _english_source(w):
    if lang(w.pair, "src") != "en":
        raise ValueError(f"paper C parses the English source; pair {w.pair} of corpus {w.corpus} "
                         f"has source {lang(w.pair, 'src')!r}")
    return f"{DATA}/{w.corpus}/{w.pair}/{w.size}/tok/{w.split}.src"


rule parse:
    input:
        _english_source,
    output:
        f"{DATA}/{{corpus}}/{{pair}}/{{size}}/parse/{{parser}}/{{split}}.jsonl",
    wildcard_constraints:
        parser=SYNTAX_PARSERS,
    log:
        f"{LOGS}/parse/{{corpus}}/{{pair}}/{{size}}/{{parser}}/{{split}}.log",
    benchmark:
        f"{LOGS}/parse/{{corpus}}/{{pair}}/{{size}}/{{parser}}/{{split}}.benchmark.tsv"
    conda:
        "../envs/eval.yaml"
    shell:
        "OMP_NUM_THREADS=1 headlab parse --parser {wildcards.parser} --in {input} --out {output} 2> {log}"


rule featurize:
    input:
        bpe=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/bpe/{{split}}.src",
        parses=f"{DATA}/{{corpus}}/{{pair}}/{{size}}/parse/{{parser}}/{{split}}.jsonl",
    output:
        f"{DATA}/{{corpus}}/{{pair}}/{{size}}/feat/{{parser}}/{{split}}.src",
    wildcard_constraints:
        parser=SYNTAX_PARSERS,
    log:
        f"{LOGS}/featurize/{{corpus}}/{{pair}}/{{size}}/{{parser}}/{{split}}.log",
    conda:
        "../envs/eval.yaml"
    params:
        # the columns written (a changed layout rewrites the featured files)
        columns=",".join(headlab.syntax.features.feature_names()),
    shell:
        "headlab featurize --bpe {input.bpe} --parses {input.parses} --parser {wildcards.parser} "
        "--out {output} 2> {log}"


rule feature_vocab:
    output:
        [f"{DATA}/{{corpus}}/{{pair}}/{{size}}/{{vocab}}_feat{i}"
         for i in range(len(headlab.syntax.features.feature_names()))],
    wildcard_constraints:
        vocab=r"vocab(\.src)?\.txt",
    log:
        f"{LOGS}/feature_vocab/{{corpus}}/{{pair}}/{{size}}/{{vocab}}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab feature-vocab --src-vocab {DATA}/{wildcards.corpus}/{wildcards.pair}/{wildcards.size}/"
        "{wildcards.vocab} 2> {log}"


rule parser_f1:
    # Table A3: bracketing F1 of each parser on the PTB sample's 3,914 gold trees (~16 s on
    # one core for depconv); benepar only where its model is installed
    input:
        f"{DATA}/raw/ptb-sample/.verified",
    output:
        f"{RESULTS}/paper_C/parsers/{{parser}}.f1.csv",
    wildcard_constraints:
        parser=SYNTAX_PARSERS,
    log:
        f"{LOGS}/parser_f1/{{parser}}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "OMP_NUM_THREADS=1 headlab parser-eval --treebank {DATA}/raw/ptb-sample/treebank.zip "
        "--parser {wildcards.parser} --out {output} 2> {log}"
