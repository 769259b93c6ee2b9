"""The README's figure readings, recomputed from the committed tables.

    uv run python benchmarks/readme_readings.py           # check (make test runs it)
    uv run python benchmarks/readme_readings.py --write   # rewrite the blocks

Every figure reading of the README is a block between ``<!-- reading: NAME -->`` and
``<!-- /reading -->`` whose text this script writes from ``docs/figures/*.csv`` and
``docs/data/*.csv`` alone: where the numbers come from, how many repetitions they are,
the table (mean and bootstrap 95% CI), the paper's claims judged one by one, and what the
figure is made of. A claim is judged only where the CIs separate
(:func:`balancebench.stats.intervals_apart`); overlapping CIs are "no clear difference".
The check fails, naming the block, when the README's text differs from what the tables
give (a number edited by hand, or a table re-made without its reading).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from balancebench.plotting import strategy_order

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FIGURES = ROOT / "docs" / "figures"
TIMINGS = ROOT / "docs" / "data" / "paper_figures.csv"
BLOCK = re.compile(r"(<!-- reading: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /reading -->)", re.S)

LOWER, HIGHER = "lower", "higher"


def intervals_apart(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether two CIs do not overlap (the readings' rule until they read rounds)."""
    return a[1] < b[0] or b[1] < a[0]


@dataclass(frozen=True)
class Metric:
    """A plotted figure: its column, what it is in words, its unit scale and direction."""

    column: str
    words: str
    scale: float = 1.0
    better: str = LOWER


def fmt(value: float) -> str:
    """A number as the README prints it (3 significant digits, thousands grouped)."""
    a = abs(value)
    if a == 0:
        return "0"
    if float(value).is_integer():  # counts: nodes, tuples
        return f"{value:,.0f}"
    if a >= 1000:
        return f"{value:,.0f}"
    if a >= 100:
        return f"{value:.0f}"
    if a >= 10:
        return f"{value:.1f}"
    if a >= 1:
        return f"{value:.2f}"
    if a >= 0.01:
        return f"{value:.3f}"
    return f"{value:.2g}"


def _interval(mean: float, lo: float, hi: float) -> tuple[float, float, float]:
    """(mean, lo, hi) with an end within rounding of the mean set to it: the bootstrap
    of identical values gives the value back up to float noise, which must not make two
    equal samples "apart"."""
    same = lambda a: bool(np.isclose(a, mean, rtol=1e-9, atol=0))  # noqa: E731
    return float(mean), float(mean if same(lo) else lo), float(mean if same(hi) else hi)


class Series:
    """One metric of one figure table: (strategy, x) -> mean and CI (scaled)."""

    def __init__(self, table: pd.DataFrame, x: str, metric: Metric, mean: str = "_mean") -> None:
        lo, hi = "_ci95_lo", "_ci95_hi"
        self.x, self.metric = x, metric
        c = metric.column
        self.rows = {
            (r["strategy"], float(r[x])): _interval(
                r[c + mean] / metric.scale,
                r.get(c + lo, r[c + mean]) / metric.scale,
                r.get(c + hi, r[c + mean]) / metric.scale,
            )
            for _, r in table.iterrows()
            if pd.notna(r.get(c + mean))
        }
        if not self.rows:
            raise KeyError(f"{c}{mean}")
        self.xs = sorted({x for _, x in self.rows})
        self.strategies = strategy_order(list(dict.fromkeys(s for s, _ in self.rows)))

    def ci(self, strategy: str, x: float) -> tuple[float, float]:
        _, lo, hi = self.rows[(strategy, x)]
        return lo, hi

    def mean(self, strategy: str, x: float) -> float:
        return self.rows[(strategy, x)][0]

    def compare(self, p: tuple[str, float], q: tuple[str, float]) -> str:
        """Whether point ``p`` (line, x) is better than point ``q``: "yes", "no" (the
        opposite, apart) or "unclear" (CIs overlap, or the means print the same)."""
        cp, cq = self.rows[p][1:], self.rows[q][1:]
        if not intervals_apart(cp, cq) or self.printed_equal(p, q):
            return "unclear"
        return "yes" if (cp[1] < cq[0]) == (self.metric.better == LOWER) else "no"

    def better(self, a: str, b: str, x: float) -> str:
        """Whether line ``a`` is better than line ``b`` at ``x`` (:meth:`compare`)."""
        return self.compare((a, x), (b, x))

    def better_x(self, line: str, a: float, b: float) -> str:
        """Whether ``line`` is better at x = ``a`` than at x = ``b`` (:meth:`compare`)."""
        return self.compare((line, a), (line, b))

    def printed_equal(self, p: tuple[str, float], q: tuple[str, float]) -> bool:
        """Whether two means print the same: a difference the reader cannot see in the
        table is never named."""
        return fmt(self.rows[p][0]) == fmt(self.rows[q][0])

    def cell(self, strategy: str, x: float) -> str:
        mean, lo, hi = self.rows[(strategy, x)]
        if fmt(lo) == fmt(hi):  # no spread at the printed precision
            return fmt(mean)
        return f"{fmt(mean)} [{fmt(lo)}, {fmt(hi)}]"


#: The x axes' symbols in the readings.
AXIS = {"zipf_s": "z", "tolerance": "tolerance"}


def label(line: str) -> str:
    """A table row's name: a strategy in code font, a derived line (``p = 4``) as is."""
    return line if " " in line else f"`{line}`"


def x_text(x: str, value: float) -> str:
    return f"{AXIS.get(x, x)} = {value:g}"


def outcome_text(x: str, per_x: dict[float, str], no: str = "the opposite at") -> str:
    """Per-x outcomes ("yes" / "no" / "unclear") as one verdict; ``no`` says what "no"
    means."""
    groups = {k: [v for v, o in per_x.items() if o == k] for k in ("yes", "unclear", "no")}
    if len(groups["yes"]) == len(per_x):
        return "**reproduced** (apart at every point)"
    if len(groups["unclear"]) == len(per_x):
        return "**no clear difference** (not apart at any point)"
    label = {"yes": "reproduced at", "unclear": "no clear difference at", "no": no}
    parts = [
        f"{label[key]} {AXIS.get(x, x)} = {', '.join(f'{v:g}' for v in groups[key])}"
        for key in ("yes", "unclear", "no")
        if groups[key]
    ]
    verdict = "**partly reproduced**" if groups["yes"] else "**not reproduced**"
    return f"{verdict} ({'; '.join(parts)})"


# ---- claims: each returns its verdict in words from a Series ----------------------------

Claim = tuple[str, Callable[[Series], str]]


def _among(strategy: str, others: Sequence[str], at: Sequence[float] | None, best: bool):
    """``strategy`` better (``best``) or worse than each of ``others`` at each x."""

    def judge(s: Series) -> str:
        per_x, beaten_by = {}, {}
        for x in at or s.xs:
            there = [o for o in others if (o, x) in s.rows]
            outcomes = {
                o: s.better(strategy, o, x) if best else s.better(o, strategy, x) for o in there
            }
            losers = [o for o, v in outcomes.items() if v == "no"]
            per_x[x] = (
                "yes"
                if all(v == "yes" for v in outcomes.values())
                else "no"
                if losers
                else "unclear"
            )
            beaten_by[x] = losers
        text = outcome_text(s.x, per_x, "beaten at")
        against = [
            f"{', '.join(f'`{o}`' for o in beaten_by[x])} apart "
            f"{'better' if best else 'worse'} at {x_text(s.x, x)}"
            for x in per_x
            if beaten_by[x]
        ]
        return text + (f"; {'; '.join(against)}" if against else "")

    return judge


def best_among(strategy: str, others: Sequence[str], at: Sequence[float] | None = None) -> Callable:
    """``strategy`` better than every one of ``others`` (apart), at each x of ``at``."""
    return _among(strategy, others, at, best=True)


def worst_among(
    strategy: str, others: Sequence[str], at: Sequence[float] | None = None
) -> Callable:
    """``strategy`` worse than every one of ``others`` (apart), at each x of ``at``."""
    return _among(strategy, others, at, best=False)


def better_than(a: str, b: str) -> Callable:
    def judge(s: Series) -> str:
        return outcome_text(s.x, {x: s.better(a, b, x) for x in s.xs if (a, x) in s.rows})

    return judge


def _change(strategy: str, start: float | None, end: float | None, up: bool) -> Callable:
    """The metric of ``strategy`` higher (``up``) or lower at ``end`` than at ``start``,
    CIs apart (the first and last x by default)."""

    def judge(s: Series) -> str:
        x0, x1 = start if start is not None else s.xs[0], end if end is not None else s.xs[-1]
        a, b = s.ci(strategy, x0), s.ci(strategy, x1)
        span = f"{fmt(s.mean(strategy, x0))} at {x_text(s.x, x0)}, "
        span += f"{fmt(s.mean(strategy, x1))} at {x1:g}"
        if a[0] == a[1] and b[0] == b[1] and s.printed_equal((strategy, x0), (strategy, x1)):
            return f"**not reproduced** (the same: {span})"
        if not intervals_apart(a, b) or s.printed_equal((strategy, x0), (strategy, x1)):
            return f"**no clear difference** ({span})"
        rose = b[0] > a[1]
        return f"**reproduced** ({span})" if rose == up else f"**the opposite** ({span})"

    return judge


def grows(strategy: str, start: float | None = None, end: float | None = None) -> Callable:
    """Higher at ``end`` than at ``start`` (CIs apart)."""
    return _change(strategy, start, end, up=True)


def falls(strategy: str, start: float | None = None, end: float | None = None) -> Callable:
    """Higher at ``start`` than at ``end`` (CIs apart)."""
    return _change(strategy, start, end, up=False)


def not_worse(a: str, b: str) -> Callable:
    """``a`` is not worse than ``b`` at any x (apart the wrong way nowhere)."""

    def judge(s: Series) -> str:
        per_x = {x: s.better(b, a, x) for x in s.xs if (a, x) in s.rows}
        worse = [x for x, o in per_x.items() if o == "yes"]
        if worse:
            where = ", ".join(f"{x:g}" for x in worse)
            return f"**not reproduced** (worse, apart, at {AXIS.get(s.x, s.x)} = {where})"
        better = [x for x, o in per_x.items() if o == "no"]
        if better:
            where = ", ".join(f"{x:g}" for x in better)
            axis = AXIS.get(s.x, s.x)
            return (
                f"**reproduced** (better, apart, at {axis} = {where}; no clear difference "
                "elsewhere)"
            )
        return "**reproduced** (no clear difference at any point)"

    return judge


def flat(strategy: str) -> Callable:
    """Every x's CI shares a point with every other's (no two apart)."""

    def judge(s: Series) -> str:
        cis = [s.ci(strategy, x) for x in s.xs]
        means = [s.mean(strategy, x) for x in s.xs]
        span = f"{fmt(min(means))}-{fmt(max(means))}"
        if fmt(min(means)) == fmt(max(means)):  # equal as printed
            return f"**reproduced** ({fmt(means[0])} at every {AXIS.get(s.x, s.x)})"
        if max(lo for lo, _ in cis) <= min(hi for _, hi in cis):
            if min(means) == max(means):
                return f"**reproduced** ({fmt(means[0])} at every {AXIS.get(s.x, s.x)})"
            return f"**reproduced** ({span}, no two {AXIS.get(s.x, s.x)} apart)"
        return f"**not reproduced** ({span}, the lowest and the highest apart)"

    return judge


# ---- the readings -----------------------------------------------------------------------

PAPER_COMPETITORS = ["qmmp", "mnrt", "dynamic", "bi", "bi6"]
SKEW_CLAIMS: list[Claim] = [
    (
        "MNRT faster than Dynamic, Bi and Bi6 at low skew (z = 0.4)",
        lambda s: best_among("mnrt", ["dynamic", "bi", "bi6"], [0.4])(s),
    ),
    (
        "QMMP faster than Dynamic, Bi and Bi6 at low skew (z = 0.4)",
        lambda s: best_among("qmmp", ["dynamic", "bi", "bi6"], [0.4])(s),
    ),
    ("QMMP's time grows with skew (z = 0.4 -> 1.5)", lambda s: grows("qmmp")(s)),
    ("Bi6 slows at z = 1.5 (against z = 1.2)", lambda s: grows("bi6", 1.2, 1.5)(s)),
    (
        "Bi the slowest of the paper's strategies",
        lambda s: worst_among("bi", ["qmmp", "mnrt", "dynamic", "bi6"])(s),
    ),
    ("Dynamic flat in skew", lambda s: flat("dynamic")(s)),
]
RECEIVED_CLAIMS: list[Claim] = [
    ("Dynamic flat in skew", lambda s: flat("dynamic")(s)),
    (
        "MNRT receives the fewest tuples per node (of the paper's strategies)",
        lambda s: best_among("mnrt", ["qmmp", "dynamic", "bi", "bi6"])(s),
    ),
    ("QMMP's splits add broadcast as skew grows (z = 0.4 -> 1.5)", lambda s: grows("qmmp")(s)),
    ("Bi6 worse as skew grows (z = 0.4 -> 1.5)", lambda s: grows("bi6")(s)),
    ("Bi the same at every skew", lambda s: flat("bi")(s)),
    ("Bi receives the most", lambda s: worst_among("bi", ["qmmp", "mnrt", "dynamic", "bi6"])(s)),
]


@dataclass(frozen=True)
class Reading:
    """One figure's reading: its table, the metrics shown and the claims judged."""

    table: str
    #: The x axis (a column), or None for a table of one point per strategy.
    x: str | None
    metrics: tuple[Metric, ...]
    #: (metric column, claim, judge) per claim
    claims: tuple[tuple[str, str, Callable[[Series], str]], ...]
    command: str
    components: bool = False
    #: How a metric's mean column is named: ``<metric><mean_suffix>``.
    mean_suffix: str = "_mean"
    repetitions_column: str = "repetitions_finished"
    #: Rows to read and how they are named (the ``strategy`` column), when not as stored.
    prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    #: A sentence on how the repetitions differ (the models' seeds, a dataset, ...).
    note: str = ""


def paper000(
    key: str, metrics: tuple[Metric, ...], claims, x: str = "zipf_s", components: bool = True
) -> Reading:
    return Reading(
        f"paper000-fig{key}.csv",
        x,
        metrics,
        tuple(claims),
        f"balancebench figure {key} (make paper-figures)",
        components,
        note="Every repetition runs on the sweep's one dataset (seed 42).",
    )


def model(name: str, x: str | None, metrics, claims, prepare=None, note: str = "") -> Reading:
    return Reading(
        f"{name}.csv",
        x,
        tuple(metrics),
        tuple(claims),
        f"uv run python benchmarks/paper_figures.py --only {name}",
        mean_suffix="",
        repetitions_column="repetitions",
        prepare=prepare,
        note=note,
    )


CHARGED = Metric("charged_s_total", "processing time, s (everything charged)")
RECEIVED = Metric(
    "avg_received_tuples_per_node_total", "tuples received per node (mean over nodes)"
)
READINGS: dict[str, Reading] = {
    "000-3a": paper000("3a", (CHARGED,), [(CHARGED.column, c, j) for c, j in SKEW_CLAIMS]),
    "000-3b": paper000("3b", (CHARGED,), [(CHARGED.column, c, j) for c, j in SKEW_CLAIMS]),
    "000-6a": paper000(
        "6a", (RECEIVED,), [(RECEIVED.column, c, j) for c, j in RECEIVED_CLAIMS], components=False
    ),
    "000-6b": paper000(
        "6b", (RECEIVED,), [(RECEIVED.column, c, j) for c, j in RECEIVED_CLAIMS], components=False
    ),
    "000-4-5": paper000(
        "4-5",
        (
            Metric("nodes_used_max", "nodes used at the end of loading"),
            Metric("scale_out_adjustment_s_total", "balance-adjustment time, s"),
        ),
        [
            (
                "nodes_used_max",
                "Dynamic uses the most nodes",
                worst_among("dynamic", ["qmmp", "mnrt", "bi", "bi6"]),
            ),
            (
                "nodes_used_max",
                "MNRT uses fewer nodes than Dynamic",
                better_than("mnrt", "dynamic"),
            ),
            (
                "nodes_used_max",
                "QMMP uses fewer nodes than Dynamic",
                better_than("qmmp", "dynamic"),
            ),
            ("nodes_used_max", "Bi uses fewer nodes than Dynamic", better_than("bi", "dynamic")),
            ("nodes_used_max", "Bi6 uses fewer nodes than Dynamic", better_than("bi6", "dynamic")),
            (
                "scale_out_adjustment_s_total",
                "Dynamic's adjustment the slowest of the paper's strategies",
                worst_among("dynamic", ["qmmp", "mnrt", "bi", "bi6"]),
            ),
            (
                "scale_out_adjustment_s_total",
                "QMMP adjusts faster than MNRT",
                better_than("qmmp", "mnrt"),
            ),
            (
                "scale_out_adjustment_s_total",
                "Bi scales out most easily (the fastest adjustment)",
                best_among("bi", ["qmmp", "mnrt", "dynamic"]),
            ),
        ],
        components=False,
    ),
    "000-7": paper000(
        "7",
        (Metric("plan_time_ms_mean", "plan time, ms (mean per plan)"),),
        [
            (
                "plan_time_ms_mean",
                "Readj the slowest planner at every tolerance",
                worst_among("readj", ["qmmp", "mnrt"]),
            ),
            (
                "plan_time_ms_mean",
                "Readj slower the stricter the tolerance (0.4 -> 0.02)",
                falls("readj"),
            ),
            ("plan_time_ms_mean", "QMMP faster than MNRT", better_than("qmmp", "mnrt")),
        ],
        x="tolerance",
        components=False,
    ),
    "000-8": paper000(
        "8",
        (
            Metric(
                "capacity_tuples_per_s", "capacity, M tuples/s (everything charged)", 1e6, HIGHER
            ),
            Metric("throughput_tuples_per_s", "delivered throughput, M tuples/s", 1e6, HIGHER),
            Metric("latency_p99_s", "latency p99, s"),
        ),
        [
            (
                "capacity_tuples_per_s",
                "QMMP's merges lower its capacity below MNRT's",
                better_than("mnrt", "qmmp"),
            ),
            (
                "capacity_tuples_per_s",
                "Readj's plan time lowers its capacity below MNRT's",
                better_than("mnrt", "readj"),
            ),
            (
                "capacity_tuples_per_s",
                "Readj's capacity below QMMP's",
                better_than("qmmp", "readj"),
            ),
        ],
    ),
}


def _eps_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Paper 002 Fig. 5: the adaptive strategy's rows, one line per parallelism."""
    rows = table[table["strategy"] == "adaptive"].copy()
    rows["strategy"] = [f"p = {p}" for p in rows["parallelism"]]
    return rows


def _weights_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Paper 003 Table 1: one line per (beta, BWn normalisation), alpha on x."""
    rows = table.copy()
    rows["strategy"] = [
        f"beta = {b:g}, BWn {'/ max' if n == 'max' else 'min-max'}"
        for b, n in zip(rows["beta"], rows["bw_normalisation"], strict=True)
    ]
    return rows


def _eps_best(at: float) -> Callable[[Series], str]:
    """eps = ``at`` more efficient than every other eps, per parallelism."""

    def judge(s: Series) -> str:
        verdicts = {}
        for line in s.strategies:
            outcomes = [
                s.better_x(line, at, other)
                for other in s.xs
                if other != at and (line, other) in s.rows
            ]
            verdicts[line] = (
                "yes"
                if all(o == "yes" for o in outcomes)
                else "no"
                if any(o == "no" for o in outcomes)
                else "unclear"
            )
        best = [k for k, v in verdicts.items() if v == "yes"]
        worse = [k for k, v in verdicts.items() if v == "no"]
        if len(best) == len(verdicts):
            return "**reproduced** (at every parallelism)"
        text = f"best at {', '.join(best) or 'no parallelism'}"
        if worse:
            text += f"; another eps better at {', '.join(worse)}"
        return f"**{'partly reproduced' if best else 'not reproduced'}** ({text})"

    return judge


def _point_best(line: str, x: float) -> Callable[[Series], str]:
    """The point (``line``, ``x``) better than every other point of the table, apart."""

    def judge(s: Series) -> str:
        me = (line, x)
        mine = s.rows[me]
        others = [k for k in s.rows if k != me]
        beaten = [k for k in others if s.compare(k, me) == "yes"]
        below = [k for k in others if s.compare(me, k) == "yes"]
        if len(below) == len(others):
            return f"**reproduced** ({fmt(mine[0])}, apart from every other point)"
        if beaten:
            return (
                f"**not reproduced** ({fmt(mine[0])}; {len(beaten)} of {len(others)} points "
                "apart better)"
            )
        return (
            f"**not reproduced** ({fmt(mine[0])}: better, apart, than {len(below)} of "
            f"{len(others)} points; no clear difference from the rest)"
        )

    return judge


MODEL_SEEDS = "Each repetition has its own seed (the same for every strategy)."
BACKPRESSURE_SEEDS = (
    "Service times are exponential, each repetition its own seed, on the one generated "
    "packet trace."
)
READINGS["scheduling_p8"] = model(
    "scheduling_p8",
    None,
    [
        Metric("job_runtime_s", "job runtime, s"),
        Metric("runtime_over_optimum", "runtime / brute-force optimum"),
        Metric("latency_p99_s", "latency p99, s"),
        Metric("plan_time_ms", "plan time, ms"),
    ],
    [
        (
            "job_runtime_s",
            "SWPTS shortens the job against round robin",
            better_than("swpts", "round_robin"),
        ),
        (
            "job_runtime_s",
            "ACTS shortens the job against round robin",
            better_than("acts", "round_robin"),
        ),
        (
            "job_runtime_s",
            "ACTS shortens the job against SWPTS",
            better_than("acts", "swpts"),
        ),
    ],
    note=MODEL_SEEDS,
)
READINGS["scheduling_p16"] = model(
    "scheduling_p16",
    None,
    READINGS["scheduling_p8"].metrics,
    READINGS["scheduling_p8"].claims,
    note=MODEL_SEEDS,
)
READINGS["scheduling_eps"] = model(
    "scheduling_eps",
    "eps",
    [
        Metric(
            "efficiency_share", "`adaptive` efficiency (ideal runtime / job runtime)", better=HIGHER
        )
    ],
    [("efficiency_share", "80% the most efficient switch threshold", _eps_best(0.8))],
    prepare=_eps_rows,
    note=MODEL_SEEDS,
)
for _name in ("elastic_mean_shift", "elastic_sigma_shrink"):
    READINGS[_name] = model(
        _name,
        None,
        [
            Metric("utilization_std_mean", "utilisation spread across nodes (std, mean over time)"),
            Metric("utilization_mean_mean", "utilisation, mean", better=HIGHER),
            Metric("latency_p99_s", "latency p99, s"),
        ],
        [
            (
                "utilization_std_mean",
                "BalanceLoad lowers the utilisation spread against static",
                better_than("elastic_balanceload", "elastic_static"),
            ),
            (
                "utilization_std_mean",
                "BalanceLoad lowers the utilisation spread against scaling alone",
                better_than("elastic_balanceload", "elastic_scaling"),
            ),
        ],
        note=MODEL_SEEDS,
    )
READINGS["backpressure_volume"] = model(
    "backpressure_volume",
    "total_mb",
    [
        Metric("completion_time_s", "completion time, simulated s"),
        Metric("latency_p99_s", "latency p99, simulated s"),
    ],
    [
        (
            "completion_time_s",
            "migration completes sooner than credit-based flow control",
            better_than("migration", "credit"),
        ),
        (
            "latency_p99_s",
            "migration's p99 latency below credit's",
            better_than("migration", "credit"),
        ),
    ],
    note=BACKPRESSURE_SEEDS,
)
READINGS["backpressure_alpha_beta"] = model(
    "backpressure_alpha_beta",
    "alpha",
    [Metric("completion_time_s", "completion time, simulated s (migration, 5 GB)")],
    [
        (
            "completion_time_s",
            "(alpha, beta) = (0.3, 0.5) the best weights, BWn = BW / max",
            _point_best("beta = 0.5, BWn / max", 0.3),
        ),
        (
            "completion_time_s",
            "(alpha, beta) = (0.3, 0.5) the best weights, BWn min-max",
            _point_best("beta = 0.5, BWn min-max", 0.3),
        ),
    ],
    prepare=_weights_rows,
    note=BACKPRESSURE_SEEDS,
)


def _recovery_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The recovery rules as the lines, the volume on x."""
    return table.assign(strategy=table["recovery_rule"])


READINGS["backpressure_recovery_rules"] = model(
    "backpressure_recovery_rules",
    "total_mb",
    [
        Metric("completion_time_s", "completion time, simulated s (migration)"),
        Metric("latency_p99_s", "latency p99, simulated s"),
        Metric("recoveries", "recoveries (count)"),
    ],
    [
        (
            "completion_time_s",
            "the paper's step 5 (`any_listed`) completes no later than `all_listed`",
            not_worse("any_listed", "all_listed"),
        ),
        (
            "completion_time_s",
            "`any_listed` completes no later than `per_node`",
            not_worse("any_listed", "per_node"),
        ),
    ],
    prepare=_recovery_rows,
    note=BACKPRESSURE_SEEDS,
)
READINGS["001-6-7"] = Reading(
    "paper001-fig6-7.csv",
    "n_nodes",
    (
        Metric("capacity_tuples_per_s", "capacity, k tuples/s (everything charged)", 1e3, HIGHER),
        Metric("cpu_s_total", "CPU over senders and nodes, s"),
    ),
    (
        (
            "capacity_tuples_per_s",
            "operator-set parallelism reaches a higher capacity than query parallelism",
            better_than("operator_set", "query_parallel"),
        ),
        (
            "capacity_tuples_per_s",
            "operator-set parallelism reaches a higher capacity than operator parallelism",
            better_than("operator_set", "operator_parallel"),
        ),
        (
            "cpu_s_total",
            "operator-set parallelism costs less CPU than query parallelism",
            better_than("operator_set", "query_parallel"),
        ),
        (
            "cpu_s_total",
            "operator-set parallelism costs less CPU than operator parallelism",
            better_than("operator_set", "operator_parallel"),
        ),
    ),
    "uv run python benchmarks/parallelization.py --figure",
    repetitions_column="repeats",
    note="The runs of a scheme share one dataset (seed 42) and differ in their timings.",
)
READINGS["overlay_load"] = model(
    "overlay_load",
    "target_load",
    [
        Metric("load_moved_total", "load moved (sum over the run)"),
        Metric("latency_s_mean", "latency, s (mean)"),
        Metric("load_fluctuation_mean", "load fluctuation D(VN(i)) (mean over hosts)"),
    ],
    [
        (
            "load_moved_total",
            "the k-ary tree + Hilbert ring moves the least load",
            best_among("ktree_hilbert", ["overlay_random", "borealis"]),
        ),
        (
            "latency_s_mean",
            "the k-ary tree + Hilbert ring has the lowest latency",
            best_among("ktree_hilbert", ["overlay_random", "borealis"]),
        ),
        (
            "load_fluctuation_mean",
            "the k-ary tree + Hilbert ring fluctuates least",
            best_among("ktree_hilbert", ["overlay_random", "borealis"]),
        ),
    ],
    note=MODEL_SEEDS,
)
AXIS.update(
    {"eps": "eps", "total_mb": "MB", "alpha": "alpha", "target_load": "load", "n_nodes": "N"}
)

READINGS_000 = [name for name in READINGS if name.startswith("000-")]

#: What a figure is made of (``.components.csv``), shown at the lowest and highest x.
COMPONENTS = (
    Metric("makespan_s_total", "node service, s"),
    Metric("route_s_total", "routing, s"),
    Metric("migration_s_total", "migration, s"),
    Metric("plan_time_ms_mean", "plan, ms"),
    Metric("imbalance_max_over_mean_mean", "imbalance"),
    Metric("migrated_tuples_total", "tuples moved"),
)


def timing_line(figure: str) -> str:
    rows = pd.read_csv(TIMINGS) if TIMINGS.exists() else pd.DataFrame(columns=["figure"])
    row = rows[rows["figure"] == figure]
    if row.empty:
        return (
            " Made before `docs/data/paper_figures.csv` recorded wall times, by an earlier "
            "executor (the table's git log says when)."
        )
    r = row.iloc[0]
    return (
        f" Made {r['made_utc']} UTC ({r['source_run']}): {int(r['runs'])} runs, "
        f"{float(r['wall_s']) / 60:.0f} min wall."
    )


def repetitions_line(reading: Reading, table: pd.DataFrame) -> str:
    reps = sorted({int(v) for v in table[reading.repetitions_column]})
    text = "/".join(str(r) for r in reps)
    if reps == [1]:
        return f"1 repetition per point: one sample, no CI. {reading.note}".strip()
    return f"{text} repetitions per point; mean [bootstrap 95% CI]. {reading.note}".strip()


def identical(reading: Reading, table: pd.DataFrame, metric: Metric) -> bool:
    """Whether every point's repetitions gave the same value of ``metric``."""
    hi, lo = f"{metric.column}_ci95_hi", f"{metric.column}_ci95_lo"
    return hi not in table or bool(np.isclose(table[hi], table[lo], rtol=1e-9, atol=0).all())


ONE_SAMPLE = (
    " (the same in every repetition: one sample, so a difference is exact for this input "
    "and is not tested across inputs)"
)


def render(name: str) -> str:
    reading = READINGS[name]
    table = pd.read_csv(FIGURES / reading.table)
    if reading.prepare is not None:
        table = reading.prepare(table)
    x = reading.x or "point"
    if reading.x is None:
        table = table.assign(point=0.0)
    lines = [
        f"Source: `docs/figures/{reading.table}` (`{reading.command}`)."
        + timing_line(name)
        + " "
        + repetitions_line(reading, table),
        "",
    ]
    series = {m.column: Series(table, x, m, reading.mean_suffix) for m in reading.metrics}
    if reading.x is None:
        names = series[reading.metrics[0].column].strategies
        lines.append("| strategy | " + " | ".join(m.words for m in reading.metrics) + " |")
        lines.append("|---|" + "---:|" * len(reading.metrics))
        for strategy in names:
            cells = [series[m.column].cell(strategy, 0.0) for m in reading.metrics]
            lines.append(f"| {label(strategy)} | " + " | ".join(cells) + " |")
        lines.append("")
        same = [m.words for m in reading.metrics if identical(reading, table, m)]
        if (
            same
            and len(set(table[reading.repetitions_column]))
            and table[reading.repetitions_column].max() > 1
        ):
            lines += [f"The same in every repetition: {', '.join(same)}.", ""]
    else:
        for m in reading.metrics:
            s = series[m.column]
            many = table[reading.repetitions_column].max() > 1
            lines += [
                f"{m.words}{ONE_SAMPLE if many and identical(reading, table, m) else ''}:",
                "",
            ]
            lines.append("| | " + " | ".join(x_text(x, v) for v in s.xs) + " |")
            lines.append("|---|" + "---:|" * len(s.xs))
            for strategy in s.strategies:
                cells = [s.cell(strategy, v) if (strategy, v) in s.rows else "-" for v in s.xs]
                lines.append(f"| {label(strategy)} | " + " | ".join(cells) + " |")
            lines.append("")
    if reading.claims:
        lines += [
            "The paper's claims, judged only where the CIs are apart (do not overlap; with "
            "one sample, where the values differ):",
            "",
        ]
        for column, claim, judge in reading.claims:
            lines.append(f"- {claim}: {judge(series[column])}.")
        lines.append("")
    components = FIGURES / reading.table.replace(".csv", ".components.csv")
    if reading.components and components.exists():
        parts = pd.read_csv(components)
        xs = sorted(parts[reading.x].unique())
        shown = [m for m in COMPONENTS if f"{m.column}_mean" in parts]
        lines += [
            f"What it is made of (`{components.name}`, mean over the repetitions) at the "
            f"lowest and the highest {AXIS.get(reading.x, reading.x)}:",
            "",
            f"| strategy | {AXIS.get(reading.x, reading.x)} | "
            + " | ".join(m.words for m in shown)
            + " |",
            "|---|---:|" + "---:|" * len(shown),
        ]
        for strategy in strategy_order(parts["strategy"].unique().tolist()):
            for end in (xs[0], xs[-1]):
                hit = parts[(parts["strategy"] == strategy) & (parts[reading.x] == end)]
                if hit.empty:
                    continue
                row = [fmt(float(hit[f"{m.column}_mean"].iloc[0])) for m in shown]
                lines.append(f"| `{strategy}` | {end:g} | " + " | ".join(row) + " |")
        lines.append("")
    return "\n".join(lines)


def render_timings() -> str:
    """``docs/data/paper_figures.csv`` as a table: each figure's runs and wall time, and
    paper 000's total."""
    rows = pd.read_csv(TIMINGS)
    lines = [
        "Source: `docs/data/paper_figures.csv` (written by `make paper-figures` for each "
        "figure it makes).",
        "",
        "| figure | repetitions | runs | wall, min | made (UTC) |",
        "|---|---:|---:|---:|---|",
    ]
    for _, r in rows.iterrows():
        runs = str(int(r["runs"])) if int(r["runs"]) else "-"
        lines.append(
            f"| {r['figure']} | {int(r['repetitions'])} | {runs} | "
            f"{float(r['wall_s']) / 60:.1f} | {r['made_utc']} |"
        )
    paper000 = rows[rows["figure"].str.startswith("000-")]
    lines += [
        "",
        f"Paper 000: {len(paper000)} of {len(READINGS_000)} figures recorded, "
        f"{int(paper000['runs'].sum())} runs, {paper000['wall_s'].sum() / 60:.0f} min wall "
        "in all.",
        "",
    ]
    return "\n".join(lines)


#: Blocks that are not a figure's reading.
OTHER_BLOCKS: dict[str, Callable[[], str]] = {"paper-figures-wall": render_timings}


def _rendered(name: str) -> tuple[str | None, str]:
    """The block's text, or None and why the tables cannot give it."""
    if name in OTHER_BLOCKS:
        try:
            return OTHER_BLOCKS[name]() + "\n", ""
        except (FileNotFoundError, KeyError) as exc:
            return None, f"cannot be written ({exc!r}); make paper-figures writes its table"
    reading = READINGS[name]
    try:
        return render(name) + "\n", ""
    except (FileNotFoundError, KeyError) as exc:
        return None, f"{reading.table} cannot give it ({exc!r}); re-make: {reading.command}"


def check(text: str) -> list[str]:
    """The blocks of ``text`` that differ from what the tables give (and unknown ones)."""
    problems = []
    seen = set()
    for match in BLOCK.finditer(text):
        name = match["name"]
        seen.add(name)
        if name not in READINGS and name not in OTHER_BLOCKS:
            allowed = sorted([*READINGS, *OTHER_BLOCKS])
            problems.append(f"{name}: no such reading; allowed: {allowed}")
            continue
        body, why = _rendered(name)
        source = READINGS[name].table if name in READINGS else "docs/data/paper_figures.csv"
        if body is None:
            problems.append(f"{name}: {why}")
        elif match["body"] != body:
            problems.append(f"{name}: the README's text is not what {source} gives")
    problems += [
        f"{name}: no block in the README" for name in [*READINGS, *OTHER_BLOCKS] if name not in seen
    ]
    return problems


def write(text: str) -> str:
    """``text`` with every block it can render rewritten (the others left as they are)."""

    def block(match: re.Match) -> str:
        known = match["name"] in READINGS or match["name"] in OTHER_BLOCKS
        body = _rendered(match["name"])[0] if known else None
        return match.group(1) + (body if body is not None else match["body"]) + match.group(4)

    return BLOCK.sub(block, text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the README's blocks")
    args = parser.parse_args()
    text = README.read_text(encoding="utf-8")
    if args.write:
        README.write_text(write(text), encoding="utf-8")
    problems = check(README.read_text(encoding="utf-8"))
    for problem in problems:
        print(f"README reading {problem}", file=sys.stderr)
    if problems:
        print("fix: uv run python benchmarks/readme_readings.py --write", file=sys.stderr)
        sys.exit(1)
    print(f"README readings: {len(READINGS)} blocks match their tables")


if __name__ == "__main__":
    main()
