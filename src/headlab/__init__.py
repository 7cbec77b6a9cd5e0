"""headlab: attention-head experiments for Transformer NMT on OpenNMT-py 3.5.1."""

import warnings as _warnings

__version__ = "0.1.0"

# OpenNMT-py 3.5.1's onmt/modules/{sparse_activations,sparse_losses,sru}.py decorate with
# torch.cuda.amp.custom_fwd/custom_bwd, deprecated since torch 2.4: four FutureWarnings at
# the first `import onmt` of every process (every job's log), and its trainer enters
# torch.cuda.amp.autocast at every training step (one more per training log). Harmless (CUDA code paths we do
# not use, and OpenNMT-py is pinned); silenced by their exact message only, here because any
# headlab module may be the one that imports onmt first. Every other warning is untouched.
_warnings.filterwarnings("ignore", message=r"`torch\.cuda\.amp\.(custom_fwd|custom_bwd|autocast)\(args\.\.\.\)` is deprecated",
                         category=FutureWarning)
