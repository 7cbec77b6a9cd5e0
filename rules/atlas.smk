# The head atlas (issue 23, src/headlab/atlas/): every head of every chosen model by every
# criterion the papers use (config key `atlas`), one process per model, then the explorer
# results/atlas/index.html and the agreement of the criteria. The GPU sittings' published
# head tables (results/published/*/*/atlas/*/heads.csv, from the workflow's directory like the
# studies' GPU rows) join as models of their own: no checkpoint of theirs is here to read.
import headlab.atlas.published
import headlab.atlas.select

ATLAS = headlab.atlas.select.settings(config)
# the atlas's own folder (headlab.naming.PATHS["atlas_index"]): `headlab atlas-index --out`
ATLAS_DIR = headlab.naming.pattern("atlas_index", RESULTS, part="").rstrip("/")


def _atlas_model(w):
    return {k: w[k] for k in MODEL_KEYS}


def _atlas_source(w, split):
    """The BPE'd source of a split; featured for syntax models (rules/syntax.smk)."""
    if model_needs_syntax(w):
        return featured(w, split)
    return data_file("bpe", w, split=split, side="src")


def _atlas_treebank(w):
    """Gold trees and their preprocessed text for the profile (English source only)."""
    if not ATLAS or not ATLAS["treebank"] or lang(w.pair, "src") != "en":
        return {}
    kind, name = ATLAS["treebank"].split("-", 1)
    split = f"ud_{name}" if kind == "ud" else name
    gold = (headlab.naming.path("fetched", RESULTS, dataset="ud") if kind == "ud"
            else data_file("gold_parse", w, split=name))
    return {"gold": gold, "treebank_src": _atlas_source(w, split)}


def _atlas_bleu(w):
    return headlab.atlas.select.bleu_scores(config, RESULTS, _atlas_model(w))


def _atlas_inputs(w):
    valid = corpus(w.corpus)["valid"]
    inputs = {"model": model_file("checkpoint", w),
              "src": _atlas_source(w, valid),
              "tgt": data_file("bpe", w, split=valid, side="tgt"),
              **_atlas_treebank(w)}
    inputs.update({f"bleu_{k}": path for k, path in _atlas_bleu(w).items()})
    return inputs


def _atlas_treebank_args(w, input):
    if "gold" not in input.keys():
        return ""
    kind, name = ATLAS["treebank"].split("-", 1)
    gold = _ud_gold(name) if kind == "ud" else input.gold
    return f"--treebank {gold} --treebank-src {input.treebank_src} --treebank-sentences {ATLAS['treebank_sentences']}"


rule atlas_model:
    input:
        unpack(_atlas_inputs),
    output:
        heads=pattern("atlas_model", part="heads.csv"),
        examples=pattern("atlas_model", part="examples.json"),
        timing=pattern("atlas_model", part="timing.json"),
    params:
        name=lambda w: MODEL.format(**dict(w.items())),
        out=lambda w, output: os.path.dirname(output.heads),
        sizes=lambda w: (f"--valid-sentences {ATLAS['valid_sentences']} --examples {ATLAS['examples']} "
                         f"--batch-size {ATLAS['batch_size']}"),
        treebank=_atlas_treebank_args,
        bleu=lambda w, input: " ".join(f"--bleu {k[len('bleu_'):]}={input[k]}" for k in input.keys()
                                       if k.startswith("bleu_")),
        gpu="--gpu 0" if GPU else "",
        code=model_code("headlab.atlas.model"),
    log:
        f"{LOGS}/atlas/{MODEL}.log",
    benchmark:
        f"{LOGS}/atlas/{MODEL}.benchmark.tsv"
    threads: 1
    resources:
        gpu=GPU,
    conda:
        "../envs/onmt.yaml"
    shell:
        "OMP_NUM_THREADS={threads} headlab atlas-model --model {input.model} --src {input.src} --tgt {input.tgt} "
        "--name {params.name} --out {params.out} {params.sizes} {params.treebank} {params.bleu} {params.gpu} 2> {log}"


def _atlas_index_inputs(w):
    for study in config["studies"]:
        _finished_stages(study)          # paper B's finals, paper D's pruned models
    return [headlab.naming.path("atlas_model", RESULTS, e["model"], part=name)
            for e in headlab.atlas.select.selected(config, RESULTS).values()
            for name in ("heads.csv", "examples.json")] + headlab.atlas.published.files()


rule atlas_index:
    input:
        _atlas_index_inputs,
    output:
        index=pattern("atlas_index", part="index.html"),
        explorer=report(directory(pattern("atlas_index", part="explorer")), htmlindex="index.html", category="atlas",
                        caption="../report/atlas.rst", labels={"atlas": "explorer"}),
        agreement=pattern("atlas_index", part="agreement.csv"),
        agreement_md=report(pattern("atlas_index", part="agreement.md"), category="atlas", caption="../report/atlas_table.rst",
                            labels={"atlas": "agreement"}),
        claims=pattern("atlas_index", part="claims.csv"),
        claims_md=report(pattern("atlas_index", part="claims.md"), category="atlas", caption="../report/atlas_table.rst",
                         labels={"atlas": "claims"}),
        figure=report(pattern("atlas_index", part="agreement.png"), category="atlas", caption="../report/atlas_figure.rst",
                      labels={"atlas": "agreement figure"}),
        pdf=pattern("atlas_index", part="agreement.pdf"),
    params:
        # the whole config: the explorer lists every model of every study
        config=lambda w: json.dumps(config, sort_keys=True, separators=(",", ":")),
        published=headlab.atlas.published.ROOT,
        code=module_code("headlab.report.atlas"),
    log:
        f"{LOGS}/atlas/index.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab atlas-index --results {RESULTS} --config-json {params.config:q} --out {ATLAS_DIR} "
        "--published {params.published} > {log} 2>&1"
