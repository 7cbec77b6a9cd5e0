"""Word boundaries from the text: the ``headlab_words`` transform and source tensors.

Head kinds that read words (Fword, DEA, LPEA, RHE*) number a sentence's words from the
word-boundary source-feature column (:data:`headlab.heads.side.WORD_COLUMN`: 1 where the
piece's text ends in ``@@``). It is computed here from the pieces' **text**, before
OpenNMT-py maps pieces to vocabulary ids, so an out-of-vocabulary piece (``<unk>``, which
has no ``@@``) keeps its boundary and every later word keeps its index against the parse
features (issue 24). As a source-feature column it travels with its sentence through
OpenNMT-py's bucketing, sorting, batching, validation and translation (and its beam
tiling: ``decoder.state["src"]`` carries the columns), with no iterator patch
(internals note §3).

* :class:`WordBoundaries`, registered as the OpenNMT-py transform ``headlab_words``: a
  model config lists it after ``inferfeats`` (:func:`headlab.engine.config.feature_options`),
  translation passes :func:`headlab.engine.config.feature_args`. It overwrites WORD_COLUMN of every example
  from its pieces, so stock BPE files (the column's ``-src_feats_defaults`` placeholder) and
  featured files (which carry the same values) give the same ids.
* :func:`source_ids`: the same source tensor for headlab's own batches (attention export,
  forced scoring), from plain or featured lines.
"""
from __future__ import annotations

from onmt.transforms import register_transform
from onmt.transforms.transform import Transform

from headlab.errors import ConfigError
from headlab.heads.side import SEPARATOR, UNFILLED, WORD_COLUMN, continues

from headlab.engine.opts import WORDS_TRANSFORM as TRANSFORM


@register_transform(name=TRANSFORM)
class WordBoundaries(Transform):
    """Fill the word-boundary column (source feature 0) from the pieces' text."""

    def apply(self, example, is_train=False, stats=None, **kwargs):
        feats = example.get("src_feats")
        if not feats:
            raise ConfigError(f"the {TRANSFORM} transform writes source feature column 0 ({WORD_COLUMN}): "
                              f"set -n_src_feats (and -src_feats_defaults {UNFILLED} for a source without "
                              f"feature columns)", key="n_src_feats")
        feats[0] = [str(continues(piece)) for piece in example["src"]]
        return example

    def _repr_args(self):
        return ""


def source_ids(vocabs, sentences: list[list[str]], columns: tuple[str, ...], device="cpu"):
    """(ids (B, N, 1 + len(columns)), lengths (B,)) as OpenNMT-py batches them: piece ids,
    then each feature column's ids from ``vocabs["src_feats"]``. Tokens are plain pieces or
    featured ``piece￨v1￨…``; the word-boundary column is (re)computed from the pieces' text
    like the transform does."""
    import torch
    from onmt.constants import DefaultTokens

    split = [[token.split(SEPARATOR) for token in s] for s in sentences]
    lengths = torch.tensor([len(s) for s in split], device=device)
    feat_vocabs = list(vocabs.get("src_feats") or [])
    if len(feat_vocabs) != len(columns):
        raise ConfigError(f"the model reads {len(columns)} source feature columns ({', '.join(columns) or 'none'}) "
                          f"but has {len(feat_vocabs)} feature vocabularies", key="n_src_feats")
    given = {len(t) - 1 for s in split for t in s}
    filled = set(columns) - {WORD_COLUMN}
    if filled and given != {len(columns)}:
        raise ConfigError(f"the model reads the feature columns {', '.join(columns)}: its source must be featured "
                          f"(piece{SEPARATOR}v1{SEPARATOR}…, headlab featurize), the tokens carry "
                          f"{sorted(given)} columns", key="n_src_feats")
    if not filled and given - {0, len(columns)}:
        raise ConfigError(f"source tokens carry {sorted(given)} feature columns, the model reads "
                          f"{len(columns)} ({', '.join(columns) or 'none'})", key="n_src_feats")
    table = [vocabs["src"], *feat_vocabs]
    ids = torch.full((len(split), int(lengths.max()), 1 + len(columns)), 0, dtype=torch.long, device=device)
    for k, vocab in enumerate(table):
        ids[:, :, k] = vocab[DefaultTokens.PAD]
    for b, tokens in enumerate(split):
        rows = []
        for token in tokens:
            values = token[1:] if len(token) > 1 else [UNFILLED] * len(columns)
            if columns and columns[0] == WORD_COLUMN:
                values = [str(continues(token[0]))] + list(values[1:])
            rows.append([token[0]] + list(values))
        for k, vocab in enumerate(table):
            ids[b, :len(rows), k] = torch.tensor(vocab([row[k] for row in rows]), device=device)
    return ids, lengths
