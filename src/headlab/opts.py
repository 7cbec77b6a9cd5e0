"""headlab's own OpenNMT-py options.

They are added to OpenNMT-py's parsers by :mod:`headlab.compat` (so ``onmt_train`` and
``onmt_translate`` accept them once the plugin is imported) and stored in checkpoints
with the rest of the model options.
"""
from __future__ import annotations

#: encoder_type value under which the head-spec encoder is registered
ENCODER_NAME = "headlab"


def model_opts(parser) -> None:
    group = parser.add_argument_group("headlab: encoder heads")
    group.add(
        "--enc_heads", "-enc_heads", type=str, default="8L",
        help="Encoder self-attention head spec (paper A names: 8L, 7Ftoken+1L, 7Fword+1L, "
             "1L, 1Lwide, 8Ftoken, 8Fword). Used when -encoder_type headlab.",
    )
    group.add(
        "--embeddings_init", "-embeddings_init", type=str, default="onmt", choices=["onmt", "normal"],
        help="Word embedding initialisation of new models: 'onmt' keeps -param_init(_glorot); "
             "'normal' draws N(0, d^-0.5) as Vaswani et al. (Glorot over a large vocabulary "
             "gives embeddings far smaller than the positional encoding).",
    )


def translate_opts(parser) -> None:
    group = parser.add_argument_group("headlab: test-time ablation")
    group.add(
        "--disable_enc_heads", "-disable_enc_heads", type=int, nargs="*", default=[],
        help="1-based encoder head indices whose output is zeroed in every encoder layer "
             "at test time (paper A §4.3).",
    )
