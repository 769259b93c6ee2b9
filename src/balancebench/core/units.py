"""A figure in the unit its metric's name gives, as a person reads it: ``10.6 M tuples/s``,
``241 ms``, ``1.2 MB``; never e-notation (the terminal tables and the HTML report).

The unit comes from the name (the convention of ``metric_definitions``: the unit is in
the name, a summary's suffix after it): ``_tuples_per_s`` a rate, ``_ms`` and ``_s``
times, ``_bytes`` sizes, ``_tuples``, ``_rows``, ``_entries`` and ``nodes_`` counts; a
name with none of these is a plain number (a ratio such as ``imbalance_max_over_mean``).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Final

#: Summary suffixes after the unit (``makespan_s_total`` is in seconds).
_SUFFIXES: Final[tuple[str, ...]] = ("_total", "_mean", "_max", "_min")
#: Count prefixes: 1,000 is k, 10^6 M, 10^9 G.
_SCALES: Final[tuple[tuple[float, str], ...]] = ((1e9, "G"), (1e6, "M"), (1e3, "k"))


@dataclass(frozen=True)
class Unit:
    """How one metric's values print: divided by ``scale``, followed by ``name``."""

    scale: float
    name: str

    def number(self, value: float) -> str:
        """``value`` in this unit, 3 significant digits, no unit name."""
        return _digits(value / self.scale)

    def text(self, value: float) -> str:
        """``value`` with the unit's name (``10.6 M tuples/s``)."""
        return f"{self.number(value)} {self.name}".rstrip()

    def shown(self, value: object) -> str:
        """Any table cell's value in this unit: ``-`` where there is no number (None, NaN:
        a strategy with no finished round)."""
        found = _number(value)
        return "-" if found is None else self.number(found)


def _digits(x: float) -> str:
    """3 significant digits in positional notation (``0.00123``, ``12.3``, ``12300``)."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    if x == round(x):  # a whole number (a count, a factor of 1) prints whole
        return f"{x:,.0f}"
    digits = max(0, 2 - math.floor(math.log10(abs(x))))
    return f"{x:,.{digits}f}"


def _kind(metric: str) -> str:
    base = metric
    for suffix in _SUFFIXES:
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    if base.endswith("_per_s"):
        return "rate"
    if base.endswith("_ms"):
        return "ms"
    if base.endswith("_s") or base.startswith("latency_"):
        return "s"
    if "bytes" in base:
        return "bytes"
    if base.startswith("oracle_"):
        return "flag"
    if any(w in base for w in ("tuples", "rows", "entries", "nodes_")):
        return "count"
    return "plain"


def is_count(metric: str) -> bool:
    """Whether ``metric`` counts whole things (tuples, rows, entries, nodes): an axis of
    it has whole-number ticks."""
    return _kind(metric) == "count"


def unit_for(metric: str, typical: object) -> Unit:
    """The unit ``metric``'s values print in, its prefix chosen for ``typical`` (the
    values of one table row share the baseline's, so they read side by side; no number
    there, None or NaN, gives the unit without a prefix)."""
    kind = _kind(metric)
    found = _number(typical)
    size = abs(found) if found is not None and math.isfinite(found) else 0.0
    if kind in ("s", "ms"):
        seconds = size / 1000 if kind == "ms" else size
        per = 1000.0 if kind == "ms" else 1.0  # the value's own unit in seconds: 1/per
        if seconds >= 1 or seconds == 0:
            return Unit(per, "s")
        if seconds >= 1e-3:
            return Unit(per / 1e3, "ms")
        return Unit(per / 1e6, "µs")
    if kind == "bytes":
        for scale, prefix in _SCALES:
            if size >= scale:
                return Unit(scale, f"{prefix}B")
        return Unit(1.0, "B")
    if kind in ("rate", "count"):
        name = "tuples/s" if kind == "rate" else ""
        for scale, prefix in _SCALES:
            if size >= scale:
                return Unit(scale, f"{prefix} {name}".rstrip())
        return Unit(1.0, name)
    return Unit(1.0, "")


def quantity(metric: str, value: object) -> str:
    """One value of ``metric`` in its unit (``-`` where there is none)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    found = _number(value)
    if found is None:
        return "-"
    if _kind(metric) == "flag":
        return "yes" if found == 1 else "no"
    return unit_for(metric, found).text(found)


def _number(value: object) -> float | None:
    """``value`` as a float, None where it is none (None, NaN, text); numpy's numbers too."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or value != value:
        return None
    return float(value)


def interval(metric: str, mean: object, lo: object, hi: object, unit: Unit | None = None) -> str:
    """``mean [lo, hi] unit`` in one prefix (``unit`` given: the numbers only, in it). A
    figure below 0 is no answer (a time, a rate, a count): where the interval of a mean
    that is not reaches below 0, its ends print as "n too small"."""
    m = _number(mean)
    if m is None:
        return "-"
    if _kind(metric) == "flag":
        return quantity(metric, m)
    own = unit or unit_for(metric, m)
    shown, note = own.number(m), ""
    a, b = _number(lo), _number(hi)
    if a is not None and b is not None and a != b:
        if a < 0 <= m:
            note = " (n too small)"
        else:
            shown += f" [{own.number(a)}, {own.number(b)}]"
    if unit is None and own.name:
        shown += f" {own.name}"
    return shown + note


def spread(metric: str, mean: object, lo: object, hi: object, unit: Unit) -> str:
    """``mean ±h%`` in ``unit``: the mean and its interval's half-width as a share of it
    (the mean alone without an interval; "n too small" where the interval reaches below 0,
    as in :func:`interval`)."""
    m = _number(mean)
    if m is None:
        return "-"
    if _kind(metric) == "flag":
        return quantity(metric, m)
    shown = unit.number(m)
    a, b = _number(lo), _number(hi)
    if a is None or b is None or a == b or m == 0:
        return shown
    if a < 0 <= m:
        return f"{shown} (n too small)"
    return f"{shown} ±{(b - a) / 2 / abs(m) * 100:.0f}%"
