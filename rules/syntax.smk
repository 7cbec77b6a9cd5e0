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
    return data_file("features", w, parser=syntax_parser(w), split=split)


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
    return data_file("tokenized", w, split=w.split, side="src")


rule parse:
    input:
        _english_source,
    output:
        pattern("parse"),
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
        bpe=pattern("bpe", side="src"),
        parses=pattern("parse"),
    output:
        pattern("features"),
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
        [pattern("feature_vocab", index=str(i)) for i in range(len(headlab.syntax.features.feature_names()))],
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
        headlab.naming.path("fetched", RESULTS, dataset="ptb-sample"),
    output:
        # paper C's folder (headlab.studies.paper_C reads them there)
        pattern("parser_f1", outdir=STUDIES["paper_C"].outdir),
    wildcard_constraints:
        parser=SYNTAX_PARSERS,
    params:
        code=module_code("headlab.syntax.evalb"),
    log:
        f"{LOGS}/parser_f1/{{parser}}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "OMP_NUM_THREADS=1 headlab parser-eval --treebank {DATA}/raw/ptb-sample/treebank.zip "
        "--parser {wildcards.parser} --out {output} 2> {log}"
