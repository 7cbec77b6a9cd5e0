"""Import this module before OpenNMT-py trains or translates.

It applies :mod:`headlab.engine.compat` and registers headlab's encoder (``-encoder_type
headlab``) and decoder (``-decoder_type headlab``) through OpenNMT-py's own registries, and the
``headlab_words`` transform (word boundaries from the text, :mod:`headlab.engine.words`). Stock tools work with it::

    python -c "import headlab.engine.plugin, sys; from onmt.bin.translate import main; sys.argv[0]='onmt_translate'; main()" -model m.pt -src in.txt
"""
from headlab.engine import compat

compat.apply()

import headlab.engine.encoder  # noqa: E402,F401  (registers the encoder)
import headlab.engine.decoder  # noqa: E402,F401  (registers the decoder)
import headlab.engine.words  # noqa: E402,F401  (registers the headlab_words transform)
