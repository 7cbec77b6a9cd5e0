# Study outputs: tables (csv/md/tex), figures (png/pdf + data csv), the paper's claims judged
# (effects.csv) and generated READMEs; results/effects.md over every study. One generic rule
# each; the builders live in the study packages (src/headlab/studies/<study>/, their contract
# headlab.studies.base.Study).
import headlab.workflow.code_digest

OUTDIRS = {STUDIES[name].outdir: name for name in config["studies"]}


def _finished_stages(study, until=None):
    """Wait for the study's search stages (Snakemake checkpoints) before naming the models
    they choose: all of them, or the earlier stages of ``until``'s (corpus, pair, stage).
    Every pair's first unfinished stage is waited for at once (one exception naming them
    all, which snakemake turns into one input each): raising at the first one, as
    ``checkpoints.X.get`` does, ran the searches of paper B's pairs one after another."""
    from snakemake.exceptions import IncompleteCheckpointException

    stages = STUDIES[study].stages
    order = lambda stage: stages.index(stage.rsplit("/", 1)[-1])  # "seedN/gates": one stage per seed
    pending, waiting = [], set()
    for key in headlab.studies.stage_keys(config, study):
        pair = (key["corpus"], key["pair"])
        chain = (*pair, key["stage"].rpartition("/")[0])  # the stages of a pair (and seed) run in order
        if chain in waiting or until is not None and (pair != until[:2] or order(key["stage"]) >= order(until[2])):
            continue
        try:
            checkpoints.study_stage.get(outdir=STUDIES[study].outdir, **key)
        except IncompleteCheckpointException as err:
            pending.append(err)
            waiting.add(chain)  # its later stages need this one first
    if pending:
        raise IncompleteCheckpointException(pending[0].rule, [str(err.targetfile) for err in pending])


def _study_output_inputs(w, name=None):
    study = OUTDIRS[w.outdir]
    _finished_stages(study)
    return headlab.studies.inputs(config, study, name or getattr(w, "name", "README"), RESULTS)


def _stage_inputs(w):
    study = OUTDIRS[w.outdir]
    _finished_stages(study, until=(w.corpus, w.pair, w.stage))
    return headlab.studies.stage_inputs(config, study, w.corpus, w.pair, w.stage, RESULTS)


def _slice(part):
    """One part of the study's own config slice (headlab.studies.config_slices)."""
    return lambda w: headlab.studies.config_slices(config, OUTDIRS[w.outdir])[part]


# a study's outputs get only its own config slice: changing study X reruns nothing of study Y
SLICES = dict(cfg_study=_slice("study"), cfg_corpora=_slice("corpora"), cfg_settings=_slice("settings"))
# ... and the digest of the code that renders them (headlab.workflow.code_digest): Snakemake's
# code trigger sees a rule's own text, not the modules its command imports, so a corrected claim
# or reference number would leave the existing tables as they were; as a param it reruns that
# study's rendering (seconds) and nothing else
RENDER_CODE = {outdir: headlab.workflow.code_digest.study_digest(headlab.workflow.code_digest.package_of(STUDIES[name]))
               for outdir, name in OUTDIRS.items()}
RENDERED = dict(SLICES, code=lambda w: RENDER_CODE[w.outdir])
# a search stage: the settings it reads itself, not evaluation's (headlab.studies.STAGE_SETTINGS)
STAGE_SLICES = dict(SLICES, cfg_settings=_slice("stage_settings"))
SLICE_ARGS = (
    "--config-json {params.cfg_study:q} --config-json {params.cfg_corpora:q} --config-json {params.cfg_settings:q}"
)


def _prefix(w, output):
    """What `headlab study-table --out` names: the output files less their extensions."""
    return os.path.splitext(output[0])[0]


def _names(kind):
    """The table or figure names of the configured studies, as a wildcard constraint."""
    names = [name for study in config["studies"] for name in getattr(STUDIES[study], kind)]
    names += list(headlab.studies.COMMON_FIGURES) if kind == "figures" else []
    return "|".join(names) or "^$"


# A data-dependent DAG (paper B's two-stage grid search): each stage's choice is a JSON
# file; the models of later stages and the final systems are read from it.
checkpoint study_stage:
    input:
        _stage_inputs,
    output:
        pattern("stage"),
    wildcard_constraints:
        outdir="|".join(OUTDIRS),
        # a stage, or one stage per seed (paper D: seedN/gates)
        stage=r"(?:seed[0-9]+/)?[A-Za-z0-9_]+",
    params:
        study=lambda w: OUTDIRS[w.outdir],
        **STAGE_SLICES,
        code=lambda w: RENDER_CODE[w.outdir],    # a changed study chooses again
    log:
        f"{LOGS}/study/{{outdir}}/stages/{{corpus}}/{{pair}}/{{stage}}.log",
    priority: PRIORITY["stage"]
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab study-stage --study {params.study} --corpus {wildcards.corpus} --pair {wildcards.pair} "
        "--stage {wildcards.stage} --results {RESULTS} " f"{SLICE_ARGS} " "--out {output} 2> {log}"


rule study_table:
    input:
        _study_output_inputs,
    output:
        report(pattern("study_output", ext="md"), caption="../report/table.rst", category="{outdir}",
               labels={"table": "{name}"}),
        csv=pattern("study_output", ext="csv"),
        tex=pattern("study_output", ext="tex"),
        # the numbers behind the table, one row per run (seed): the table shows their mean ± sd
        tidy=pattern("study_output", ext="tidy.csv"),
    wildcard_constraints:
        outdir="|".join(OUTDIRS),
        name=_names("tables"),
    params:
        study=lambda w: OUTDIRS[w.outdir],
        **RENDERED,
        prefix=_prefix,
    log:
        f"{LOGS}/study/{{outdir}}/{{name}}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab study-table --study {params.study} --name {wildcards.name} --results {RESULTS} "
        f"{SLICE_ARGS} " "--out {params.prefix} 2> {log}"


rule study_figure:
    input:
        _study_output_inputs,
    output:
        report(pattern("study_output", ext="png"), caption="../report/figure.rst", category="{outdir}",
               labels={"figure": "{name}"}),
        pdf=pattern("study_output", ext="pdf"),
        csv=pattern("study_output", ext="csv"),
    wildcard_constraints:
        outdir="|".join(OUTDIRS),
        name=_names("figures"),
    params:
        study=lambda w: OUTDIRS[w.outdir],
        **RENDERED,
        prefix=_prefix,
    log:
        f"{LOGS}/study/{{outdir}}/{{name}}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab study-table --study {params.study} --name {wildcards.name} --results {RESULTS} "
        f"{SLICE_ARGS} " "--out {params.prefix} 2> {log}"


# The paper's claims judged on this run: one row per claim, the difference over seeds with
# its 95% interval, p-value and verdict (headlab.studies.effects).
rule study_effects:
    input:
        lambda w: _study_output_inputs(w, headlab.studies.EFFECTS),
    output:
        report(pattern("study_output", name=headlab.studies.EFFECTS, ext="csv"), caption="../report/effects.rst",
               category="{outdir}",
               labels={"table": "effects"}),
    wildcard_constraints:
        outdir="|".join(o for o, s in OUTDIRS.items() if headlab.studies.judges_effects(s)) or "^$",
    params:
        study=lambda w: OUTDIRS[w.outdir],
        **RENDERED,
        prefix=_prefix,
    log:
        f"{LOGS}/study/{{outdir}}/effects.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab study-table --study {params.study} --name effects --results {RESULTS} "
        f"{SLICE_ARGS} " "--out {params.prefix} 2> {log}"


# What this run reproduces: every configured study's claims at a glance.
rule effects_summary:
    input:
        headlab.studies.effects_files(config, RESULTS),
    output:
        report(headlab.studies.summary_file(RESULTS), caption="../report/effects.rst", category="effects"),
    params:
        code=headlab.workflow.code_digest.study_digest(None),
    log:
        f"{LOGS}/study/effects_summary.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab effects-summary " + " ".join(f"--in {p}" for p in headlab.studies.effects_files(config, RESULTS))
        + " --out {output} 2> {log}"


rule study_readme:
    input:
        _study_output_inputs,
    output:
        report(pattern("study_output", name="README", ext="md"), caption="../report/readme.rst", category="{outdir}"),
    wildcard_constraints:
        outdir="|".join(OUTDIRS),
    params:
        study=lambda w: OUTDIRS[w.outdir],
        **RENDERED,
        prefix=_prefix,
    log:
        f"{LOGS}/study/{{outdir}}/README.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab study-table --study {params.study} --name README --results {RESULTS} "
        f"{SLICE_ARGS} " "--out {params.prefix} 2> {log}"


ruleorder: study_readme > study_table


# A finished study as a small folder for git (tables, scores, hypotheses, provenance; no
# models): `snakemake results/published/paper_A` or `results/published/paper_A-<tag>`.
rule publish:
    input:
        lambda w: headlab.studies.study_outputs(OUTDIRS[w.outdir], RESULTS),
    output:
        directory(pattern("published")),
    wildcard_constraints:
        outdir="|".join(OUTDIRS),
        tag=r"|-[A-Za-z0-9_.-]+",
    params:
        study=lambda w: OUTDIRS[w.outdir],
        **SLICES,
        code=module_code("headlab.workflow.publish"),
    log:
        f"{LOGS}/publish/{{outdir}}{{tag}}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab publish --study {params.study} --results {RESULTS} " f"{SLICE_ARGS} "
        "--out {output} 2> {log}"
