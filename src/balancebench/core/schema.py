"""Checking values against JSON-schema property specs, with messages that name the field.

Experiment Params, strategy parameters and generator parameters are all described as
JSON schema (one spec per name, with a ``default``); this is the one place that turns a
spec violation into ``ValueError("<field>: <what was wrong>; allowed: ...")`` before any
work starts.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import re
from typing import Any

from jsonschema import Draft202012Validator, ValidationError, validators


def _is_integer(_checker: Any, value: Any) -> bool:
    # JSON schema calls 4.0 an integer; a node count or a batch count of 4.0 is a typo
    # that would crash much later (in Spark), so integers must be integers.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(_checker: Any, value: Any) -> bool:
    # NaN and infinity pass every numeric bound check silently: never a valid Param.
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _whole_pattern(_validator: Any, pattern: str, instance: Any, _schema: Any) -> Any:
    # JSON schema's ``pattern`` is a search, and Python's ``$`` also matches before a final
    # newline: "abc\n" would pass ``^[a-z]+$`` and become a folder named "abc\n". The
    # whole value must match (the pattern stays valid for the trigger form's JavaScript).
    if isinstance(instance, str) and re.fullmatch(pattern, instance) is None:
        yield ValidationError(f"{quoted(instance)} does not match {pattern!r}")


def _too_long(_validator: Any, limit: int, instance: Any, _schema: Any) -> Any:
    # jsonschema's own message repeats the whole value (a 100 kB string, 100 kB of error).
    if isinstance(instance, str) and len(instance) > limit:
        yield ValidationError(f"{quoted(instance)} is {len(instance):,} characters long")


#: Draft 2020-12 with strict integers, finite numbers, whole-value patterns and short
#: messages.
StrictValidator = validators.extend(
    Draft202012Validator,
    validators={"pattern": _whole_pattern, "maxLength": _too_long},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": _is_integer, "number": _is_number}
    ),
)

#: What a name used for a folder or an MLflow experiment may look like (not a path).
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 _.,:+=@-]*$"
#: :data:`NAME_PATTERN` in words, as a refusal says it: unaccented letters only, since the
#: name becomes a folder and a URL path on any machine.
NAME_IN_WORDS = (
    "a name: unaccented letters A-Z and a-z, digits, space and _.,:+=@-, starting with a "
    "letter or digit (no '/', no leading '.')"
)


#: How many characters of a user's value an error message quotes.
QUOTE_CHARS = 80


def _escaped(text: str) -> str:
    """Every non-printable character as its Python escape (``\\x1b``, ``\\u202e``)."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in text)


def quoted(value: object, limit: int = QUOTE_CHARS) -> str:
    """A user's value as an error message may quote it: ``repr``-style quotes, control
    and non-printable characters escaped (``\\x00``, ``\\x1b``, ``\\u202e``), at most
    ``limit`` characters of it, and the length of what was cut. A terminal shows it as
    is: no raw bytes, no markup, never a whole line of a file."""
    text = value if isinstance(value, str) else str(value)
    cut = len(text) - limit
    shown = text[:limit] if cut > 0 else text
    out = "'" + _escaped(shown).replace("'", "\\'") + "'"
    return out + (f" (+{cut:,} more characters)" if cut > 0 else "")


#: How many characters of a path a message quotes (a file name is at the end).
PATH_QUOTE_CHARS = 200


def shown_path(path: object) -> str:
    """A path as a message quotes it (escaped; long paths cut after 200 characters)."""
    return quoted(str(path), PATH_QUOTE_CHARS)


def terminal_safe(message: str, limit: int = 2000) -> str:
    """A whole message made safe for a terminal: control characters escaped (a newline
    kept), at most ``limit`` characters. The last net under messages built elsewhere
    (a library's exception text)."""
    text = "\n".join(_escaped(line) for line in message.splitlines())
    return text if len(text) <= limit else text[:limit] + f" … (+{len(text) - limit:,} characters)"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows; give a finite number")


def _whole_number(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}; allowed: a whole number >= {least}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{value}; allowed: a whole number >= {least}")
    return value


def positive_int(text: str) -> int:
    """An ``argparse`` type for a script's counts (``--repeats``, ``--tuples``): a whole
    number >= 1, refused at parse time with the allowed values (``int`` alone lets 0 and
    negative counts through to an empty median or a Spark error much later)."""
    return _whole_number(text, 1)


def positive_float(text: str) -> float:
    """An ``argparse`` type for a script's durations (``--every``): a finite number > 0,
    refused at parse time with the allowed values."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}; allowed: a number > 0") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}; allowed: a finite number > 0")
    return value


def non_negative_int(text: str) -> int:
    """An ``argparse`` type for a count that may be 0 (``--skip``), as :func:`positive_int`."""
    return _whole_number(text, 0)


#: The most nodes any Param takes (nodes, senders, a grid's or a group's nodes).
MAX_NODES = 1024

#: Bounds on a user's JSON text (a CONF): its size and how deep it nests. The largest
#: real CONF (a sweep grid) is a few kB and 3 levels deep.
MAX_JSON_CHARS = 1_000_000
MAX_JSON_DEPTH = 20


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads keeps the last of a repeated key: {"n_nodes": 0, "n_nodes": 4} would run
    # with 4 and never say that 0 was given.
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {quoted(key)} is given twice; give each Param once")
        out[key] = value
    return out


def _json_depth(text: str) -> int:
    """How deep brackets nest in JSON text (brackets inside strings skipped), found
    without parsing: a CONF nested 10,000 deep would overflow the parser's recursion."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def parse_json_object(text: str, what: str = "CONF") -> dict[str, Any]:
    """A JSON object from user text (``CONF``, ``--conf``): NaN/Infinity, a repeated key,
    more than ``MAX_JSON_CHARS`` characters or ``MAX_JSON_DEPTH`` levels of nesting, and
    anything that is not an object are refused with ``ValueError`` naming ``what``. So is
    an empty text: it is more often a shell variable left unset than a choice, and it
    would start the full default run; ``{}`` asks for the defaults."""
    if not (text or "").strip():
        raise ValueError(
            f"{what}: empty; allowed: a JSON object of Params, '{{}}' for every default"
        )
    if len(text) > MAX_JSON_CHARS:
        raise ValueError(f"{what}: {len(text):,} characters; allowed: at most {MAX_JSON_CHARS:,}")
    depth = _json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"{what}: nested {depth:,} levels deep; allowed: at most {MAX_JSON_DEPTH}")
    try:
        value = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what}: not valid JSON ({exc.msg} at character {exc.pos})") from None
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(
            f"{what}: expected a JSON object of Params, e.g. '{{\"zipf_s\": 1.2}}'; "
            f"got {type(value).__name__ if value is not None else 'null'}"
        )
    return value


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
    if spec.get("pattern") == NAME_PATTERN:
        parts.append(NAME_IN_WORDS)
    if "x-allowed" in spec:  # a pattern's meaning in words, from the spec itself
        parts.append(spec["x-allowed"])
    lengths = {"minLength": "at least", "maxLength": "at most"}
    parts += [
        f"{word} {spec[key]} character{'s' if spec[key] != 1 else ''}"
        for key, word in lengths.items()
        if key in spec
    ]
    parts += _bounds(spec)
    if isinstance(items, dict):
        parts += [f"items {b}" for b in _bounds(items)]
    if spec.get("uniqueItems"):
        parts.append("each value once")
    return ", ".join(parts)


def _spec_at(properties: dict[str, dict[str, Any]], path: list[str]) -> dict[str, Any]:
    """The spec of the value at ``path`` (a Param, a key of an object Param such as a
    sweep's ``grid.workloads``, an item of a list): the deepest one the schema names."""
    spec = properties.get(path[0], {}) if path else {}
    for step in path[1:]:
        inner = spec.get("properties", {}).get(step)
        if inner is None and step.isdigit() and isinstance(spec.get("items"), dict):
            inner = spec["items"]
        if inner is None:
            break
        spec = inner
    return spec


def _bounds(spec: dict[str, Any]) -> list[str]:
    words = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
    return [f"{word} {spec[key]}" for key, word in words.items() if key in spec]


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


def positive_number_spec(
    default: float, title: str, description: str, **bounds: float
) -> dict[str, Any]:
    """A ``number > 0`` (at most ``1e9`` unless ``bounds`` say otherwise)."""
    return number_spec(
        default, title, description, **{"exclusiveMinimum": 0, "maximum": 1e9, **bounds}
    )


def share_spec(default: float, title: str, description: str) -> dict[str, Any]:
    """A share strictly between 0 and 1."""
    return number_spec(default, title, description, exclusiveMinimum=0, exclusiveMaximum=1)


def array_spec(
    items: dict[str, Any], default: list[Any], title: str, description: str, **bounds: int
) -> dict[str, Any]:
    """An ``array`` of ``items``; ``bounds`` are ``minItems`` / ``maxItems``."""
    return {
        "type": "array",
        "items": items,
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
    if not isinstance(values, dict):
        raise ValueError(
            f"invalid {what}: expected an object of Params, got {type(values).__name__}"
        )
    unknown = sorted(set(values) - set(properties))
    merged = spec_defaults(properties) if fill_defaults else {}
    merged.update({k: v for k, v in values.items() if k in properties})
    validator = StrictValidator(
        {"type": "object", "properties": properties, "additionalProperties": True}
    )
    lines = []
    if unknown:
        names = ", ".join(quoted(name) for name in unknown[:10])
        more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
        lines.append(f"unknown {what} [{names}{more}]; allowed: {sorted(properties)}")
    for err in sorted(validator.iter_errors(merged), key=lambda e: list(e.absolute_path)):
        path = [str(p) for p in err.absolute_path]
        field = ".".join(path) or what
        spec = _spec_at(properties, path)
        allowed = _allowed(spec)
        message = err.message
        if err.validator == "pattern" and "x-allowed" in spec:  # words, not the regex
            message = f"{err.instance!r} is not {spec['x-allowed']}"
        elif err.validator == "pattern" and spec.get("pattern") == NAME_PATTERN:
            message = f"{err.instance!r} is not an allowed name"
        if isinstance(err.instance, str):  # the value as quoted() shows it, not repr()
            message = message.replace(repr(err.instance), quoted(err.instance))
        lines.append(f"{field}: {message}" + (f" (allowed: {allowed})" if allowed else ""))
    if lines:
        raise ValueError(f"invalid {what}: " + "; ".join(lines))
    return {
        name: normalised(properties[name], value) if name in properties else value
        for name, value in merged.items()
    }


def normalised(spec: dict[str, Any], value: Any) -> Any:
    """A checked value in its declared type, so that equal values are equal bytes wherever
    they are hashed (a cell's key, a dataset's id, a history): a whole number given for a
    ``number`` Param becomes a float (the trigger form sends ``1`` for ``1.0``), ``-0.0``
    becomes ``0.0``, and the items of an array follow its ``items`` spec."""
    kinds = spec.get("type", ())
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and "number" in kinds and "integer" not in kinds:
        return float(value) + 0.0  # + 0.0: -0.0 becomes 0.0
    if isinstance(value, list) and isinstance(spec.get("items"), dict):
        return [normalised(spec["items"], item) for item in value]
    return value


def check_grid_size(sizes: dict[str, int], limit: int, limit_field: str) -> int:
    """The number of runs of a grid (the product of its axes' lengths and multipliers),
    refused above ``limit`` before a single point is built; the message shows the product."""
    total = math.prod(sizes.values())
    if total > limit:
        shown = " x ".join(f"{n:,} {name}" for name, n in sizes.items())
        raise ValueError(
            f"grid: {shown} = {total:,} runs; allowed: at most {limit:,} "
            f"({limit_field}, which can be raised up to its maximum)"
        )
    return total
