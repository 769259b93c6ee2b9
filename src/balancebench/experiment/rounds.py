"""Paired, rotated rounds: the one loop that measures strategies side by side.

A **cell group** is the strategies that run on the same loaded data (a sweep's cells that
differ only in the strategy; the default run's strategies). A **round** runs every one of
them once, round ``r`` starting at strategy ``r mod k`` (:func:`rotated_rounds`): the
first run of a round pays what a run after another strategy's leaves behind, and the
rotation spreads that over the strategies. After each round from ``min_rounds`` on, every
verdict figure of every strategy is judged against the group's baseline
(:func:`balancebench.core.stats.verdict` on the paired per-round values); rounds are added
until every verdict is decided (faster, slower, or equivalent within the margin), or
``max_rounds`` or the group's time budget is reached (then "undecided after n rounds").

Every runner of rounds uses :func:`run_rounds`: the Spark application of a DAG run or a
sweep (``experiment.run_groups``), and the side-by-side benchmarks
(``experiment.LoadedCell.side_by_side``). This module imports neither Spark nor MLflow.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from balancebench.core.metric_definitions import VERDICT_FIGURES, figure_words
from balancebench.core.stats import DEFAULT_MARGIN, Outcome, Verdict, look_schedule, verdict
from balancebench.experiment.regression import DIRECTIONS

#: The Param value that picks the baseline by rule (:func:`choose_baseline`).
AUTO: Final[str] = "auto"


#: A count's verdicts say fewer/more, not faster/slower (a tuple count has no speed).
COUNT_WORDS: Final[tuple[str, str]] = ("fewer", "more")
#: The figures that are counts.
COUNT_FIGURES: Final[frozenset[str]] = frozenset(
    {"avg_received_tuples_per_node_total", "nodes_used_max"}
)


def headline_text(summary: Mapping[str, float]) -> str:
    """A run's headline figures in words and units (``capacity 10.6 M tuples/s, node
    service 269 ms, ...``): what a log line says of a finished run."""
    from balancebench.core.units import quantity

    return ", ".join(
        f"{figure_words(f)} {quantity(f, summary[f])}" for f in VERDICT_FIGURES if f in summary
    )


def verdict_text(figure: str, found: Verdict) -> str:
    """``found`` in the words its figure takes (fewer/more for a count)."""
    return found.text(COUNT_WORDS) if figure in COUNT_FIGURES else found.text()


def rotated_rounds(names: Sequence[str], rounds: int, first: int = 0) -> Iterator[str]:
    """Every name once per round, rounds ``first`` .. ``first + rounds - 1``, round ``r``
    starting at name ``r mod len(names)``."""
    for r in range(first, first + rounds):
        start = r % len(names)
        yield from [*names[start:], *names[:start]]


def choose_baseline(names: Sequence[str], wanted: str = AUTO) -> str:
    """The group's baseline: ``wanted``, or with ``auto`` hash when the group has it,
    else its first strategy in the registry's order (whatever order ``names`` come in)."""
    if wanted != AUTO:
        if wanted not in names:
            raise ValueError(
                f"baseline: {wanted!r} is not among {list(names)}; allowed: one of them or {AUTO!r}"
            )
        return wanted
    if "hash" in names:
        return "hash"
    from balancebench.strategies import STRATEGIES

    known = [s for s in STRATEGIES if s in names]
    return known[0] if known else names[0]


@dataclass(frozen=True)
class RoundPolicy:
    """How many rounds a group runs: at least ``min_rounds``; more, up to ``max_rounds``,
    while a verdict on ``figures`` is open and the group's ``budget_s`` (wall seconds from
    its first round) allows another round as long as the last one."""

    min_rounds: int = 5
    max_rounds: int = 5
    margin: float = DEFAULT_MARGIN
    figures: tuple[str, ...] = VERDICT_FIGURES
    budget_s: float = math.inf
    baseline: str = AUTO

    def __post_init__(self) -> None:
        if not 1 <= self.min_rounds <= self.max_rounds:
            raise ValueError(
                f"min_rounds {self.min_rounds}, max_rounds {self.max_rounds}; allowed: "
                "1 <= min_rounds <= max_rounds"
            )
        unknown = [f for f in self.figures if f not in DIRECTIONS]
        if unknown:
            raise ValueError(
                f"figures: {unknown} have no good direction; allowed: {sorted(DIRECTIONS)}"
            )

    @property
    def looks(self) -> tuple[int, int] | None:
        """The rounds after which a verdict may stop the group (None: a fixed number):
        ``stats.look_schedule``."""
        return look_schedule(self.min_rounds, self.max_rounds)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["figures"] = list(self.figures)
        out["budget_s"] = None if math.isinf(self.budget_s) else self.budget_s
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RoundPolicy:
        budget = data.get("budget_s")
        return cls(
            **{
                **data,
                "figures": tuple(data["figures"]),
                "budget_s": math.inf if budget is None else float(budget),
            }
        )

    @classmethod
    def of_params(
        cls,
        params: Mapping[str, Any],
        figures: Sequence[str] = VERDICT_FIGURES,
        budget_s: float = math.inf,
    ) -> RoundPolicy:
        """The policy the Params set (``min_rounds``, ``max_rounds``,
        ``equivalence_margin``, ``baseline``)."""
        return cls(
            int(params["min_rounds"]),
            int(params["max_rounds"]),
            float(params["equivalence_margin"]),
            tuple(dict.fromkeys(figures)),
            budget_s,
            str(params["baseline"]),
        )


def group_verdicts(
    rounds: Mapping[str, Mapping[int, Mapping[str, float]]],
    baseline: str,
    policy: RoundPolicy,
    exhausted: bool = False,
) -> dict[tuple[str, str], Verdict]:
    """Per (strategy, figure) but the baseline's: the verdict against the baseline on the
    rounds both ran (``rounds[strategy][round]``: that run's summary). ``exhausted``: the
    group will run no more rounds. Empty when the baseline has no rounds."""
    out: dict[tuple[str, str], Verdict] = {}
    base = rounds.get(baseline, {})
    for name, runs in rounds.items():
        if name == baseline:
            continue
        common = sorted(set(runs) & set(base))
        for figure in policy.figures:
            paired = [
                (float(base[r][figure]), float(runs[r][figure]))
                for r in common
                if figure in base[r] and figure in runs[r]
            ]
            if not paired:
                continue
            out[(name, figure)] = verdict(
                [b for b, _ in paired],
                [o for _, o in paired],
                DIRECTIONS[figure],
                margin=policy.margin,
                looks=policy.looks,
                exhausted=exhausted,
            )
    return out


@dataclass
class Rounds:
    """What a group's rounds measured: per strategy, one summary per round (in round
    order), and why they stopped."""

    names: list[str]
    baseline: str
    policy: RoundPolicy
    summaries: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    #: Strategies whose run failed: they run no more rounds and get no verdict.
    failed: list[str] = field(default_factory=list)
    stopped: str = ""
    wall_s: float = 0.0

    @property
    def alive(self) -> list[str]:
        return [n for n in self.names if n not in self.failed]

    @property
    def done(self) -> int:
        """Complete rounds (every strategy still running measured)."""
        return min((len(self.summaries.get(n, [])) for n in self.alive), default=0)

    def by_round(self) -> dict[str, dict[int, dict[str, float]]]:
        """Per strategy still running, its summary per complete round."""
        n = self.done
        return {name: dict(enumerate(self.summaries.get(name, [])[:n])) for name in self.alive}

    def verdicts(self) -> dict[tuple[str, str], Verdict]:
        """Per (strategy, figure) against the baseline; none once the baseline failed."""
        if self.baseline in self.failed:
            return {}
        return group_verdicts(self.by_round(), self.baseline, self.policy, bool(self.stopped))

    def open(self) -> list[tuple[str, str]]:
        """The (strategy, figure) verdicts not decided yet and that more rounds can
        decide: a figure that is 0 in some rounds only has no ratio however many rounds
        run, so it does not hold the rounds open (nor does one round, which has none)."""
        return [
            k
            for k, v in self.verdicts().items()
            if not v.decided and not (v.outcome is Outcome.NO_RATIO and v.n >= 2)
        ]


def run_rounds(
    names: Sequence[str],
    run: Callable[[str, int], dict[str, float] | None],
    policy: RoundPolicy,
    on_run: Callable[[int, str, int, dict[str, float]], None] | None = None,
    on_round: Callable[[Rounds], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Rounds:
    """``run(name, round)`` for every name, in rotated rounds, until the policy stops
    (module docstring). ``on_run(i, name, round, summary)`` after run ``i`` (from 1);
    ``on_round(rounds)`` after every complete round. A run that returns None failed: its
    strategy runs no more rounds (:attr:`Rounds.failed`) and the others go on. A run that
    raises stops the rounds."""
    names = list(names)
    rounds = Rounds(names, choose_baseline(names, policy.baseline), policy)
    rounds.summaries = {n: [] for n in names}
    started = clock()
    i = 0
    for r in range(policy.max_rounds):
        round_started = clock()
        for name in rotated_rounds(names, 1, first=r):
            if name in rounds.failed:
                continue
            summary = run(name, r)
            i += 1
            if summary is None:
                rounds.failed.append(name)
                continue
            rounds.summaries[name].append(summary)
            if on_run is not None:
                on_run(i, name, r, summary)
        now = clock()
        rounds.wall_s = now - started
        last = now - round_started
        if not rounds.alive:
            rounds.stopped = "every strategy's run failed"
        elif len(names) > 1 and (rounds.baseline in rounds.failed or len(rounds.alive) < 2):
            rounds.stopped = "no verdict left to give (the baseline, or all but one, failed)"
        elif r + 1 >= policy.max_rounds:
            rounds.stopped = f"max_rounds ({policy.max_rounds}) reached"
        elif r + 1 >= policy.min_rounds:
            if len(rounds.alive) < 2 or not rounds.open():
                rounds.stopped = (
                    "every verdict decided" if rounds.verdicts() else "no verdict to decide"
                )
            elif rounds.wall_s + last > policy.budget_s:
                rounds.stopped = (
                    f"time budget ({policy.budget_s:.0f} s) would be passed by another round "
                    f"({rounds.wall_s:.0f} s used, the last round took {last:.0f} s)"
                )
        if on_round is not None:
            on_round(rounds)
        if rounds.stopped:
            break
    return rounds


def fixed_rounds(names: Sequence[str], rounds: int, run: Callable[[str], Any]) -> dict[str, list]:
    """``run(name)`` for every name in ``rounds`` rotated rounds, no verdicts (a benchmark
    section that measures something other than the verdict figures): each name's results,
    in the order run."""
    policy = RoundPolicy(rounds, rounds, figures=())
    return run_rounds(names, lambda name, _: run(name), policy).summaries


def verdict_lines(rounds: Rounds) -> list[str]:
    """One line per compared strategy: each figure's verdict against the baseline."""
    by: dict[str, list[str]] = {}
    for (name, figure), v in rounds.verdicts().items():
        by.setdefault(name, []).append(f"{figure_words(figure)} {verdict_text(figure, v)}")
    return [f"{name} vs {rounds.baseline}: " + "; ".join(parts) for name, parts in by.items()]
