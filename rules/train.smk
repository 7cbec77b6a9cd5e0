# Training: one OpenNMT-py config per model of the grid, generated from a named preset
# (src/headlab/presets.yaml) and validated, then `headlab train` (resumes after a crash).
import headlab.engine.config
import headlab.engine.logs


def _data(w, split, side, kind="bpe"):
    """A split's BPE'd file; a syntax model's source is the featured file (rules/syntax.smk)."""
    if side == "src" and kind == "bpe" and model_needs_syntax(w):
        return featured(w, split)
    return f"{DATA}/{w.corpus}/{w.pair}/{w.size}/{kind}/{split}.{side}"


rule onmt_config:
    input:
        train=lambda w: [_data(w, corpus(w.corpus)["train"], s) for s in ("src", "tgt")],
        valid=lambda w: [_data(w, corpus(w.corpus)["valid"], s) for s in ("src", "tgt")],
        vocab=vocabularies,
        # syntax models: OpenNMT-py reads {src_vocab}_feat{i} (not passed on the command line)
        feature_vocab=lambda w: feature_vocabularies(w) if model_needs_syntax(w) else [],
    output:
        f"{MODELS}/{MODEL}/onmt.yaml",
    wildcard_constraints:
        tune=r"(?:)",           # trained from scratch (fine-tunes: finetune_config)
    params:
        # the resolved preset: a changed preset reruns the models that use it, and only them
        # (presets.yaml as an input reran every model when any preset was added or edited)
        preset=lambda w: json.dumps(headlab.engine.config.resolve_preset(w.preset), sort_keys=True),
        sets=lambda w: " ".join(
            f"--set {k}={json.dumps(v)!r}" for k, v in sorted(study_overrides(w).items())
        ) + headlab.engine.logs.tensorboard_args(config, model_dir(w)),
        gpu=f"--gpus {TRAIN_GPUS}" if TRAIN_GPUS else "",
        save_dir=model_dir,
    log:
        f"{LOGS}/onmt_config/{MODEL}.log",
    conda:
        "../envs/onmt.yaml"
    shell:
        "headlab onmt-config --preset {wildcards.preset} --layers '{wildcards.layers}' "
        "--heads '{wildcards.heads}' --seed {wildcards.seed} --train {input.train} "
        "--valid {input.valid} --vocab {input.vocab} --save-dir {params.save_dir} "
        "{params.sets} {params.gpu} --out {output} 2> {log}"


def _parent_dir(w):
    """The model directory a fine-tune (or a checkpoint snapshot) starts from."""
    return f"{MODELS}/" + headlab.naming.model_path(headlab.naming.parent(dict(w)))


# A fine-tune of any model: its path is the parent's plus /ft_OPTIONS (headlab.naming);
# the parent's checkpoint is an input, so a retrained parent retrains its children.
rule finetune_config:
    input:
        model=lambda w: f"{_parent_dir(w)}/model.pt",
        config=lambda w: f"{_parent_dir(w)}/onmt.yaml",
    output:
        config=f"{MODELS}/{MODEL}/onmt.yaml",
        init=f"{MODELS}/{MODEL}/init.pt",
    wildcard_constraints:
        tune=rf"(?:{headlab.naming.TUNE_SEGMENT})+",
    params:
        save_dir=model_dir,
    log:
        f"{LOGS}/finetune_config/{MODEL}.log",
    conda:
        "../envs/onmt.yaml"
    shell:
        "headlab finetune-config --parent {input.model} --parent-config {input.config} "
        "--tune '{wildcards.tune}' --save-dir {params.save_dir} --out {output.config} 2> {log}"


# The checkpoint of step N of a fine-tune as a model of its own (/step_N; 0: init.pt, the
# parent with the new parameters), for BLEU over fine-tuning (paper D Table 3).
rule snapshot:
    input:
        lambda w: f"{_parent_dir(w)}/model.pt",
    output:
        f"{MODELS}/{MODEL}/model.pt",
    wildcard_constraints:
        tune=rf"(?:{headlab.naming.TUNE_SEGMENT})+/step_[0-9]+",
    params:
        source=lambda w: (f"{_parent_dir(w)}/init.pt" if w.tune.endswith("/step_0") else
                          f"{_parent_dir(w)}/model_step_{w.tune.rsplit('/step_', 1)[1]}.pt"),
    log:
        f"{LOGS}/snapshot/{MODEL}.log",
    shell:
        "mkdir -p $(dirname {output}) && (ln -f {params.source} {output} || cp {params.source} {output}) 2> {log}"


rule train:
    input:
        f"{MODELS}/{MODEL}/onmt.yaml",
    output:
        f"{MODELS}/{MODEL}/model.pt",
    log:
        f"{MODELS}/{MODEL}/train.log",
    benchmark:
        f"{MODELS}/{MODEL}/train.benchmark.tsv"
    wildcard_constraints:
        tune=rf"(?:{headlab.naming.TUNE_SEGMENT})*",
    threads: config.get("training", {}).get("threads", 2)
    resources:
        **gpu_resources(TRAIN_GPUS),
    conda:
        "../envs/onmt.yaml"
    shell:
        "OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} "
        "headlab train -config {input} >> {log} 2>&1"


# Converged hard-concrete gate values of a gated model (paper D Table 2).
rule gates:
    input:
        f"{MODELS}/{MODEL}/model.pt",
    output:
        f"{SCORES}/{MODEL}/gates.csv",
    log:
        f"{LOGS}/gates/{MODEL}.log",
    conda:
        "../envs/onmt.yaml"
    shell:
        "headlab gates --model {input} --out {output} 2> {log}"
