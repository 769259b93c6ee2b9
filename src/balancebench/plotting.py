"""Small figure helpers shared by the paper figures and the models' figures."""

from __future__ import annotations

from collections.abc import Sequence


def spread_offsets(lines: int, xs: Sequence[float], share: float) -> list[float]:
    """x offsets, one per line, that spread ``lines`` lines over ``share`` of the smallest
    step between the x values ``xs`` (sorted), centred on each x: equal values then do not
    hide each other's markers and error bars."""
    step = min((b - a for a, b in zip(xs, xs[1:], strict=False)), default=1.0)
    return [(i - (lines - 1) / 2) * step * share / max(1, lines) for i in range(lines)]
