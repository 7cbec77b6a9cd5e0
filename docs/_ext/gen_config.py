"""The configuration reference, from ``config/schema.yaml``: every key with its type, default
and description, one table per top-level key and per study (``studies.paper_A`` ...)."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

#: placeholder for a key the user names (a corpus, a language, an option)
ANY = "<NAME>"


def _resolve(node: dict, root: dict) -> dict:
    """Follow ``$ref`` (local ``#/definitions/...`` only), keeping the referring node's own
    description and default, which override the definition's."""
    seen = set()
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        if ref in seen:
            break
        seen.add(ref)
        target = root
        for part in ref.lstrip("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _type(node: dict, root: dict) -> str:
    node = _resolve(node, root)
    if "enum" in node:
        return " | ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    for alt in ("oneOf", "anyOf"):
        if alt in node:
            return " or ".join(_type(sub, root) for sub in node[alt])
    kind = node.get("type", "any")
    kind = " or ".join(kind) if isinstance(kind, list) else kind
    if kind == "array" and "items" in node:
        return f"list of {_type(node['items'], root)}"
    if "pattern" in node:
        kind += f" (`{node['pattern']}`)"
    return kind


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _rows(path: str, node: dict, root: dict, depth: int = 0, required: bool = False):
    """(key, type, default, description, required) for ``node`` and every key below it."""
    node = _resolve(node, root)
    default = f"`{json.dumps(node['default'])}`" if "default" in node else ""
    yield path, _type(node, root), default, node.get("description", ""), required
    if depth > 8:       # the schema has no cycles; this only guards a future one
        return
    needed = set(node.get("required", []))
    for key, sub in node.get("properties", {}).items():
        yield from _rows(f"{path}.{key}", sub, root, depth + 1, key in needed)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        extra = _resolve(extra, root)
        if "properties" in extra or "additionalProperties" in extra:
            yield from _rows(f"{path}.{ANY}", extra, root, depth + 1)
    for alt in node.get("oneOf", []):
        alt = _resolve(alt, root)
        for key, sub in alt.get("properties", {}).items():
            yield from _rows(f"{path}.{key}", sub, root, depth + 1)


def _table(path: str, node: dict, root: dict, required: bool = False) -> str:
    lines = ["| key | type | default | description |", "|---|---|---|---|"]
    for key, kind, default, description, needed in _rows(path, node, root, required=required):
        mark = " (required)" if needed else ""
        lines.append(f"| `{_cell(key)}`{mark} | {_cell(kind)} | {_cell(default)} | {_cell(description)} |")
    return "\n".join(lines) + "\n"


def config_pages(schema_path: Path) -> dict[str, str]:
    """name -> markdown table: one per top-level key, ``studies.NAME`` per study, and
    ``reference``: every top-level key but the studies, each under a heading."""
    root = yaml.safe_load(schema_path.read_text(encoding="utf-8"))
    pages = {}
    needed = set(root.get("required", []))
    for key, node in root["properties"].items():
        if key == "studies":
            for study, sub in node["properties"].items():
                pages[f"studies.{study}"] = _table(f"studies.{study}", sub, root)
        else:
            pages[key] = _table(key, node, root, key in needed)
    # the studies' keys are on their own pages: here one line each, so that none is missed
    studies = root["properties"]["studies"]["properties"]
    pages["studies"] = "\n".join(["| key | description |", "|---|---|"] + [
        f"| `studies.{name}` | {_cell(_resolve(node, root).get('description', ''))} |"
        for name, node in studies.items()]) + "\n"
    pages["reference"] = "\n".join(f"### `{key}`\n\n{pages[key]}" for key in root["properties"]
                                   if key in pages)
    return pages
