# Evaluation: beam search on every configured test set (optionally with an encoder head
# disabled, paper A §4.3), un-BPE + detruecase + detokenise, then sacreBLEU with its 95%
# bootstrap confidence interval (evaluation.bootstrap_samples resamples; 0 or 1: none).
import headlab.engine.config
import headlab.workflow.code_digest



def _translate_source(w):
    """The test source: featured by the model's parser for syntax models (rules/syntax.smk)."""
    if model_needs_syntax(w):
        return featured(w, w.split)
    return data_file("bpe", w, split=w.split, side="src")


def _feature_args(w):
    """Source features as the model was trained with them: the word-boundary column (from the
    text, by the headlab_words transform) and a syntax model's parse columns."""
    return headlab.engine.config.feature_args(model_feature_columns(w))


def _ablation_args(w):
    if w.ablation.startswith("no-h"):
        return f"-disable_enc_heads {w.ablation[len('no-h'):]}"
    if w.ablation == "rhe-prune":  # paper C Table 2: RHE's redundant heads pruned at test time
        return "-rhe_prune"
    return ""


def _translated_model(w):
    """``avgN``: the average of the last N checkpoints (paper C §A.1); otherwise the model."""
    if w.ablation.startswith("avg"):
        return model_file("averaged_checkpoint", w, n=w.ablation[len("avg"):])
    return model_file("checkpoint", w)


rule average_checkpoints:
    input:
        pattern("checkpoint"),
    output:
        pattern("averaged_checkpoint"),
    wildcard_constraints:
        n=r"[0-9]+",
    params:
        prefix=lambda w, input: os.path.join(os.path.dirname(input[0]), "model"),
    log:
        f"{LOGS}/average/{MODEL}/avg{{n}}.log",
    conda:
        "../envs/onmt.yaml"
    shell:
        "headlab average --save-model {params.prefix} --last {wildcards.n} --output {output} 2> {log}"


rule translate:
    input:
        model=_translated_model,
        src=_translate_source,
    output:
        pattern("translation_bpe"),
    params:
        ablation=_ablation_args,
        features=_feature_args,
        gpu="-gpu 0" if GPU else "",
        precision=translate_precision_args,
        beam=config["translation"].get("beam_size", 5),
        batch=config["translation"].get("batch_size", 3000),
        batch_type=config["translation"].get("batch_type", "tokens"),
        max_length=config["translation"].get("max_length", 250),
        code=model_code("headlab.engine.run"),     # a changed engine or kind retranslates
    log:
        f"{LOGS}/translate/{MODEL}/{{split}}.{{ablation}}.log",
    benchmark:
        f"{LOGS}/translate/{MODEL}/{{split}}.{{ablation}}.benchmark.tsv"
    threads: config["translation"].get("threads", 1)
    resources:
        **gpu_resources(GPU),
    conda:
        "../envs/onmt.yaml"
    shell:
        "OMP_NUM_THREADS={threads} headlab translate -model {input.model} -src {input.src} "
        "-output {output} -beam_size {params.beam} -batch_size {params.batch} "
        "-batch_type {params.batch_type} -max_length {params.max_length} {params.gpu} {params.precision} "
        "{params.ablation} {params.features} > {log} 2>&1"


rule postprocess:
    input:
        pattern("translation_bpe"),
    output:
        pattern("translation"),
    params:
        lang=lambda w: lang(w.pair, "tgt"),
        tokenizer=lambda w: tokenizer_arg(w.corpus, w.pair, "tgt"),
        code=module_code("headlab.data.preprocess"),   # a changed detokeniser rescores
    log:
        f"{LOGS}/postprocess/{MODEL}/{{split}}.{{ablation}}.log",
    conda:
        "../envs/data.yaml"
    shell:
        "headlab preprocess postprocess --lang {params.lang} {params.tokenizer} --in {input} --out {output} 2> {log}"


rule bleu:
    input:
        hyp=pattern("translation"),
        ref=pattern("raw", side="tgt"),
    output:
        pattern("score"),
    params:
        code=module_code("headlab.eval.bleu"),  # a changed scorer rescores
        pair=lambda w: w.pair,
        confidence=config.get("evaluation", {}).get("bootstrap_samples", 1000),
    log:
        f"{LOGS}/bleu/{MODEL}/{{split}}.{{ablation}}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab bleu --hyp {input.hyp} --ref {input.ref} --lang-pair {params.pair} "
        "--confidence {params.confidence} --out {output} 2> {log}"
