# Learning curves: each trained model's training/validation loss and accuracy over steps,
# parsed from OpenNMT-py's train.log into a tidy CSV beside its scores (publish copies it);
# every study draws its models' curves as the `learning_curves` figure (rules/tables.smk).


rule learning_curve:
    input:
        # the finished model: its train.log (written by headlab train) is complete then
        pattern("checkpoint"),
    output:
        pattern("learning_curve"),
    params:
        train_log=lambda w: model_file("train_log", w),
        code=module_code("headlab.engine.logs"),
    log:
        f"{LOGS}/learning_curve/{MODEL}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab learning-curve --log {params.train_log} --out {output} 2> {log}"
