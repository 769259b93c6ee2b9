"""Whether the verdicts hold what they promise: simulated experiments with a known truth.

Each simulated experiment is a cell group's rounds as this machine gives them: per round
every strategy's figure is the truth times log-normal noise (:data:`RUN_LOG_SD`, the
spread measured on ``make run``'s cell), and the first run of a round carries a position
effect (:data:`POSITION_EFFECT`), rotated as ``rounds.rotated_rounds`` rotates it. The
functions count how often :func:`balancebench.core.stats.verdict` and its intervals say what is
true. ``tests/test_stats.py`` asserts the rates; ``benchmarks/engine_costs.py --sections
coverage`` (part of ``make bench-costs``) prints them.

Measured 2026-11-28 on the default cell (6 rotated rounds of hash, qmmp and mnrt, one
application, ``benchmarks/engine_costs.py --sections noise``): a run's node service and
capacity vary round to round with a coefficient of variation of 4-9% (a log standard
deviation of about 0.07); the first run of a round was up to about 3% slower.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np

from balancebench.core.stats import LOWER, Outcome, mean_interval, ratio_interval, verdict

#: Per-run log standard deviation of a figure (the module docstring).
RUN_LOG_SD: Final[float] = 0.07
#: The first run of a round is this much slower (log).
POSITION_EFFECT: Final[float] = 0.03
#: Strategies in a simulated group: the baseline is at position 0 of the rotation, the
#: compared strategy at position 1.
STRATEGIES: Final[int] = 3


def simulate_rounds(
    rng: np.random.Generator,
    true_ratio: float,
    rounds: int,
    sd: float = RUN_LOG_SD,
    position: float = POSITION_EFFECT,
) -> tuple[np.ndarray, np.ndarray]:
    """One experiment's per-round figures (a time) of the baseline and the compared
    strategy, whose true ratio to the baseline is ``true_ratio``."""
    base = np.empty(rounds)
    other = np.empty(rounds)
    for r in range(rounds):
        start = r % STRATEGIES  # round r starts with strategy r mod k
        noise = rng.normal(0.0, sd, 2)
        base[r] = math.exp(noise[0] + (position if start == 0 else 0.0))
        other[r] = true_ratio * math.exp(noise[1] + (position if start == 1 else 0.0))
    return base, other


@dataclass(frozen=True)
class Rate:
    """How often something happened in ``of`` simulated experiments."""

    hits: int
    of: int

    @property
    def share(self) -> float:
        return self.hits / self.of


def ratio_coverage(rounds: int, experiments: int, seed: int, true_ratio: float = 0.9) -> Rate:
    """How often the paired ratio's 95% interval holds the true ratio."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(experiments):
        base, other = simulate_rounds(rng, true_ratio, rounds)
        r = ratio_interval(base, other)
        hits += r.lo <= true_ratio <= r.hi
    return Rate(hits, experiments)


def false_equivalence(
    rounds: int, experiments: int, seed: int, change: float = 1.031, sd: float = RUN_LOG_SD
) -> Rate:
    """How often a true change just outside the ±3% margin is called equivalent."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(experiments):
        base, other = simulate_rounds(rng, change, rounds, sd=sd)
        hits += verdict(base, other, LOWER).outcome is Outcome.EQUIVALENT
    return Rate(hits, experiments)


def false_difference(
    rounds: int, experiments: int, seed: int, looks: tuple[int, int] | None = None
) -> Rate:
    """How often no true difference is called faster or slower: after ``rounds`` rounds,
    or (``looks``) with rounds added one at a time from ``looks[0]`` to ``looks[1]``,
    stopping at the first decided verdict (the rounds' stopping rule)."""
    return _no_difference(rounds, experiments, seed, looks)[0]


def sequential_coverage(experiments: int, seed: int, looks: tuple[int, int]) -> Rate:
    """How often the interval the stopping rule ends with holds the true ratio (1)."""
    return _no_difference(0, experiments, seed, looks)[1]


def _no_difference(
    rounds: int, experiments: int, seed: int, looks: tuple[int, int] | None
) -> tuple[Rate, Rate]:
    rng = np.random.default_rng(seed)
    named = covered = 0
    for _ in range(experiments):
        last = looks[1] if looks else rounds
        base, other = simulate_rounds(rng, 1.0, last)
        for n in range(looks[0] if looks else rounds, last + 1):
            v = verdict(base[:n], other[:n], LOWER, looks=looks, exhausted=n == last)
            if v.decided:
                break
        named += v.outcome in (Outcome.FASTER, Outcome.SLOWER)
        covered += v.ratio is not None and v.ratio.lo <= 1.0 <= v.ratio.hi
    return Rate(named, experiments), Rate(covered, experiments)


def bootstrap_coverage(experiments: int, seed: int, n: int = 3) -> tuple[Rate, Rate]:
    """The method the verdicts replaced against Student's t: how often a percentile
    bootstrap of the mean over ``n`` values holds the true mean, and how often the t
    interval does."""
    rng = np.random.default_rng(seed)
    boot = student = 0
    truth = math.exp(RUN_LOG_SD**2 / 2)  # the log-normal's mean
    for _ in range(experiments):
        values = np.exp(rng.normal(0.0, RUN_LOG_SD, n))
        means = rng.choice(values, (500, n)).mean(axis=1)
        lo, hi = np.percentile(means, [2.5, 97.5])
        boot += lo <= truth <= hi
        t = mean_interval(values)
        student += t.lo <= truth <= t.hi
    return Rate(boot, experiments), Rate(student, experiments)


def coverage_lines(experiments: int = 2000) -> list[str]:
    """The rates the tests assert, as printed lines (``make bench-costs``)."""
    lines = []
    for n in (5, 10):
        cover = ratio_coverage(n, experiments, 43)
        lines.append(
            f"paired ratio's 95% interval holds the true ratio, n = {n}: {cover.share:.1%} "
            f"of {cover.of} (target 93-97%)"
        )
    for n in (5, 10):
        eq = false_equivalence(n, experiments, 44)
        quiet = false_equivalence(n, experiments, 44, sd=0.02)
        diff = false_difference(n, experiments, 44)
        lines.append(
            f"n = {n}: a 3.1% change called equivalent {eq.share:.1%} (noise sd 0.07), "
            f"{quiet.share:.1%} (sd 0.02); no change called faster or slower {diff.share:.1%} "
            "(target <= 5%)"
        )
    seq, held = _no_difference(0, experiments // 2, 46, (5, 20))
    lines.append(
        f"rounds added from 5 to 20 until decided: no change called faster or slower "
        f"{seq.share:.1%} of {seq.of} (at a 95% level per look it would be 12-25%); the "
        f"final interval holds the truth {held.share:.1%}"
    )
    boot, student = bootstrap_coverage(experiments, 45)
    lines.append(
        f"the mean over 3 values: the old percentile bootstrap holds the true mean "
        f"{boot.share:.1%}, Student's t {student.share:.1%}"
    )
    return lines
