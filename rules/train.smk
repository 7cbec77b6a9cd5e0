# Training: one OpenNMT-py config per model of the grid, generated from a named preset
# (src/headlab/presets.yaml) and validated, then `headlab train` (resumes after a crash).
import headlab.engine.config
import headlab.engine.logs


def _data(w, split, side):
    """A split's BPE'd file; a syntax model's source is the featured file (rules/syntax.smk)."""
    if side == "src" and model_needs_syntax(w):
        return featured(w, split)
    return data_file("bpe", w, split=split, side=side)


def _train_files(w):
    return [_data(w, corpus(w.corpus)["train"], s) for s in ("src", "tgt")]


def _valid_files(w):
    return [_data(w, corpus(w.corpus)["valid"], s) for s in ("src", "tgt")]


def _train_config(w):
    """A model's OpenNMT-py config as YAML text, built in the workflow's own process by
    :func:`headlab.engine.config.train_config` (which ``headlab onmt-config`` also calls):
    the DAG check has already built every model's config here, and a job of its own would
    start Python and import torch (through the head-kind registry) for each of ~100 models,
    1.8 s of CPU each. Being the job's params, the whole config is also what reruns a model:
    a changed preset, override or option reruns the models it changes, and only them
    (presets.yaml as an input reran every model when any preset was added or edited).
    It takes the wildcards only, and finds its files with the rule's own input functions:
    Snakemake leaves a params function that takes ``input`` (or output, threads, resources)
    out of its params-change check as "derived" from files (Rule._is_deriving_function,
    Job.non_derived_params), so with ``input`` no change of the text ever reran a model."""
    overrides = {**study_overrides(w), **headlab.engine.logs.tensorboard_options(config, model_dir(w))}
    train, valid = _train_files(w), _valid_files(w)
    options = headlab.engine.config.train_config(
        preset=w.preset, layers=w.layers, heads=w.heads, seed=int(w.seed),
        train_src=train[0], train_tgt=train[1], valid_src=valid[0],
        valid_tgt=valid[1], vocab=list(vocabularies(w)), save_dir=model_dir(w), overrides=overrides,
        device="gpu" if GPU else "cpu", precision=PRECISION, gpus=TRAIN_GPUS)
    return headlab.engine.config.to_yaml(options)


# writes the config built above: no Python process, and on SLURM no cluster job (localrules)
localrules: onmt_config


rule onmt_config:
    input:
        train=_train_files,
        valid=_valid_files,
        vocab=vocabularies,
        # models reading words or syntax: OpenNMT-py reads {src_vocab}_feat{i} (not passed on the command line)
        feature_vocab=feature_vocabularies,
    output:
        pattern("onmt_config"),
    wildcard_constraints:
        tune=r"(?:)",           # trained from scratch (fine-tunes: finetune_config)
    params:
        text=_train_config,
    shell:
        "printf '%s' {params.text:q} > {output:q}"


def _parent_file(kind, w, **fields):
    """File `kind` of the model a fine-tune (or a checkpoint snapshot) starts from."""
    return model_file(kind, headlab.naming.parent({k: w[k] for k in MODEL_KEYS}), **fields)


# A fine-tune of any model: its path is the parent's plus /ft_OPTIONS (headlab.naming);
# the parent's checkpoint is an input, so a retrained parent retrains its children.
rule finetune_config:
    input:
        model=lambda w: _parent_file("checkpoint", w),
        config=lambda w: _parent_file("onmt_config", w),
    output:
        config=pattern("onmt_config"),
        init=pattern("initial_checkpoint"),
    wildcard_constraints:
        tune=rf"(?:{headlab.naming.TUNE_SEGMENT})+",
    params:
        save_dir=model_dir,
    log:
        f"{LOGS}/finetune_config/{MODEL}.log",
    priority: PRIORITY["stage"]
    conda:
        "../envs/onmt.yaml"
    shell:
        "headlab finetune-config --parent {input.model} --parent-config {input.config} "
        "--tune '{wildcards.tune}' --save-dir {params.save_dir} --out {output.config} 2> {log}"


# The checkpoint of step N of a fine-tune as a model of its own (/step_N; 0: init.pt, the
# parent with the new parameters), for BLEU over fine-tuning (paper D Table 3).
rule snapshot:
    input:
        lambda w: _parent_file("checkpoint", w),
    output:
        pattern("checkpoint"),
    wildcard_constraints:
        tune=rf"(?:{headlab.naming.TUNE_SEGMENT})+/step_[0-9]+",
    params:
        source=lambda w: (_parent_file("initial_checkpoint", w) if w.tune.endswith("/step_0") else
                          _parent_file("step_checkpoint", w, step=w.tune.rsplit("/step_", 1)[1])),
    log:
        f"{LOGS}/snapshot/{MODEL}.log",
    shell:
        "mkdir -p $(dirname {output}) && (ln -f {params.source} {output} || cp {params.source} {output}) 2> {log}"


rule train:
    input:
        pattern("onmt_config"),
    output:
        pattern("checkpoint"),
    # the console; the learning curve's train.log beside the checkpoints is headlab train's
    # own (appended to by a resume, which Snakemake would empty as a declared log)
    log:
        f"{LOGS}/train/{MODEL}.log",
    benchmark:
        pattern("train_benchmark")
    wildcard_constraints:
        tune=rf"(?:{headlab.naming.TUNE_SEGMENT})*",
    threads: config.get("training", {}).get("threads", 2)
    # trainings before the short jobs that read them (PRIORITY in rules/common.smk)
    priority: PRIORITY["train"]
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
        pattern("checkpoint"),
    output:
        pattern("gates"),
    params:
        code=module_code("headlab.heads.gates"),    # reads the checkpoint's gate values, runs no kind
    log:
        f"{LOGS}/gates/{MODEL}.log",
    priority: PRIORITY["stage"]
    conda:
        "../envs/onmt.yaml"
    shell:
        "headlab gates --model {input} --out {output} 2> {log}"
