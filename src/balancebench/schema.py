"""Checking values against JSON-schema property specs, with messages that name the field.

Experiment Params, strategy parameters and generator parameters are all described as
JSON schema (one spec per name, with a ``default``); this is the one place that turns a
spec violation into ``ValueError("<field>: <what was wrong>; allowed: ...")`` before any
work starts.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonschema


def _allowed(spec: dict[str, Any]) -> str:
    """What a spec allows, in words (for the error message)."""
    parts = []
    if "enum" in spec:
        parts.append(f"one of {spec['enum']}")
    items = spec.get("items", {})
    if isinstance(items, dict) and "enum" in items:
        parts.append(f"items from {items['enum']}")
    if "type" in spec:
        parts.append(f"type {spec['type']}")
    for key, word in (
        ("minimum", ">="),
        ("exclusiveMinimum", ">"),
        ("maximum", "<="),
        ("exclusiveMaximum", "<"),
    ):
        if key in spec:
            parts.append(f"{word} {spec[key]}")
    return ", ".join(parts)


def number_spec(default: float, title: str, description: str, **bounds: float) -> dict[str, Any]:
    """A ``number`` property spec; ``bounds`` are JSON-schema keywords (``minimum``,
    ``exclusiveMinimum``, ``maximum``, ``exclusiveMaximum``)."""
    return {
        "type": "number",
        **bounds,
        "default": default,
        "title": title,
        "description": description,
    }


def integer_spec(default: int, title: str, description: str, **bounds: int) -> dict[str, Any]:
    """An ``integer`` property spec; ``bounds`` as in :func:`number_spec`."""
    return {
        "type": "integer",
        **bounds,
        "default": default,
        "title": title,
        "description": description,
    }


def spec_defaults(properties: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every property's ``default`` (deep copies, so callers may mutate them)."""
    return {k: copy.deepcopy(s["default"]) for k, s in properties.items() if "default" in s}


def check_values(
    properties: dict[str, dict[str, Any]],
    values: dict[str, Any],
    *,
    what: str = "params",
    fill_defaults: bool = True,
) -> dict[str, Any]:
    """``values`` with defaults filled in, every value checked against its spec.

    Unknown names and bad values raise one ``ValueError`` listing every problem, each
    naming the field, the value and what is allowed.
    """
    unknown = sorted(set(values) - set(properties))
    merged = spec_defaults(properties) if fill_defaults else {}
    merged.update({k: v for k, v in values.items() if k in properties})
    validator = jsonschema.Draft202012Validator(
        {"type": "object", "properties": properties, "additionalProperties": True}
    )
    lines = []
    if unknown:
        lines.append(f"unknown {what} {unknown}; allowed: {sorted(properties)}")
    for err in sorted(validator.iter_errors(merged), key=lambda e: list(e.absolute_path)):
        path = [str(p) for p in err.absolute_path]
        field = ".".join(path) or what
        spec = properties.get(path[0], {}) if path else {}
        allowed = _allowed(spec)
        lines.append(f"{field}: {err.message}" + (f" (allowed: {allowed})" if allowed else ""))
    if lines:
        raise ValueError(f"invalid {what}: " + "; ".join(lines))
    return merged
