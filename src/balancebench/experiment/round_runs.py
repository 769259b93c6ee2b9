"""A cell group's rounds read back from MLflow, and their verdicts.

Every round of a cell is an MLflow run (role ``round``, tag ``balancebench.round``) under
the cell's run (one per strategy of a ``balance_experiment`` run, one per cell of a
sweep). The steps that close a DAG run (``pipeline.compare_step``,
``sweep_pipeline.sweep_summarize_step``) and ``balancebench report`` read them here: per cell
its finished rounds' figures, the mean and Student-t interval of each over the rounds
(:func:`balancebench.core.stats.repetition_stats`), and per group the verdict of every
strategy against the baseline on the paired rounds
(:func:`balancebench.experiment.rounds.group_verdicts`, which the Spark application's own stopping
rule used).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from balancebench.core.lazy import lazy_module
from balancebench.core.metric_definitions import figure_words
from balancebench.core.stats import (
    DECIDE_POWER,
    Verdict,
    columns_over,
    resolvable_change,
    rounds_to_decide,
)
from balancebench.core.units import Unit, unit_for
from balancebench.experiment.compare import headline_metrics, logged_name
from balancebench.experiment.rounds import (
    RoundPolicy,
    choose_baseline,
    group_verdicts,
    verdict_text,
)
from balancebench.experiment.run_spec import ROUND_TAG
from balancebench.state import reaper, tracking

# Loaded on first use: the CLI reads its arguments without it (lazy.py).
pd = lazy_module("pandas")

#: The column of a cell's finished rounds in every table.
ROUNDS_FINISHED: Final[str] = "rounds_finished"


def finished_rounds(cell_run: str) -> pd.DataFrame:
    """The cell's FINISHED round runs (``mlflow.search_runs`` rows) with a ``round``
    column (from 1, as the run's name and tag), in round order."""
    children = tracking.child_runs(cell_run)
    if children.empty:
        return children.assign(round=pd.Series(dtype=int))
    done = children[children["status"] == "FINISHED"].copy()
    col = f"tags.{ROUND_TAG}"
    done = done[done[col].notna()] if col in done else done.iloc[0:0]
    done["round"] = done[col].astype(int) if len(done) else pd.Series(dtype=int)
    return done.sort_values("round", kind="stable").reset_index(drop=True)


def failed_rounds(cell_run: str) -> int:
    """How many of the cell's round runs ended FAILED or KILLED (a failed Spark run: the
    cell gets no verdict, as in its application, ``rounds.Rounds.failed``), not counting
    rounds a rerun of the application superseded (``reaper.SUPERSEDED_TAG``)."""
    children = tracking.child_runs(cell_run)
    if children.empty:
        return 0
    failed = children["status"].isin(["FAILED", "KILLED"])
    column = f"tags.{reaper.SUPERSEDED_TAG}"
    if column in children:
        failed &= children[column].ne("true")
    return int(failed.sum())


def round_figures(done: pd.DataFrame, metrics: Iterable[str]) -> dict[int, dict[str, float]]:
    """Per round, the run's value of each of ``metrics`` it logged (finite ones)."""
    headline = headline_metrics()
    out: dict[int, dict[str, float]] = {}
    for _, run in done.iterrows():
        figures = {}
        for m in metrics:
            value = run.get(f"metrics.{logged_name(m, headline)}")
            if value is not None and value == value:  # not NaN
                figures[m] = float(value)
        out[int(run["round"])] = figures
    return out


def cell_columns(rounds: Mapping[int, Mapping[str, float]], metrics: Iterable[str]) -> dict:
    """A cell's table columns: ``rounds_finished`` and per metric its ``_mean``, ``_std``,
    ``_ci95_lo``, ``_ci95_hi`` over the rounds (:func:`balancebench.core.stats.columns_over`)."""
    return {ROUNDS_FINISHED: float(len(rounds)), **columns_over(rounds.values(), metrics)}


@dataclass(frozen=True)
class VerdictRow:
    """One strategy against the baseline on one figure, as the tables print it."""

    strategy: str
    figure: str
    baseline: str
    verdict: Verdict

    @property
    def text(self) -> str:
        """The verdict in its figure's words."""
        return verdict_text(self.figure, self.verdict)

    def as_dict(self) -> dict[str, Any]:
        v = self.verdict
        row: dict[str, Any] = {
            "strategy": self.strategy,
            "figure": self.figure,
            "baseline": self.baseline,
            "rounds": v.n,
            "outcome": v.outcome.value,
            "verdict": self.text,
        }
        if v.ratio is not None:
            row.update(ratio=v.ratio.estimate, ratio_lo=v.ratio.lo, ratio_hi=v.ratio.hi)
            row["level"] = v.ratio.level
        return row


def verdict_rows(
    rounds: Mapping[str, Mapping[int, Mapping[str, float]]],
    policy: RoundPolicy,
    order: Sequence[str],
) -> list[VerdictRow]:
    """The group's verdicts once its rounds have ended, one row per (strategy, figure),
    strategies in ``order`` (the group's; those with rounds get a row), figures in the
    policy's order. None when the baseline has no finished round."""
    present = [s for s in order if rounds.get(s)]
    if len(present) < 2:  # (none at all: a run that failed before its rounds)
        return []
    baseline = choose_baseline(list(order), policy.baseline)
    if baseline not in present:
        return []
    found = group_verdicts({s: rounds[s] for s in present}, baseline, policy, exhausted=True)
    return [
        VerdictRow(s, f, baseline, found[(s, f)])
        for s in present
        for f in policy.figures
        if (s, f) in found
    ]


@dataclass(frozen=True)
class FigureBlock:
    """One headline figure's verdicts as the tables show them: the baseline, the unit its
    means print in (the baseline's prefix), and per strategy its shown mean and words."""

    figure: str
    baseline: str
    unit: Unit
    #: (strategy, its mean in ``unit`` or "-", the verdict's words or "(baseline)"),
    #: the baseline first.
    entries: list[tuple[str, str, str]]


def figure_blocks(
    rows: Sequence[VerdictRow], means: Mapping[str, Mapping[str, float]]
) -> list[FigureBlock]:
    """The verdicts grouped by figure (``means[strategy][figure]``), for every table."""
    blocks = []
    for figure in dict.fromkeys(r.figure for r in rows):
        here = [r for r in rows if r.figure == figure]
        base = here[0].baseline
        unit = unit_for(figure, means.get(base, {}).get(figure))
        said = [(base, "(baseline)"), *((r.strategy, r.text) for r in here)]
        entries = [(n, unit.shown(means.get(n, {}).get(figure)), w) for n, w in said]
        blocks.append(FigureBlock(figure, base, unit, entries))
    return blocks


def verdict_text_table(rows: Sequence[VerdictRow], means: Mapping[str, Mapping[str, float]]) -> str:
    """The verdicts as plain text, one block per figure: each strategy's mean and its
    verdict against the baseline (``means[strategy][figure]``)."""
    lines = []
    for b in figure_blocks(rows, means):
        named = f", {b.unit.name}" if b.unit.name else ""
        lines.append(f"{figure_words(b.figure)} ({b.figure}{named}), against {b.baseline}:")
        lines += [f"  {name:>12}  {mean:>8}  {words}" for name, mean, words in b.entries]
    return "\n".join(lines)


def answer_lines(rows: Sequence[VerdictRow]) -> list[str]:
    """The answer, one line per strategy in the verdicts' words: ``qmmp against hash:
    capacity 17.3% faster [8.9%, 26.4%]; node service ...`` (the figures in the policy's
    order)."""
    lines = []
    for strategy in dict.fromkeys(r.strategy for r in rows):
        mine = [r for r in rows if r.strategy == strategy]
        said = "; ".join(f"{figure_words(r.figure)} {r.text}" for r in mine)
        lines.append(f"{strategy} against {mine[0].baseline}: {said}")
    return lines


def to_decide(row: VerdictRow, max_rounds: int) -> str | None:
    """What would decide an open verdict, from its rounds: the smallest change they
    resolve, the rounds estimated to decide the change seen (``stats.rounds_to_decide``)
    and the Param that sets them. None for a decided verdict."""
    v = row.verdict
    if v.decided or v.ratio is None:
        return None
    resolves = resolvable_change(v.ratio) * 100
    head = (
        f"{row.strategy}'s {figure_words(row.figure)}: {v.n} rounds resolve a change "
        f"beyond ±{resolves:.1f}%"
    )
    needed = rounds_to_decide(v.ratio)
    seen = abs(v.change(v.ratio.estimate)) * 100
    if needed is None:
        return (
            f"{head}; the {seen:.1f}% seen is within the noise (more rounds narrow the "
            "±: four times the rounds, half the width; Param max_rounds)"
        )
    odds = round(DECIDE_POWER * 10)
    return (
        f"{head}; about {needed} rounds would decide the {seen:.1f}% seen, {odds} times "
        f"in 10: set max_rounds (now {max_rounds}) to {needed} or more"
    )


def verdict_markdown(rows: Sequence[VerdictRow], means: Mapping[str, Mapping[str, float]]) -> str:
    """The verdicts as Markdown (MLflow renders a run's description so): the answer lines
    first, then one aligned table, each figure's unit in its heading."""
    lines = [f"- {line}" for line in answer_lines(rows)]
    for b in figure_blocks(rows, means):
        named = f" ({b.unit.name})" if b.unit.name else ""
        lines += ["", f"| {figure_words(b.figure)}{named} | mean | against {b.baseline} |"]
        lines.append("|:--|--:|:--|")
        lines += [f"| {name} | {mean} | {words} |" for name, mean, words in b.entries]
    return "\n".join(lines)


@dataclass(frozen=True)
class Comparison:
    """A ``balance_experiment`` run's comparison, from its cells' rounds: per strategy its
    rounds' figures and table columns, and the verdicts."""

    rounds: dict[str, dict[int, dict[str, float]]]
    columns: dict[str, dict[str, float]]
    cell_runs: dict[str, str]
    rows: list[VerdictRow]
    #: Strategies with a failed round (no verdict), and the group's baseline.
    failed: list[str]
    baseline: str

    def means(self) -> dict[str, dict[str, float]]:
        return {
            s: {k[: -len("_mean")]: v for k, v in cols.items() if k.endswith("_mean")}
            for s, cols in self.columns.items()
        }

    def verdict_text(self) -> str:
        return verdict_text_table(self.rows, self.means())

    def verdict_markdown(self) -> str:
        return verdict_markdown(self.rows, self.means())


def experiment_comparison(
    parent: str, params: Mapping[str, Any], metrics: Iterable[str]
) -> Comparison:
    """The comparison of a ``balance_experiment`` parent run: its cell runs (one per
    strategy), their finished rounds, each figure of ``metrics`` over the rounds, and the
    verdicts on the rounds' policy (the Params' ``min_rounds``, ``max_rounds``,
    ``equivalence_margin``, ``baseline``)."""
    metrics = list(dict.fromkeys(metrics))
    cells = tracking.child_runs(parent)
    cell_runs = {
        str(r["params.strategy"]): str(r["run_id"])
        for _, r in cells.iterrows()
        if r.get("params.strategy") == r.get("params.strategy")  # not NaN
    }
    rounds = {s: round_figures(finished_rounds(run), metrics) for s, run in cell_runs.items()}
    columns = {s: cell_columns(r, metrics) for s, r in rounds.items()}
    policy = RoundPolicy.of_params(params)
    order = [s for s in params["strategies"] if s in cell_runs]
    failed = [s for s in order if failed_rounds(cell_runs[s])]
    judged = {s: r for s, r in rounds.items() if s not in failed}
    rows = verdict_rows(judged, policy, order)
    baseline = choose_baseline(order, policy.baseline) if order else ""
    return Comparison(rounds, columns, cell_runs, rows, failed, baseline)
