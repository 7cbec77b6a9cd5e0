"""Command-line config values with the types the schema gives them.

``snakemake --config 'studies={"baseline": {"sizes": [5000]}}'`` parses nested values with
YAML's base loader, so every number and boolean below the top level arrives as a string
(``"5000"``) and schema validation then rejects it. :func:`coerce_overrides` walks the
values given with ``--config`` beside ``config/schema.yaml`` (``$ref``, ``oneOf``/``anyOf``,
``properties``, ``additionalProperties``, ``items``) and turns each string into the type
the schema expects there, before ``validate``. A string that no allowed type accepts is a
:class:`~headlab.errors.ConfigError` naming its key path (``studies.baseline.sizes[0]``).
Where the schema says nothing about a value (OpenNMT-py ``overrides``), a string that reads
as a YAML number, boolean or null becomes one, as it would in a config file.
"""
from __future__ import annotations

import re
from typing import Any, Mapping

import yaml

from headlab.errors import ConfigError

_PY_TYPES = {"integer": (int,), "number": (int, float), "boolean": (bool,), "null": (type(None),),
             "string": (str,), "array": (list,), "object": (dict,)}


def _resolve(schema: Mapping, root: Mapping) -> Mapping:
    while isinstance(schema, Mapping) and "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/"):
            raise ValueError(f"only local $ref are supported, got {ref!r}")
        node = root
        for part in ref[2:].split("/"):
            node = node[part]
        schema = node
    return schema if isinstance(schema, Mapping) else {}


def _is_a(value: Any, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _PY_TYPES.get(kind, ()))


def _scalar(text: str) -> Any:
    """A string as YAML reads it in a config file (``5000`` -> 5000, ``true`` -> True); but a
    run of digits with a leading zero stays a string: YAML would read ``01001100.00000000``
    (a head mask) as the float 1001100.0, and no OpenNMT-py number is written that way."""
    if re.match(r"[+-]?0[0-9]", text.strip()) or re.fullmatch(r"[01]{2,}([.,][01]{2,})+", text.strip()):
        return text             # (and a mask of several rows, 10010000.11111111, never a number)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _fits(value: Any, schema: Mapping, root: Mapping) -> bool:
    import jsonschema

    validator = jsonschema.validators.validator_for(root)
    return validator({**schema, "definitions": root.get("definitions", {})}).is_valid(value)


def _child(schema: Mapping, key: str) -> Mapping:
    if key in schema.get("properties", {}):
        return schema["properties"][key]
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, Mapping) else {}


def coerce(value: Any, schema: Mapping, root: Mapping, key: str, reread: bool = True) -> Any:
    """``value`` (possibly strings from ``--config``) converted to what ``schema`` expects;
    ``reread`` False: a free-form string stays one (a config file's, which YAML typed already:
    a quoted value there is meant as a string)."""
    schema = _resolve(schema, root)
    branches = schema.get("oneOf") or schema.get("anyOf")
    if branches:
        if _fits(value, schema, root):
            return value
        for branch in branches:
            try:
                candidate = coerce(value, branch, root, key, reread)
            except ConfigError:
                continue
            if _fits(candidate, _resolve(branch, root), root):
                return candidate
        raise ConfigError(f"{value!r} is not valid here (expected one of: "
                          f"{'; '.join(_describe(b, root) for b in branches)})", key=key)
    if isinstance(value, dict):
        return {k: coerce(v, _child(schema, k), root, f"{key}.{k}" if key else k, reread) for k, v in value.items()}
    if isinstance(value, list):
        items = schema.get("items", {})
        return [coerce(v, items, root, f"{key}[{i}]", reread) for i, v in enumerate(value)]
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    if not kinds:  # free-form (OpenNMT-py options): read as a config file would
        return _scalar(value) if isinstance(value, str) and reread else value
    if "null" in kinds and _is_null(value):
        return None
    if any(_is_a(value, k) for k in kinds):
        return value
    if isinstance(value, str):
        parsed = _scalar(value)
        if any(_is_a(parsed, k) for k in kinds):
            return parsed
        if "number" in kinds:  # PyYAML reads 1e-3 as a string
            try:
                return float(value)
            except ValueError:
                pass
    elif "string" in kinds and isinstance(value, (int, float, bool)):
        return str(value)  # top-level --config results=2024: snakemake made it an int
    raise ConfigError(f"cannot read {value!r} as {' or '.join(kinds)}", key=key)


def _describe(schema: Mapping, root: Mapping) -> str:
    schema = _resolve(schema, root)
    if "enum" in schema:
        return " or ".join(map(repr, schema["enum"]))
    kinds = schema.get("type", "any value")
    return kinds if isinstance(kinds, str) else " or ".join(kinds)


def coerce_overrides(config: dict, overrides: Mapping[str, Any], schema: Mapping, typed: bool = False) -> None:
    """Give the values of ``config`` that came from ``--config`` (``overrides``, as snakemake
    parsed them and merged them into ``config``) the schema's types, in place. ``null``
    where the schema allows no null removes the key (``studies={"paper_A": null}``: a
    mapping given with ``--config`` is merged into the config, so this is the only way to
    drop a study, a corpus or a study's corpus from the command line). ``typed``: the values
    came from a config file, which YAML typed: its free-form strings are kept as written."""

    def walk(node: dict, over: Mapping, sub: Mapping, prefix: str) -> None:
        sub = _resolve(sub, schema)
        for k, v in over.items():
            key = f"{prefix}.{k}" if prefix else k
            if isinstance(v, Mapping) and isinstance(node.get(k), dict):
                walk(node[k], v, _child(sub, k), key)
            elif k in node and _is_null(v) and not _fits(None, _resolve(_child(sub, k), schema), schema):
                del node[k]
            elif k in node:
                node[k] = coerce(node[k], _child(sub, k), schema, key, reread=not typed)

    walk(config, overrides or {}, schema, "")


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value in ("null", "Null", "NULL", "~"))


def load_schema(path) -> dict:
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


# -- schema errors as one line ---------------------------------------------------------------
# jsonschema's own message is 10-100 lines (the failing subschema, the whole instance); this
# says which key, which value, what is allowed, and where the value was written.

def _key_text(parts) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 4] + " ..."


def _holds(data: Any, parts) -> bool:
    """Whether ``data`` (one config source as written) sets the value at ``parts``."""
    for part in parts:
        if isinstance(data, Mapping) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        else:
            return False
    return True


def _source(sources, parts) -> tuple[str | None, int | None]:
    """(file or ``--config``, line) of the source whose value at ``parts`` (or its deepest
    written parent) wins: the last of ``sources`` that sets it."""
    from headlab.workflow.configfile import line_of

    for depth in range(len(parts), -1, -1):
        for name, data in reversed(sources):
            if _holds(data, parts[:depth]):
                return name, (None if name == "--config" else line_of(name, list(parts)))
    return None, None


def _plural(count: int, word: str) -> str:
    if count == 1:
        return f"{count} {word}"
    return f"{count} {word[:-1]}ies" if word.endswith("y") else f"{count} {word}s"


def _allowed(error, root: Mapping) -> str:
    """What the failed keyword allows, in words."""
    rule, limit, schema = error.validator, error.validator_value, error.schema
    if rule == "pattern":
        return schema.get("description") or f"a string matching {limit}"
    if rule in ("oneOf", "anyOf"):
        return "one of: " + "; ".join(_describe(branch, root) for branch in limit)
    if rule == "enum":
        return "one of " + ", ".join(map(repr, limit))
    if rule == "type":
        return limit if isinstance(limit, str) else " or ".join(limit)
    if rule == "uniqueItems":
        return "no repeated items"
    bounds = {"minimum": "at least {}", "maximum": "at most {}", "exclusiveMinimum": "more than {}",
              "exclusiveMaximum": "less than {}", "const": "only {!r}"}
    counted = {"minItems": ("at least", "item"), "maxItems": ("at most", "item"),
               "minLength": ("at least", "character"), "maxLength": ("at most", "character"),
               "minProperties": ("at least", "entry")}
    if rule in bounds:
        return bounds[rule].format(limit)
    if rule in counted:
        return f"{counted[rule][0]} {_plural(limit, counted[rule][1])}"
    return error.message


def schema_error(config: Mapping, schema: Mapping, sources: list[tuple[str, Mapping]]) -> ConfigError | None:
    """The config's first schema violation as one :class:`ConfigError` naming its key path,
    its value, what the schema allows there and the source that wrote it (``sources``:
    (config file or ``--config``, its mapping as written), in merge order); None if valid."""
    import difflib

    import jsonschema

    validator = jsonschema.validators.validator_for(schema)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(config))
    if error is None:
        return None
    parts = list(error.absolute_path)
    if error.validator == "additionalProperties":
        known = list(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(known))[0]
        close = [name for name in known if name.lower() == extra.lower()] or difflib.get_close_matches(extra, known, n=1)
        parts.append(extra)
        message = (f"unknown key {extra!r}; " + (f"did you mean {close[0]!r}? " if close else "")
                   + f"known: {', '.join(known)}")
    elif error.validator == "required":
        missing = next(name for name in error.validator_value if name not in error.instance)
        parts.append(missing)
        nulled = [name for name, data in sources if _holds(data, parts)]
        message = f"{missing!r} is a required property" + (
            "; null removes it (an overlay can change it, not drop it)" if nulled else "")
    else:
        message = f"{_short(error.instance)} is not allowed: {_allowed(error, schema)}"
    path, line = _source(sources, parts)
    return ConfigError(message, path=path, line=line, key=_key_text(parts))
