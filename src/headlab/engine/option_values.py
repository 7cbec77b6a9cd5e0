"""Values of OpenNMT-py options, checked the way ``onmt_train`` would check them, but when
the config is built instead of when the job reads its YAML.

``onmt_train -config run.yaml`` reads the YAML with configargparse: every scalar becomes
``str(value)``, a list becomes one string per item (only for an option that takes several
values), a switch (``store_true``) accepts ``true``/``false``/``yes``/``no``/``on``/``off``/
``1``/``0``; argparse then applies the option's ``type`` and ``choices``. A bad value (``optim:
adamm``, ``batch_size: 1.5``) is therefore rejected, but only inside the training job, minutes
or hours after the workflow started, with a ~250-line usage text. :func:`problem` replays
those rules from a JSON-able description of each option (:func:`spec`, cached on disk
beside the option names by :mod:`headlab.engine.config`), without building the parser.

argparse checks no ranges: ``transformer_ff: -5`` fails when the model is built,
``batch_size: 0`` never yields a batch, ``label_smoothing: 1.5`` fails in the loss.
:data:`RANGES` holds the bounds of the options a grid or an override plausibly changes;
:func:`out_of_range` checks them on a whole training config.
"""
from __future__ import annotations

import argparse
import difflib
from typing import Any, Mapping, NamedTuple

#: what configargparse accepts for a switch, lower-cased
_SWITCH_VALUES = ("true", "yes", "on", "1", "false", "no", "off", "0")
#: argparse type -> kind; no type (None) leaves the value the string configargparse made
_TYPES = {int: "int", float: "float", str: "str", None: "str"}


def spec(action: argparse.Action) -> dict[str, Any]:
    """What :func:`problem` needs of one argparse action, as plain JSON values: ``kind``
    (``switch``, ``int``, ``float``, ``str``, or ``other`` for a custom type such as
    headlab's own, checked by :func:`headlab.engine.config.check_values`), ``many`` (the
    option takes a list), ``empty`` (the list may be empty: ``nargs='*'``) and ``choices``."""
    if action.nargs == 0:
        kind = "switch"
    else:
        kind = _TYPES.get(action.type, "other")
    many = action.nargs in ("+", "*") or (isinstance(action.nargs, int) and action.nargs > 1)
    choices = list(action.choices) if action.choices is not None else None
    return {"kind": kind, "many": many, "empty": action.nargs == "*", "choices": choices}


def _convert(kind: str, text: str) -> Any:
    return {"int": int, "float": float}.get(kind, str)(text)


def problem(name: str, value: Any, option: Mapping[str, Any]) -> str | None:
    """Why ``onmt_train`` would reject ``value`` for option ``name`` (None: it would not)."""
    if value is None:          # configargparse drops a null: the option keeps its default
        return None
    if value == "" and option["many"]:     # and an empty string for a list option, too
        return None
    if option["kind"] == "switch":
        if isinstance(value, list) or str(value).lower() not in _SWITCH_VALUES:
            return f"{name} is a switch: true or false, got {value!r}"
        return None
    if isinstance(value, list):
        if not option["many"]:
            return f"{name} takes one value, got the list {value!r}"
        if not value and not option["empty"]:
            return f"{name} needs at least one value, got an empty list"
        items = value
    else:
        items = [value]
    for item in items:
        if isinstance(item, (list, dict)):
            return f"{name} takes plain values, got {value!r}"
        if option["kind"] in ("int", "float"):
            try:
                converted = _convert(option["kind"], str(item))
            except ValueError:
                article = "an integer" if option["kind"] == "int" else "a number"
                return f"{name} must be {article}, got {item!r}"
        else:
            converted = str(item)
        choices = option["choices"]
        if choices is not None and converted not in choices:
            close = difflib.get_close_matches(str(item), [str(c) for c in choices], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            return f"{name} must be one of {', '.join(map(str, choices))}; got {item!r}{hint}"
    return None


class Range(NamedTuple):
    """The values an option may take: ``low`` up to ``high`` (exclusive; None: no upper
    bound), ``low`` itself excluded when ``above``, and the ``extra`` values allowed beside
    the range; ``described`` is how the error message says it."""
    low: float
    high: float | None
    extra: tuple
    described: str
    above: bool = False

    def holds(self, value: Any) -> bool:
        if isinstance(value, bool):
            return False
        try:
            number = float(value)
        except (TypeError, ValueError):
            return False
        if number in self.extra:
            return True
        return (number > self.low if self.above else number >= self.low) and (self.high is None or number < self.high)


_RATES = "a number in [0, 1), or a list of them"

#: option -> its :class:`Range`. The bounds OpenNMT-py 3.5.1 relies on (a width or batch of
#: 0, ``report_every`` 0 divides by zero; ``-1`` for the widths means "use
#: ``enc_hid_size``/``dec_hid_size``", onmt/opts.py), and headlab's where OpenNMT-py takes a
#: value that cannot be meant: a learning rate of 0 or below, a dropout of 1 (every unit
#: dropped), a negative ``max_grad_norm`` (no clipping, as 0 says), ``label_smoothing`` 1
#: (a uniform target), ``keep_checkpoint`` below -1 (all, as -1 says), a ``seed`` of 0 or below
#: (``onmt.utils.misc.set_random_seed`` then seeds nothing: a run no one can repeat),
#: ``save_checkpoint_steps`` 0 (only the last step: no resume, no model selection, which the
#: workflow reads checkpoints for).
RANGES: dict[str, Range] = {
    "train_steps": Range(1, None, (), "an integer >= 1"),
    "seed": Range(1, None, (), "an integer >= 1 (OpenNMT-py seeds nothing at 0 or below: no run could be repeated)"),
    "report_every": Range(1, None, (), "an integer >= 1"),
    "learning_rate": Range(0, None, (), "a number > 0", above=True),
    "dropout": Range(0, 1, (), _RATES),
    "attention_dropout": Range(0, 1, (), _RATES),
    "transformer_ff": Range(1, None, (), "an integer >= 1"),
    "hidden_size": Range(1, None, (-1,), "an integer >= 1 (or -1: enc_hid_size/dec_hid_size)"),
    "word_vec_size": Range(1, None, (-1,), "an integer >= 1 (or -1: src/tgt_word_vec_size)"),
    "src_word_vec_size": Range(1, None, (), "an integer >= 1"),
    "tgt_word_vec_size": Range(1, None, (), "an integer >= 1"),
    "enc_hid_size": Range(1, None, (), "an integer >= 1"),
    "dec_hid_size": Range(1, None, (), "an integer >= 1"),
    "batch_size": Range(1, None, (), "an integer >= 1"),
    "valid_batch_size": Range(1, None, (), "an integer >= 1"),
    "accum_count": Range(1, None, (), "an integer >= 1 (or a list of them)"),
    "save_checkpoint_steps": Range(1, None, (), "an integer >= 1"),
    "valid_steps": Range(1, None, (), "an integer >= 1"),
    "keep_checkpoint": Range(1, None, (-1,), "-1 (all) or an integer >= 1 (0 saves none)"),
    "warmup_steps": Range(0, None, (), "an integer >= 0"),
    "label_smoothing": Range(0, 1, (), "a number in [0, 1)"),
    "adam_beta1": Range(0, 1, (), "a number in [0, 1)"),
    "adam_beta2": Range(0, 1, (), "a number in [0, 1)"),
    "max_grad_norm": Range(0, None, (), "a number >= 0 (0: no clipping)"),
    "src_seq_length": Range(1, None, (), "an integer >= 1"),
    "tgt_seq_length": Range(1, None, (), "an integer >= 1"),
    "bucket_size": Range(1, None, (), "an integer >= 1"),
    "num_workers": Range(0, None, (), "an integer >= 0"),
}


#: the same for ``onmt_translate``'s options: a beam of 0 is torch's ``step must be nonzero``
#: inside the beam search, a ``max_length`` of 0 an IndexError after the first batch
TRANSLATE_RANGES: dict[str, Range] = {
    "beam_size": Range(1, None, (), "an integer >= 1"),
    "n_best": Range(1, None, (), "an integer >= 1"),
    "batch_size": Range(1, None, (), "an integer >= 1"),
    "max_length": Range(1, None, (), "an integer >= 1"),
    "min_length": Range(0, None, (), "an integer >= 0"),
}


def out_of_range(options: Mapping[str, Any], ranges: Mapping[str, Range] = RANGES) -> tuple[str, str] | None:
    """The first option of ``ranges`` outside its bounds: (option, message), else None."""
    for name, bounds in ranges.items():
        if options.get(name) is None:
            continue
        value = options[name]
        values = value if isinstance(value, list) else [value]
        if not values or not all(bounds.holds(item) for item in values):
            return name, f"{name} must be {bounds.described}, got {value!r}"
    return None
