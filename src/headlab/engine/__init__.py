"""headlab's extension of OpenNMT-py 3.5.1: everything registered or subclassed there.

``encoder``    ``-encoder_type headlab``: Transformer encoder, self-attention from ``-enc_heads``.
``decoder``    ``-decoder_type headlab``: Transformer decoder, self-attention from
               ``-dec_heads`` and cross-attention from ``-cross_heads``, KV cache intact.
``aux_loss``   the one path for model-side auxiliary terms (paper B's KL, paper D's L0):
               weighed into the training loss, logged apart, kept out of perplexity.
``selection``  validation-loss model selection: the best checkpoint by validation
               cross-entropy is kept and becomes the final model (paper B §4.3).
``common``     small helpers shared by the above.

Importing :mod:`headlab.engine.plugin` imports these (registers the encoder and decoder);
:mod:`headlab.engine.compat` holds the monkeypatches that wire ``aux_loss`` and ``selection``
into OpenNMT-py's trainer.
"""
from headlab.engine.compat import defer_optional_imports

# before any OpenNMT-py import of ours: OpenNMT-py's transforms import spaCy & co. at start-up
defer_optional_imports()
