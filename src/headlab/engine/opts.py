"""headlab's own OpenNMT-py options.

They are added to OpenNMT-py's parsers by :mod:`headlab.engine.compat` (so ``onmt_train`` and
``onmt_translate`` accept them once the plugin is imported) and stored in checkpoints
with the rest of the model options.
"""
from __future__ import annotations

#: encoder_type / decoder_type values under which the head-spec modules are registered
ENCODER_NAME = "headlab"
DECODER_NAME = "headlab"
#: the OpenNMT-py transform that writes the word-boundary column from the text (headlab.engine.words)
WORDS_TRANSFORM = "headlab_words"


def _non_negative(kind):
    def parse(text):
        value = kind(text)
        if value < 0:
            import argparse
            raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
        return value
    parse.__name__ = kind.__name__
    return parse


def _gate(text):
    """-rhe_fgate: 0 (dynamic) or a fixed gate in (0, 1]."""
    value = float(text)
    if not 0.0 <= value <= 1.0:
        import argparse
        raise argparse.ArgumentTypeError(f"must be 0 (dynamic) or in (0, 1], got {text}")
    return value


def _positive_int(text):
    value = int(text)
    if value < 1:
        import argparse
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def model_opts(parser) -> None:
    group = parser.add_argument_group("headlab: attention heads")
    group.add(
        "--enc_heads", "-enc_heads", type=str, default="8L",
        help="Encoder self-attention head spec (paper A names: 8L, 7Ftoken+1L, 7Fword+1L, "
             "1L, 1Lwide, 8Ftoken, 8Fword). Used when -encoder_type headlab.",
    )
    group.add(
        "--dec_heads", "-dec_heads", type=str, default="8L",
        help="Decoder self-attention head spec (learned kinds and mixers, e.g. '*(4L),4L|dhicm'). "
             "Used when -decoder_type headlab.",
    )
    group.add(
        "--cross_heads", "-cross_heads", type=str, default="8L",
        help="Decoder cross-attention (encoder-decoder) head spec. Used when -decoder_type headlab.",
    )
    group.add(
        "--enc_head_mask", "-enc_head_mask", type=str, default="",
        help="Encoder heads kept in every forward of training and translation (paper D §3.5-3.6): "
             "one row of 0/1 per encoder layer, one digit per head, rows separated by '.', e.g. "
             "11000000.00010000; a single row applies to every layer; empty keeps all. Pruned "
             "heads' parameters stay in the model, frozen (zero gradient). Needs -encoder_type headlab.",
    )
    group.add(
        "--dhicm_dm", "-dhicm_dm", type=_non_negative(int), default=0,
        help="d_m of DHICM's second-level attention (paper B eq. 2-3); 0 = the model size.",
    )
    group.add(
        "--dhicm_dropout", "-dhicm_dropout", type=float, default=0.0,
        help="Dropout after U x in DHICM (paper B §3.1, Table 2 'Dropout (Section 3.1)').",
    )
    group.add(
        "--syntax_parser", "-syntax_parser", type=str, default="depconv", choices=["depconv", "benepar"],
        help="Parser of the source syntax that syntax head kinds read (paper C Table A3): 'depconv' "
             "= spaCy dependencies with converted phrase-structure trees (offline default), "
             "'benepar' = Berkeley Neural Parser trees (its model must be installed). Selects "
             "the featured source files; stored in the checkpoint.",
    )
    group.add(
        "--lpea_k", "-lpea_k", type=_non_negative(int), default=6,
        help="Paper C LPEA: clipping distance k of the relative local-phrasal positions (eq. 7); "
             "w_-k..w_k are learned (Table 3: k in 0..8, best 6).",
    )
    group.add(
        "--lpea_outside", "-lpea_outside", type=str, default="mask", choices=["mask", "learned"],
        help="Paper C LPEA: what RP = inf (keys outside the query's local phrase) maps to: "
             "'mask' = -inf (default; §5.3.4 'SEA masks those words'), 'learned' = its own w.",
    )
    group.add(
        "--rhe_fgate", "-rhe_fgate", type=_gate, default=0.0,
        help="Paper C RHE: 0 = dynamic gate Syn_gate = sigmoid(hconf) (eq. 10); a value in "
             "(0, 1] = fixed gate (Fig. 4).",
    )
    group.add(
        "--relpos_k", "-relpos_k", type=_positive_int, default=16,
        help="RelPos/RHErel head kinds: Shaw et al. (2018) clipping distance k.",
    )
    group.add(
        "--embeddings_init", "-embeddings_init", type=str, default="onmt", choices=["onmt", "normal"],
        help="Word embedding initialisation of new models: 'onmt' keeps -param_init(_glorot); "
             "'normal' draws N(0, d^-0.5) as Vaswani et al. (Glorot over a large vocabulary "
             "gives embeddings far smaller than the positional encoding).",
    )


#: ``-compile``'s values: off, or one of torch.compile's modes (headlab.engine.compiled)
COMPILE_MODES = ("off", "default", "reduce-overhead", "max-autotune-no-cudagraphs")
#: ``-compile``'s default where set (``headlab train`` reads it; the workflow sets it from the
#: config's ``training.compile``): how a forward runs is no part of a model's config or path
COMPILE_VARIABLE = "HEADLAB_COMPILE"


def train_opts(parser) -> None:
    group = parser.add_argument_group("headlab: auxiliary losses and model selection")
    group.add(
        "--lambda_kl", "-lambda_kl", type=_non_negative(float), default=0.0,
        help="Weight of DHICM's KL term, maximised: L = L_xent - lambda_kl * L_KL (paper B eq. 5).",
    )
    group.add(
        "--lambda_l0", "-lambda_l0", type=_non_negative(float), default=0.0,
        help="Weight of the head gates' expected L0 norm: L = L_xent + lambda_l0 * L_C "
             "(Voita et al. 2019; paper D).",
    )
    group.add(
        "--model_selection", "-model_selection", type=str, default="last",
        choices=["last", "valid_loss"],
        help="Which checkpoint becomes the final model: the last step, or the one with the "
             "lowest validation cross-entropy (paper B §4.3; validation every -valid_steps, "
             "checkpoints saved at the same steps, the best never deleted).",
    )
    group.add(
        "--adam_impl", "-adam_impl", type=str, default="fused", choices=["fused", "torch"],
        help="-optim adam as torch's fused Adam (one kernel for every parameter tensor, on CPU "
             "and CUDA; the same update) or torch's default implementation.",
    )
    group.add(
        "--compile", "-compile", type=str, default="off",
        choices=COMPILE_MODES,
        help="Train the model's forward through torch.compile in this mode (dynamic shapes; the "
             "loss and optimizer stay eager): fewer kernel launches a step on a GPU, after a "
             "compile of a minute or more. Results equal eager training's up to float rounding. "
             f"Default: ${COMPILE_VARIABLE} where set, else off.",
    )


def translate_opts(parser) -> None:
    group = parser.add_argument_group("headlab: test-time ablation")
    group.add(
        "--disable_enc_heads", "-disable_enc_heads", type=int, nargs="*", default=[],
        help="1-based encoder head indices whose output is zeroed in every encoder layer "
             "at test time (paper A §4.3).",
    )
    group.add(
        "--disable_dec_heads", "-disable_dec_heads", type=int, nargs="*", default=[],
        help="1-based decoder self-attention head indices zeroed in every decoder layer.",
    )
    group.add(
        "--rhe_prune", "-rhe_prune", action="store_true",
        help="Paper C Table 2 '+RHE (Prune)': RHE heads labelled redundant for a sentence output "
             "0 instead of their enlivened attention.",
    )
    group.add(
        "--disable_cross_heads", "-disable_cross_heads", type=int, nargs="*", default=[],
        help="1-based cross-attention head indices zeroed in every decoder layer.",
    )
