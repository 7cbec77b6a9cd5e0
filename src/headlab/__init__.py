"""headlab: attention-head experiments for Transformer NMT on OpenNMT-py 3.5.1."""

__version__ = "0.1.0"
