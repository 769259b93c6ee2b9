"""Small figure helpers shared by the comparison, the report, the paper figures and the
models' figures: one order and one colour per strategy, and spread markers."""

from __future__ import annotations

from collections.abc import Sequence

from balancebench.strategies import STRATEGIES


def spread_offsets(lines: int, xs: Sequence[float], share: float) -> list[float]:
    """x offsets, one per line, that spread ``lines`` lines over ``share`` of the smallest
    step between the x values ``xs`` (sorted), centred on each x: equal values then do not
    hide each other's markers and error bars."""
    step = min((b - a for a, b in zip(xs, xs[1:], strict=False)), default=1.0)
    return [(i - (lines - 1) / 2) * step * share / max(1, lines) for i in range(lines)]


def strategy_order(names: list[str]) -> list[str]:
    """``names`` in the registry's order (names it does not know go last, as given)."""
    known = [s for s in STRATEGIES if s in names]
    return known + [n for n in names if n not in STRATEGIES]


def strategy_color(name: str) -> str:
    """The one colour of a strategy in every figure (matplotlib's tab20, by registry index)."""
    import matplotlib

    names = list(STRATEGIES)
    index = names.index(name) if name in names else len(names)
    # tab20's strong shades first (even slots), then the light ones: neighbours in the
    # registry (hash, qmmp, mnrt) get distinct hues.
    slot = (2 * index) % 20 + (index // 10) % 2
    r, g, b, _ = matplotlib.colormaps["tab20"](slot)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"
