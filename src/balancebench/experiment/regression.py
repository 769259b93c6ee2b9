"""Regression detection of a nightly sweep against the history of each cell.

Timed figures follow the rule of Apache Flink's nightly benchmarks (``flink-benchmarks``,
``regression_report_v2.py``), mirrored for figures where lower is better:

- the history is a cell's last 30 results (one per round run, oldest first);
- the baseline is the best of the rolling min-of-3 of the history (for lower-is-better
  figures, the best of the rolling max-of-3): a baseline that three runs in a row reached;
- tonight's value (the mean of tonight's rounds) has regressed when it is worse than
  the baseline by more than ``max(4%, 2 x stdev / |tonight|)``.

Two additions, for histories far shorter than Flink's and figures of a few milliseconds:
the stdev is taken over the history *and* tonight's rounds (all samples of the same
cell's noise; with one earlier sweep of a few rounds the history alone says little),
and a change smaller than the figure's ``MIN_ABSOLUTE`` is never a regression (two
identical sweeps measured here moved ``plan_time_ms_mean`` from 1.47 to 2.09 ms: +42%, on
the wall clock; plans are timed on the thread's CPU clock since, ``cost_model.plan_clock``).

Deterministic figures (tuple imbalance, routing entries, migrated tuples, result rows and
the result digest) depend only on the seed, the Params and the code: any change from the
last run with the same dataset digest and code is reported as a change, not as noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from balancebench.core.stats import HIGHER, LOWER

#: Timed headline figures and their good direction.
TIMED: Final[dict[str, str]] = {
    "latency_p50_s": LOWER,
    "latency_p99_s": LOWER,
    "throughput_tuples_per_s": HIGHER,
    "capacity_tuples_per_s": HIGHER,
    "makespan_s_total": LOWER,
    "plan_time_ms_mean": LOWER,
    "migration_s_total": LOWER,
}
#: The good direction of every figure a verdict is given on (``stats.verdict``): the
#: timed headline figures, the routing and processing time, and what paper 000's figures
#: plot.
DIRECTIONS: Final[dict[str, str]] = {
    **TIMED,
    "route_s_total": LOWER,
    "charged_s_total": LOWER,
    "avg_received_tuples_per_node_total": LOWER,
    "nodes_used_max": LOWER,
    "scale_out_adjustment_s_total": LOWER,
    "imbalance_max_over_mean_mean": LOWER,
    "migrated_tuples_total": LOWER,
}
#: Figures that must not change at the same seed, Params and code.
EXACT: Final[tuple[str, ...]] = (
    "imbalance_max_over_mean_mean",
    "routing_table_entries_max",
    "migrated_tuples_total",
    "result_rows_total",
)
#: Smallest change that counts, in the figure's unit (below it: jitter of the harness).
MIN_ABSOLUTE: Final[dict[str, float]] = {
    "latency_p50_s": 0.01,
    "latency_p99_s": 0.01,
    "makespan_s_total": 0.01,
    "migration_s_total": 0.01,
    "plan_time_ms_mean": 1.0,
}
HISTORY_RUNS: Final[int] = 30
ROLLING: Final[int] = 3
MIN_RELATIVE: Final[float] = 0.04
STDEVS: Final[float] = 2.0


@dataclass(frozen=True)
class Verdict:
    """One timed figure of one cell against its history."""

    metric: str
    direction: str
    current: float
    baseline: float | None
    #: Change in the bad direction, relative to the baseline (negative: better).
    change: float | None
    threshold: float | None
    regressed: bool
    #: Earlier values the baseline and the noise were taken over (the last ``HISTORY_RUNS``
    #: finite ones; 0: no history).
    history_runs: int = 0

    def text(self) -> str:
        if self.baseline is None:
            return f"{self.metric}: {self.current:.4g} (no history)"
        assert self.change is not None and self.threshold is not None
        return (
            f"{self.metric}: {self.current:.4g} vs baseline {self.baseline:.4g} "
            f"({self.change:+.1%} worse; threshold {self.threshold:.1%}; "
            f"{self.direction} is better)"
        )


def baseline(history: list[float], direction: str) -> float:
    """Best of the rolling worst-of-3 over the last ``HISTORY_RUNS`` values."""
    values = np.asarray(history[-HISTORY_RUNS:], dtype=float)
    width = min(ROLLING, len(values))
    windows = np.lib.stride_tricks.sliding_window_view(values, width)
    if direction == HIGHER:
        return float(windows.min(axis=1).max())
    return float(windows.max(axis=1).min())


def judge(
    metric: str,
    history: list[float],
    current: float,
    direction: str,
    tonight: list[float] | tuple[float, ...] = (),
) -> Verdict:
    """Has ``current`` (the mean of ``tonight``'s rounds) regressed against
    ``history`` (oldest first)?"""
    if direction not in (LOWER, HIGHER):
        raise ValueError(f"direction: {direction!r}; allowed values: {[LOWER, HIGHER]}")
    finite = [float(v) for v in history if np.isfinite(v)]
    if not finite or not np.isfinite(current):
        return Verdict(metric, direction, current, None, None, None, False)
    base = baseline(finite, direction)
    used = len(finite[-HISTORY_RUNS:])
    noise = np.asarray(
        finite[-HISTORY_RUNS:] + [float(v) for v in tonight if np.isfinite(v)], dtype=float
    )
    stdev = float(noise.std(ddof=1)) if len(noise) > 1 else 0.0
    threshold = max(MIN_RELATIVE, STDEVS * stdev / abs(current) if current else 0.0)
    sign = 1.0 if direction == LOWER else -1.0
    delta = sign * (current - base)  # > 0: worse
    large_enough = delta > MIN_ABSOLUTE.get(metric, 0.0)
    if base == 0.0:
        # No relative change from a zero baseline: any bad move beyond the noise counts.
        worse = large_enough and delta > STDEVS * stdev
        return Verdict(
            metric,
            direction,
            current,
            base,
            float("inf") if worse else 0.0,
            threshold,
            worse,
            used,
        )
    change = delta / abs(base)
    return Verdict(
        metric,
        direction,
        current,
        base,
        change,
        threshold,
        large_enough and change > threshold,
        used,
    )


def exact_changes(previous: dict[str, float | str], current: dict[str, float | str]) -> list[str]:
    """Deterministic figures that differ from the previous run (same seed and code)."""
    out = []
    for name in sorted(set(previous) & set(current)):
        before, now = previous[name], current[name]
        same = (
            before == now
            if isinstance(before, str) or isinstance(now, str)
            else bool(np.isclose(float(before), float(now), rtol=1e-9, atol=0.0))
        )
        if not same:
            out.append(f"{name}: {before} -> {now}")
    return out
