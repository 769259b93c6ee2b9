"""Small figure helpers shared by the comparison, the report, the paper figures and the
models' figures: one order and one colour per strategy, and spread markers."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from balancebench.strategies import STRATEGIES

if TYPE_CHECKING:
    from balancebench.core.stats import Verdict

#: Each strategy's colour, fixed by name (matplotlib's tab20, strong shades first), so that
#: adding a strategy never recolours another in any figure, old or new.
STRATEGY_COLORS: Final[dict[str, str]] = {
    "hash": "#1f77b4",
    "qmmp": "#ff7f0e",
    "mnrt": "#2ca02c",
    "readj": "#d62728",
    "pkg": "#9467bd",
    "dchoices": "#8c564b",
    "wchoices": "#e377c2",
    "balanceload": "#7f7f7f",
    "dynamic": "#bcbd22",
    "bi": "#17becf",
    "bi6": "#aec7e8",
    "operator_set": "#ffbb78",
    "operator_parallel": "#98df8a",
    "query_parallel": "#ff9896",
    "spark_streaming": "#c5b0d5",
    "spark_aqe": "#c49c94",
    "spark_salting": "#f7b6d2",
}
#: Colours for a name the map does not hold (a new strategy before it is given one):
#: matplotlib's tab20b, none of them in the map.
_UNLISTED_COLORS: Final[tuple[str, ...]] = (
    "#393b79", "#5254a3", "#6b6ecf", "#9c9ede", "#637939", "#8ca252", "#b5cf6b", "#cedb9c",
    "#8c6d31", "#bd9e39", "#e7ba52", "#e7cb94", "#843c39", "#ad494a", "#d6616b", "#e7969c",
    "#7b4173", "#a55194", "#ce6dbd", "#de9ed6",
)  # fmt: skip


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
    """The one colour of a strategy in every figure: :data:`STRATEGY_COLORS`, or for a
    name it does not hold one picked by a hash of the name (stable across runs and
    registries: never by a position that an insertion would shift)."""
    if name in STRATEGY_COLORS:
        return STRATEGY_COLORS[name]
    digest = hashlib.sha256(name.encode()).digest()
    return _UNLISTED_COLORS[int.from_bytes(digest[:4], "big") % len(_UNLISTED_COLORS)]


def verdict_point(
    ax: Any,
    at: float,
    found: Verdict,
    color: str,
    across: bool,
    label: str | None = None,
    size: float = 7,
) -> None:
    """One verdict on a forest-style axis: the change against the baseline in % (+ is
    better) with its interval, filled where decided and hollow where open; ``across``:
    the change runs along the x axis (``at`` is then the row's y)."""
    est, lo, hi = (100 * c for c in found.change_interval)
    error = [[est - lo], [hi - est]]
    x, y, bars = (est, at, {"xerr": error}) if across else (at, est, {"yerr": error})
    ax.errorbar(
        x,
        y,
        fmt="o",
        color=color,
        capsize=3,
        markerfacecolor=color if found.decided else "white",
        markersize=size,
        label=label,
        **bars,
    )
