"""The statistics module holds what it promises: simulated experiments with a known true
ratio, noise as measured on this machine (``balancebench.experiment.stats_coverage``: log-normal,
log sd 0.07, a 3% position effect for the first run of a rotated round), and the
verdicts' error rates. ``make bench-costs`` prints the same rates.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from balancebench.core.stats import (
    DECIDE_POWER,
    HIGHER,
    LEVEL,
    LOWER,
    Outcome,
    Ratio,
    _t,
    mean_interval,
    ratio_interval,
    repetition_stats,
    resolvable_change,
    rounds_to_decide,
    sequential_alpha,
    verdict,
)
from balancebench.experiment.stats_coverage import (
    bootstrap_coverage,
    false_difference,
    false_equivalence,
    ratio_coverage,
    sequential_coverage,
)

EXPERIMENTS = 2000


@pytest.mark.parametrize("rounds", [5, 10])
def test_the_paired_ratio_interval_covers_the_true_ratio_95_percent_of_the_time(rounds):
    # Given 2,000 experiments with a known true ratio and this machine's noise, the 95%
    # interval holds the truth in 93-97% of them.
    assert 0.93 <= ratio_coverage(rounds, EXPERIMENTS, seed=43).share <= 0.97


@pytest.mark.parametrize("rounds", [5, 10])
def test_the_equivalence_verdict_is_wrong_at_most_5_percent_of_the_time(rounds):
    # A true change just outside the ±3% margin is rarely called equivalent, with this
    # machine's noise and with a quieter one (0.02) where equivalence can be shown ...
    for sd in (0.07, 0.02):
        assert false_equivalence(rounds, EXPERIMENTS, seed=44, sd=sd).share <= 0.05
    # ... and no true difference is rarely called faster or slower.
    assert false_difference(rounds, EXPERIMENTS, seed=44).share <= 0.05


def test_the_old_method_did_not_cover_what_it_claimed():
    # The method these verdicts replace: a percentile bootstrap of the mean over 3
    # repetitions, which is [min, max] of three numbers: it covers the true mean about
    # 75% of the time, not 95% (the measurement). The t interval holds 95%.
    boot, student = bootstrap_coverage(EXPERIMENTS, seed=45)
    assert boot.share < 0.8
    assert 0.93 <= student.share <= 0.97


def test_adding_rounds_until_decided_keeps_its_error_at_5_percent():
    # Rounds are added one at a time from 5 to 20 and stop at the first decided verdict:
    # a difference that is not there is found at most 5% of the time (at a 95% level per
    # look it was found 12-25% of the time: the stats module's docstring).
    assert false_difference(0, EXPERIMENTS // 2, seed=46, looks=(5, 20)).share <= 0.05
    # and the interval it ends with holds the truth at least 93% of the time.
    assert sequential_coverage(EXPERIMENTS // 2, seed=46, looks=(5, 20)).share >= 0.93


def test_sequential_alpha_is_stricter_the_more_looks_and_alpha_for_one():
    assert sequential_alpha(5, 5) == pytest.approx(0.05)
    few, many = sequential_alpha(5, 8), sequential_alpha(5, 20)
    assert many < few < 0.05
    # Pocock's constant for 4 equally spaced looks is 0.0182; 16 looks 5..20 about 0.011
    # (computed with the multivariate normal): the simulation agrees within its error.
    assert 0.008 <= many <= 0.013
    with pytest.raises(ValueError, match="looks"):
        sequential_alpha(1, 4)


def test_verdict_words_and_their_numbers():
    base = [1.0, 1.1, 0.9, 1.0, 1.05]
    faster = verdict(base, [0.8 * b for b in base], LOWER)
    assert faster.outcome is Outcome.FASTER
    assert faster.text() == "20.0% faster [20.0%, 20.0%]"
    # Higher is better: a lower capacity is slower, by the figure's own change.
    slower = verdict(base, [0.9 * b * (1 + 0.01 * i) for i, b in enumerate(base)], HIGHER)
    assert slower.outcome is Outcome.SLOWER
    assert slower.text().endswith("]") and "slower" in slower.text()
    est, lo, hi = slower.change_interval
    assert lo <= est <= hi < 0
    same = verdict(base, [b * (1 + 0.001 * (-1) ** i) for i, b in enumerate(base)], LOWER)
    assert same.outcome is Outcome.EQUIVALENT
    assert same.text().startswith("equivalent within ±3% [")
    noisy = verdict(base, [1.0, 1.3, 0.8, 1.1, 1.04], HIGHER)
    assert noisy.outcome is Outcome.UNCLEAR
    assert noisy.text().startswith("no clear difference (5 rounds) [")
    budget = verdict(base, [1.0, 1.3, 0.8, 1.1, 1.04], HIGHER, looks=(5, 10), exhausted=True)
    assert budget.text().startswith("undecided after 5 rounds [")
    # Both 0 in every round (no migration either way) is the same figure.
    assert verdict([0.0] * 3, [0.0] * 3, LOWER).outcome is Outcome.EQUIVALENT
    zero = verdict([0.0, 1.0, 0.0], [0.0, 0.0, 0.0], LOWER)
    assert zero.outcome is Outcome.NO_RATIO and "0" in zero.text()
    # 0 in every round against a positive figure in every round is exact, either way.
    none = verdict([0.5, 0.6, 0.4], [0.0, 0.0, 0.0], LOWER)
    assert none.outcome is Outcome.FASTER
    assert none.text() == "faster (0 in every round, the baseline not)"
    assert verdict([0.0] * 3, [1.0] * 3, LOWER).outcome is Outcome.SLOWER
    assert verdict([0.0] * 3, [1.0] * 3, HIGHER).text(("more", "fewer")) == (
        "more (the baseline 0 in every round)"
    )
    with pytest.raises(ValueError, match="direction"):
        verdict(base, base, "sideways")
    with pytest.raises(ValueError, match="paired"):
        verdict(base, base[:3], LOWER)


def test_unpaired_ratio_is_welch_on_the_logs():
    rng = np.random.default_rng(47)
    covered = 0
    for _ in range(EXPERIMENTS):
        a = np.exp(rng.normal(0.0, 0.05, 5))
        b = 1.2 * np.exp(rng.normal(0.0, 0.15, 8))
        r = ratio_interval(a, b, paired=False)
        covered += r.lo <= 1.2 <= r.hi
    assert 0.93 <= covered / EXPERIMENTS <= 0.97
    assert ratio_interval([1.0], [2.0, 3.0], paired=False).startswith("1 value")


def test_mean_interval_is_student_t_and_says_when_there_is_none():
    values = [1.0, 1.2, 1.1, 1.3, 0.9]
    got = repetition_stats(values)
    assert got["mean"] == pytest.approx(1.1)
    half = 2.776445 * np.std(values, ddof=1) / math.sqrt(5)  # t(0.975, 4)
    assert (got["ci95_lo"], got["ci95_hi"]) == pytest.approx((1.1 - half, 1.1 + half))
    one = mean_interval([2.0])
    assert one.mean == 2.0 and math.isnan(one.lo) and math.isnan(one.hi)
    flat = mean_interval([2.0, 2.0, 2.0])
    assert (flat.lo, flat.hi, flat.std) == (2.0, 2.0, 0.0)


def test_a_change_inside_the_margin_is_equivalent_even_where_it_is_exact():
    # A deterministic 0.5% change excludes no-change, yet lies within ±3%: equivalent
    # (a change below the margin is not called faster or slower).
    base = [1.0, 1.1, 0.9, 1.0, 1.05]
    same = verdict(base, [0.995 * b for b in base], LOWER)
    assert same.outcome is Outcome.EQUIVALENT
    assert same.text() == "equivalent within ±3% [+0.5%, +0.5%]"
    assert verdict(base, [0.995 * b for b in base], LOWER, margin=0.0).text() == (
        "0.5% faster [0.5%, 0.5%]"
    )


@pytest.mark.parametrize("true_change, spread", [(1.05, 0.08), (0.93, 0.12), (1.02, 0.03)])
def test_the_rounds_estimated_to_decide_do_decide_that_often_in_simulation(true_change, spread):
    """An undecided verdict says how many rounds would decide it. Given the true change and
    the spread (a 6-round interval of exactly that spread), the rounds estimated decide
    (interval excludes 1) about DECIDE_POWER of the time in simulation, and half as many
    rounds clearly less often."""
    n0 = 6
    half = _t(LEVEL, n0 - 1) * spread / math.sqrt(n0)
    mu = math.log(true_change)
    seen = Ratio(true_change, math.exp(mu - half), math.exp(mu + half), n0, True, LEVEL)
    rounds = rounds_to_decide(seen)
    assert rounds is not None and rounds > n0

    rng = np.random.default_rng(7)

    def decided_share(m: int) -> float:
        logs = rng.normal(mu, spread, size=(4000, m))
        t = logs.mean(axis=1) / (logs.std(axis=1, ddof=1) / math.sqrt(m))
        return float(np.mean(np.abs(t) > _t(LEVEL, m - 1)))

    assert DECIDE_POWER - 0.04 <= decided_share(rounds) <= DECIDE_POWER + 0.04
    assert decided_share(max(2, rounds // 2)) < DECIDE_POWER - 0.15
    # What those rounds resolve now: the interval's half-width as a share.
    assert resolvable_change(seen) == pytest.approx(math.exp(half) - 1)


def test_no_rounds_are_promised_for_a_change_within_the_noise():
    assert rounds_to_decide(Ratio(1.0, 0.9, 1.1, 6, True, LEVEL)) is None
    assert rounds_to_decide(Ratio(1.0005, 0.9, 1.1, 6, True, LEVEL)) is None  # > the cap


def test_the_tutorials_per_look_level_is_the_default_runs():
    """The first-comparison tutorial says each look's interval is a stricter level: the
    one the default run's look schedule gives (re-checked here, not typed)."""
    import re
    from pathlib import Path

    from balancebench.core.stats import look_schedule
    from balancebench.experiment.params import ExperimentSpec

    text = (Path(__file__).resolve().parents[1] / "docs/tutorials/first-comparison.md").read_text()
    said = re.search(
        r"after round (\d+) and (\d+), so each\s+look's interval is a stricter "
        r"([\d.]+)%",
        text,
    )
    assert said is not None
    p = ExperimentSpec.checked({})
    looks = look_schedule(p["min_rounds"], p["max_rounds"])
    assert looks == (int(said[1]), int(said[2]))
    assert float(said[3]) == round((1 - sequential_alpha(*looks)) * 100, 1)
