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
    """A string as YAML reads it in a config file (``5000`` -> 5000, ``true`` -> True)."""
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


def coerce(value: Any, schema: Mapping, root: Mapping, key: str) -> Any:
    """``value`` (possibly strings from ``--config``) converted to what ``schema`` expects."""
    schema = _resolve(schema, root)
    branches = schema.get("oneOf") or schema.get("anyOf")
    if branches:
        if _fits(value, schema, root):
            return value
        for branch in branches:
            try:
                candidate = coerce(value, branch, root, key)
            except ConfigError:
                continue
            if _fits(candidate, _resolve(branch, root), root):
                return candidate
        raise ConfigError(f"{value!r} is not valid here (expected one of: "
                          f"{'; '.join(_describe(b, root) for b in branches)})", key=key)
    if isinstance(value, dict):
        return {k: coerce(v, _child(schema, k), root, f"{key}.{k}" if key else k) for k, v in value.items()}
    if isinstance(value, list):
        items = schema.get("items", {})
        return [coerce(v, items, root, f"{key}[{i}]") for i, v in enumerate(value)]
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    if not kinds:  # free-form (OpenNMT-py options): read as a config file would
        return _scalar(value) if isinstance(value, str) else value
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


def coerce_overrides(config: dict, overrides: Mapping[str, Any], schema: Mapping) -> None:
    """Give the values of ``config`` that came from ``--config`` (``overrides``, as snakemake
    parsed them and merged them into ``config``) the schema's types, in place. ``null``
    where the schema allows no null removes the key (``studies={"paper_A": null}``: a
    mapping given with ``--config`` is merged into the config, so this is the only way to
    drop a study, a corpus or a study's corpus from the command line)."""

    def walk(node: dict, over: Mapping, sub: Mapping, prefix: str) -> None:
        sub = _resolve(sub, schema)
        for k, v in over.items():
            key = f"{prefix}.{k}" if prefix else k
            if isinstance(v, Mapping) and isinstance(node.get(k), dict):
                walk(node[k], v, _child(sub, k), key)
            elif k in node and _is_null(v) and not _fits(None, _resolve(_child(sub, k), schema), schema):
                del node[k]
            elif k in node:
                node[k] = coerce(node[k], _child(sub, k), schema, key)

    walk(config, overrides or {}, schema, "")


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value in ("null", "Null", "NULL", "~"))


def load_schema(path) -> dict:
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def load_yaml(path) -> dict:
    """A config overlay file as a mapping (empty file: {})."""
    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    if data is not None and not isinstance(data, dict):
        raise ConfigError("a config file must be a mapping", path=str(path))
    return data or {}
