"""The ``headlab`` command: one entry point, lazily imported subcommands.

Every subcommand lives in its own module as ``main(argv) -> int``; this file only maps
names to modules so that ``headlab --help`` stays fast (no torch import).
"""
from __future__ import annotations

import importlib
import sys

#: subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "fetch": ("headlab.data.fetch", "fetch a registered dataset (mirror first, then upstream), verify sha256"),
    "prepare": ("headlab.data.prepare", "extract a language pair/split, validate, subsample"),
    "prepare-local": ("headlab.data.local", "read, check and clean one split of your own corpus (dataset: local)"),
    "preprocess": ("headlab.data.preprocess", "Moses tokenise/truecase, BPE, detokenise"),
    "parse": ("headlab.syntax.parse", "parse Moses-tokenised English into a cached parse file (paper C)"),
    "featurize": ("headlab.syntax.features", "BPE'd source + per-piece syntax feature columns (paper C)"),
    "feature-vocab": ("headlab.syntax.features", "numeric-order source-feature vocabularies {src_vocab}_feat{i}"),
    "parser-eval": ("headlab.syntax.evalb", "bracketing F1 of a parser against the PTB sample's gold trees"),
    "build-vocab": ("headlab.engine.run", "onmt_build_vocab with the plugin loaded"),
    "vocab": ("headlab.engine.run", "shared vocabulary of a BPE'd training corpus"),
    "train": ("headlab.engine.run", "onmt_train with the plugin loaded (validated options, resume)"),
    "translate": ("headlab.engine.run", "onmt_translate with the plugin loaded (head ablation)"),
    "average": ("headlab.engine.run", "OpenNMT-py's average_models over a training's last N checkpoints"),
    "onmt-config": ("headlab.engine.config", "write an OpenNMT-py YAML from a model preset"),
    "finetune-config": ("headlab.engine.finetune", "a fine-tune's initial checkpoint (new head gates / a head mask) and OpenNMT-py config"),
    "gates": ("headlab.heads.gates", "converged hard-concrete gate values of a checkpoint, as CSV"),
    "params": ("headlab.engine.params", "count model parameters for a preset, layers and head spec"),
    "export-attention": ("headlab.engine.export", "dump per-layer, per-head attention of one site (and DHICM importance) to npz"),
    "treebank": ("headlab.syntax.run", "gold trees' raw text, or spaCy parses of raw text as CoNLL-U (paper D)"),
    "profile-heads": ("headlab.syntax.run", "per-head dependency accuracy and offset baselines against gold trees (paper D)"),
    "score": ("headlab.eval.forced", "forced-decoding log-probabilities of given targets"),
    "bleu": ("headlab.eval.bleu", "sacreBLEU/chrF of a hypothesis file, signature kept"),
    "compare": ("headlab.eval.compare", "paired bootstrap and length bins via compare-mt"),
    "suite-split": ("headlab.eval.suite_split", "turn a contrastive/WSD suite into src/tgt split files"),
    "contrastive": ("headlab.eval.contrastive", "contrastive suites (DistilLingEval, MuCoW, ContraWSD, LingEval97)"),
    "study-table": ("headlab.report.build", "build one study's table, figure or README from the workflow's results"),
    "effects-summary": ("headlab.studies.effects", "results/effects.md: every configured study's judged claims at a glance"),
    "study-stage": ("headlab.studies", "one stage of a study's search (paper B's grid): the choice, as JSON"),
    "learning-curve": ("headlab.engine.logs", "a model's training/validation loss and accuracy over steps from its train.log"),
    "publish": ("headlab.workflow.publish", "copy a finished study's tables, scores, hypotheses and provenance for git"),
    "atlas-model": ("headlab.atlas.model", "the head atlas: every head of one model by every criterion (heads.csv)"),
    "atlas-index": ("headlab.report.atlas", "the head atlas's explorer (index.html) and the agreement of its criteria"),
    "gpu-bundle": ("headlab.workflow.bundle", "the GPU plan's next slice (--slice NAME): wheels, prepared data and "
                                              "a runner for an offline GPU machine"),
    "receive-sitting": ("headlab.workflow.receive", "a GPU sitting's returned tarball: its publication checked and "
                                                    "moved into results/published/"),
    "table": ("headlab.report.tables", "render result CSVs as CSV/Markdown/LaTeX tables"),
    "figure": ("headlab.report.figures", "render result CSVs as PNG/PDF figures"),
}


def _usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: headlab COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"headlab: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    from headlab.errors import HeadlabError
    # before any subcommand imports OpenNMT-py (some do lazily, inside a function): its
    # transforms import spaCy & co. at start-up, which the GPU machine lacks
    from headlab.engine.compat import defer_optional_imports

    defer_optional_imports()
    try:
        # inside: a module may apply the engine's patches on import (an OpenNMT-py other than
        # the one they fit is one line too)
        module = importlib.import_module(COMMANDS[name][0])
        entry = getattr(module, "main_" + name.replace("-", "_"), None) or module.main
        return int(entry(rest) or 0)
    except HeadlabError as err:  # the user's input is wrong: one line, no traceback
        print(f"headlab {name}: {err}", file=sys.stderr)
        return 1
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as err:
        # a path given on the command line that is not there (or not readable): one line;
        # any other (a file of headlab's own) is a bug, with its traceback
        if err.filename is None or not any(str(err.filename) in arg for arg in rest):
            raise
        print(f"headlab {name}: {err.filename}: {err.strerror}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
