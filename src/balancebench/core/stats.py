"""The one statistics module: every number balancebench compares goes through here.

A **round** is the unit of evidence: every strategy of a cell group runs once, in a
rotated order, on the same loaded data, inside one Spark application. Rounds pair the
strategies, so what is compared is, per round, the ratio of a strategy's figure to the
baseline's (Kalibera and Jones, "Rigorous benchmarking in reasonable time", ISMM 2013:
confidence intervals for the ratio of means; Bulej et al.'s duet benchmarking for noisy
shared machines). Three functions, used by every report, figure, README reading and the
default run:

- :func:`mean_interval`: one strategy's mean over rounds with a Student-t interval
  (descriptive: what the tables print);
- :func:`ratio_interval`: the strategy over the baseline. Paired (the default): the
  geometric mean of the per-round ratios with a t interval on the log-ratios. Unpaired
  (points that do not share rounds, e.g. two skews): the ratio of geometric means with a
  Welch t interval on the logs;
- :func:`verdict`: three words only. "equivalent within ±m%" when the whole interval lies
  inside [1 - m, 1 + m] (two one-sided tests, each at half the interval's error: 2.5% for
  a 95% interval, stricter than the usual 5%); else "X% faster [lo, hi]" or "X% slower
  [lo, hi]" when the interval excludes 1; otherwise "no clear difference (n rounds)", or
  "undecided after n rounds" when rounds were added until a budget ended. X is the
  change of the figure itself, the strategy against the baseline (node service 0.8 s
  against 1.0 s is "20% faster"; capacity 1.25M against 1.0M is "25% faster"); the
  brackets are the interval of that change, signed (+ faster, - slower) where the verdict
  names no direction.

**Adding rounds until the answer is clear** (:func:`sequential_alpha`). Looking at the
interval after every round and stopping once it excludes 1 would find a difference that
is not there far more often than 5% (simulated here: 12% with looks at rounds 5-10, 25%
at 5-40, at a 95% level per look). So when the rounds from ``first`` to ``last`` may
each be a look, every look uses the stricter per-look level whose chance of any false
verdict over all the looks is ``alpha`` (Pocock's constant boundary, computed for that
look schedule by simulating the same t procedure on normal data). The coverage and error
of every procedure used here are checked by simulation in ``tests/test_stats.py`` with
log-normal noise of the spread measured on this machine and a position effect.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Final

import numpy as np

LOWER, HIGHER = "lower", "higher"
#: The confidence level of every interval (its per-look level under sequential looks).
LEVEL: Final[float] = 0.95
#: The default equivalence margin (the Param ``equivalence_margin``): within ±3%.
DEFAULT_MARGIN: Final[float] = 0.03
#: The chance at which :func:`rounds_to_decide` estimates the rounds that decide.
DECIDE_POWER: Final[float] = 0.8
#: Beyond this many rounds :func:`rounds_to_decide` gives up (the change seen is noise).
DECIDE_CAP: Final[int] = 1000
#: Simulated look schedules behind :func:`sequential_alpha` (seeded: same answer always).
_SEQUENTIAL_PATHS: Final[int] = 40_000


@dataclass(frozen=True)
class MeanInterval:
    """A figure's mean over ``n`` values and its Student-t interval (NaN ends: n < 2).
    Values all equal (a deterministic figure) give the value as both ends."""

    mean: float
    std: float
    lo: float
    hi: float
    n: int

    def as_columns(self) -> dict[str, float]:
        """The table columns ``mean``, ``std``, ``ci95_lo``, ``ci95_hi``, ``n``."""
        return {
            "mean": self.mean,
            "std": self.std,
            "ci95_lo": self.lo,
            "ci95_hi": self.hi,
            "n": float(self.n),
        }


def _t(level: float, df: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(1 - (1 - level) / 2, df))


def mean_interval(values: Sequence[float], level: float = LEVEL) -> MeanInterval:
    """The mean of ``values`` and its Student-t interval at ``level`` (two-sided)."""
    arr = np.asarray(values, dtype=float)
    arr = arr[np.isfinite(arr)]
    n = len(arr)
    if n == 0:
        return MeanInterval(math.nan, math.nan, math.nan, math.nan, 0)
    mean = float(arr.mean())
    if n < 2:
        return MeanInterval(mean, math.nan, math.nan, math.nan, n)
    std = float(arr.std(ddof=1))
    if np.ptp(arr) == 0.0:
        return MeanInterval(mean, 0.0, mean, mean, n)
    half = _t(level, n - 1) * std / math.sqrt(n)
    return MeanInterval(mean, std, mean - half, mean + half, n)


def repetition_stats(values: Sequence[float]) -> dict[str, float]:
    """:func:`mean_interval` as the table columns (``mean``, ``std``, ``ci95_lo``,
    ``ci95_hi``, ``n``) a sweep, a model summary and a figure's CSV carry."""
    return mean_interval(values).as_columns()


def columns_over(
    summaries: Iterable[Mapping[str, float]], metrics: Iterable[str]
) -> dict[str, float]:
    """Each metric's :func:`repetition_stats` over the runs' ``summaries`` (those that
    have it), as table columns ``<metric>_mean``, ``_std``, ``_ci95_lo``, ``_ci95_hi``."""
    runs = list(summaries)
    columns: dict[str, float] = {}
    for metric in metrics:
        values = [float(s[metric]) for s in runs if metric in s]
        if values:
            stats = repetition_stats(values)
            columns.update({f"{metric}_{k}": v for k, v in stats.items() if k != "n"})
    return columns


@dataclass(frozen=True)
class Ratio:
    """A strategy's figure over the baseline's and its interval at ``level``: the
    geometric mean of per-round ratios (``paired``) or the ratio of geometric means."""

    estimate: float
    lo: float
    hi: float
    n: int
    paired: bool
    level: float


def ratio_interval(
    baseline: Sequence[float],
    other: Sequence[float],
    paired: bool = True,
    level: float = LEVEL,
) -> Ratio | str:
    """``other`` over ``baseline`` with a t interval on the logs at ``level``.

    Paired: ``baseline[i]`` and ``other[i]`` come from round ``i``; a round where both
    are 0 is a ratio of 1 (the same figure). Unpaired: Welch's interval for the
    difference of the mean logs. Returns the reason instead when no ratio exists (a 0
    against a non-zero value, fewer than 2 values)."""
    b = np.asarray(baseline, dtype=float)
    o = np.asarray(other, dtype=float)
    if paired:
        if len(b) != len(o):
            raise ValueError(f"paired: {len(b)} baseline values against {len(o)} others")
        keep = np.isfinite(b) & np.isfinite(o)
        b, o = b[keep], o[keep]
        if np.any((b > 0) != (o > 0)) or np.any(b < 0) or np.any(o < 0):
            return "a figure is 0 (or negative) in a round where the other is not"
        ratios = np.ones(len(b))
        positive = b > 0
        ratios[positive] = o[positive] / b[positive]
        logs = np.log(ratios)
        n = len(logs)
        if n < 2:
            return f"{n} round(s): an interval needs 2"
        mean = float(logs.mean())
        sd = float(logs.std(ddof=1))
        half = _t(level, n - 1) * sd / math.sqrt(n) if sd > 0 else 0.0
        return Ratio(math.exp(mean), math.exp(mean - half), math.exp(mean + half), n, True, level)
    b, o = b[np.isfinite(b)], o[np.isfinite(o)]
    if len(b) < 2 or len(o) < 2:
        return f"{min(len(b), len(o))} value(s) on one side: an interval needs 2"
    if np.all(b == 0) and np.all(o == 0):
        return Ratio(1.0, 1.0, 1.0, min(len(b), len(o)), False, level)
    if np.any(b <= 0) or np.any(o <= 0):
        return "a figure is 0 (or negative): no ratio"
    lb, lo_ = np.log(b), np.log(o)
    vb, vo = lb.var(ddof=1) / len(lb), lo_.var(ddof=1) / len(lo_)
    mean = float(lo_.mean() - lb.mean())
    se = math.sqrt(vb + vo)
    n = min(len(b), len(o))
    if se == 0:
        return Ratio(math.exp(mean), math.exp(mean), math.exp(mean), n, False, level)
    # Welch-Satterthwaite degrees of freedom.
    df = (vb + vo) ** 2 / (vb**2 / (len(lb) - 1) + vo**2 / (len(lo_) - 1))
    half = _t(level, df) * se
    return Ratio(math.exp(mean), math.exp(mean - half), math.exp(mean + half), n, False, level)


def _log_half_width(ratio: Ratio) -> float:
    """The interval's half-width on the log scale (the t interval's own)."""
    return (math.log(ratio.hi) - math.log(ratio.lo)) / 2


def resolvable_change(ratio: Ratio) -> float:
    """The smallest change the rounds so far resolve: the interval's half-width on the
    log scale as a share (0.092: a true change under about ±9.2% cannot be told from no
    change at these rounds)."""
    return math.exp(_log_half_width(ratio)) - 1


def rounds_to_decide(
    ratio: Ratio, power: float = DECIDE_POWER, cap: int = DECIDE_CAP
) -> int | None:
    """The paired rounds at which the interval would exclude 1 with chance ``power``, if
    the true change were the one seen and the rounds spread as those seen: the power of
    the two-sided t test on the log-ratios (noncentral t), at the interval's own level
    (under sequential looks the level of the look schedule the rounds had; a longer
    schedule's is a little stricter). None when no change is seen or the spread is 0, and
    when more than ``cap`` rounds would be needed (the change seen is within the noise).
    Checked by simulation in ``tests/test_stats.py``."""
    from scipy import stats

    effect = abs(math.log(ratio.estimate))
    half = _log_half_width(ratio)
    if effect == 0 or half == 0 or ratio.n < 2:
        return None
    sd = half * math.sqrt(ratio.n) / _t(ratio.level, ratio.n - 1)
    if _power(stats, effect, sd, cap, ratio.level) < power:  # within the noise: no scan
        return None
    for rounds in range(2, cap + 1):  # the power grows with the rounds: the first that reaches it
        if _power(stats, effect, sd, rounds, ratio.level) >= power:
            return rounds
    return None


def _power(stats: object, effect: float, sd: float, rounds: int, level: float) -> float:
    """Chance that a t interval at ``level`` on ``rounds`` normal log-ratios of mean
    ``effect`` and spread ``sd`` excludes 0."""
    df = rounds - 1
    crit = _t(level, df)
    nc = effect * math.sqrt(rounds) / sd
    nct = stats.nct  # type: ignore[attr-defined]
    found = float(nct.sf(crit, df, nc) + nct.cdf(-crit, df, nc))
    if math.isfinite(found):
        return found
    # scipy's noncentral t gives NaN far in its tail: the normal approximation there.
    norm = stats.norm  # type: ignore[attr-defined]
    return float(norm.sf(crit - nc) + norm.cdf(-crit - nc))


class Outcome(StrEnum):
    FASTER = "faster"
    SLOWER = "slower"
    EQUIVALENT = "equivalent"
    UNCLEAR = "no clear difference"
    UNDECIDED = "undecided"
    NO_RATIO = "no ratio"


DECIDED: Final[frozenset[Outcome]] = frozenset({Outcome.FASTER, Outcome.SLOWER, Outcome.EQUIVALENT})


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


@dataclass(frozen=True)
class Verdict:
    """One strategy against the baseline on one figure (:func:`verdict`)."""

    outcome: Outcome
    direction: str
    margin: float
    n: int
    ratio: Ratio | None = None
    #: Why there is no ratio (``outcome`` NO_RATIO), or what decided without one (one side
    #: 0 in every round, the other not).
    reason: str = ""

    @property
    def decided(self) -> bool:
        return self.outcome in DECIDED

    def change(self, r: float) -> float:
        """The figure's change at ratio ``r``, signed: + in the good direction."""
        return (1 - r) if self.direction == LOWER else (r - 1)

    @property
    def change_interval(self) -> tuple[float, float, float]:
        """(estimate, lo, hi) of the signed change (+ faster), lo <= hi."""
        assert self.ratio is not None
        ends = sorted((self.change(self.ratio.lo), self.change(self.ratio.hi)))
        return self.change(self.ratio.estimate), ends[0], ends[1]

    def text(self, words: tuple[str, str] = ("faster", "slower")) -> str:
        """The verdict in words; ``words`` name the good and the bad direction (a count's
        "fewer" and "more", say; "faster" and "slower" by default)."""
        good, bad = words
        if self.ratio is None:
            if self.outcome in (Outcome.FASTER, Outcome.SLOWER):
                word = good if self.outcome is Outcome.FASTER else bad
                return f"{word} ({self.reason})"
            return f"{Outcome.NO_RATIO.value} ({self.reason})"
        est, lo, hi = self.change_interval
        if self.outcome is Outcome.FASTER:
            return f"{_pct(est)} {good} [{_pct(lo)}, {_pct(hi)}]"
        if self.outcome is Outcome.SLOWER:
            return f"{_pct(-est)} {bad} [{_pct(-hi)}, {_pct(-lo)}]"
        signed = f"[{lo * 100:+.1f}%, {hi * 100:+.1f}%]"
        if self.outcome is Outcome.EQUIVALENT:
            return f"equivalent within ±{self.margin * 100:g}% {signed}"
        if self.outcome is Outcome.UNDECIDED:
            return f"undecided after {self.n} rounds {signed}"
        return f"no clear difference ({self.n} rounds) {signed}"


def verdict(
    baseline: Sequence[float],
    other: Sequence[float],
    direction: str,
    *,
    paired: bool = True,
    margin: float = DEFAULT_MARGIN,
    looks: tuple[int, int] | None = None,
    exhausted: bool = False,
) -> Verdict:
    """The verdict on ``other`` against ``baseline`` for a figure whose good
    ``direction`` is LOWER or HIGHER (module docstring).

    ``looks``: ``(first, last)`` when the rounds were added until the verdict was decided,
    looking after every round from ``first`` to ``last``: the interval then has the
    per-look level of :func:`sequential_alpha`. ``exhausted``: no more rounds will come
    (an open verdict reads "undecided after n rounds")."""
    if direction not in (LOWER, HIGHER):
        raise ValueError(f"direction: {direction!r}; allowed: {LOWER!r}, {HIGHER!r}")
    if not 0 <= margin < 1:
        raise ValueError(f"margin: {margin!r}; allowed: a share in [0, 1)")
    level = LEVEL if looks is None else 1 - sequential_alpha(*looks)
    ratio = ratio_interval(baseline, other, paired=paired, level=level)
    n = len(baseline) if paired else min(len(baseline), len(other))
    if isinstance(ratio, str):
        zero = _zero_against_positive(baseline, other)
        if zero is not None:  # 0 in every round against a positive figure: exact
            lower = zero == "other"
            good = lower == (direction == LOWER)
            outcome = Outcome.FASTER if good else Outcome.SLOWER
            who = "0 in every round, the baseline not" if lower else "the baseline 0 in every round"
            return Verdict(outcome, direction, margin, n, reason=who)
        return Verdict(Outcome.NO_RATIO, direction, margin, n, reason=ratio)
    if ratio.lo >= 1 - margin and ratio.hi <= 1 + margin:
        # Inside the margin, even where it excludes no change: a change smaller than the
        # margin is called equivalent, not faster (Criterion's noise threshold).
        outcome = Outcome.EQUIVALENT
    elif ratio.lo > 1 or ratio.hi < 1:
        good = (ratio.hi < 1) == (direction == LOWER)
        outcome = Outcome.FASTER if good else Outcome.SLOWER
    else:
        outcome = Outcome.UNDECIDED if exhausted and looks is not None else Outcome.UNCLEAR
    return Verdict(outcome, direction, margin, ratio.n, ratio)


def _zero_against_positive(baseline: Sequence[float], other: Sequence[float]) -> str | None:
    """Which side is 0 in every value while the other is positive in every value
    ("other", "baseline"), with at least 2 values each; else None."""
    b = np.asarray(baseline, dtype=float)
    o = np.asarray(other, dtype=float)
    if len(b) < 2 or len(o) < 2:
        return None
    if np.all(o == 0) and np.all(b > 0):
        return "other"
    if np.all(b == 0) and np.all(o > 0):
        return "baseline"
    return None


def look_schedule(min_rounds: int, max_rounds: int) -> tuple[int, int] | None:
    """The rounds after which a verdict may stop a group of ``min_rounds`` to
    ``max_rounds`` rounds: every round from ``max(2, min_rounds)`` (an interval needs 2) to
    ``max_rounds``; None when that is one look only (a fixed number of rounds)."""
    first = max(2, min_rounds)
    return (first, max_rounds) if max_rounds > first else None


@lru_cache(maxsize=64)
def sequential_alpha(first: int, last: int, alpha: float = 1 - LEVEL) -> float:
    """The per-look two-sided error level when a t interval on ``n`` rounds is looked at
    after every round ``n = first .. last`` and the rounds stop at the first look that
    decides: the level at which the chance that *any* look's interval misses the truth is
    ``alpha``. Found by simulating that procedure on normal data (seeded): the
    ``alpha``-quantile of each path's smallest two-sided p-value over its looks.
    ``first == last`` is one look: ``alpha`` itself."""
    if not 2 <= first <= last:
        raise ValueError(f"looks: first {first}, last {last}; allowed: 2 <= first <= last")
    if first == last:
        return alpha
    from scipy import stats

    rng = np.random.default_rng(20131)
    x = rng.standard_normal((_SEQUENTIAL_PATHS, last))
    n = np.arange(1, last + 1, dtype=float)
    csum, csq = np.cumsum(x, axis=1), np.cumsum(x * x, axis=1)
    mean = csum / n
    var = (csq - n * mean**2) / np.maximum(n - 1, 1)
    looks = slice(first - 1, last)
    t = np.abs(mean[:, looks]) / np.sqrt(var[:, looks] / n[looks])
    p = 2 * stats.t.sf(t, n[looks] - 1)
    return float(np.quantile(p.min(axis=1), alpha))
