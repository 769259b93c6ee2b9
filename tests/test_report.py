"""The nightly sweep's report says only what the data supports (issue 28, item 5): per
figure and skew each strategy's verdict against its cell group's baseline on the paired
rounds (decided ones in bold), a warning per cell with fewer than the minimum rounds,
captions that name what the figure draws, and per cell what the regression check compared
against. Plain pandas tables; the last test runs the summarize step on the real MLflow
store (no Spark, no Airflow)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

import matplotlib.axes
import pandas as pd
import pytest

from balancebench.core.stats import Outcome, verdict
from balancebench.experiment.regression import LOWER, judge
from balancebench.experiment.report import (
    CI_DRAWN,
    CellCheck,
    cell_check,
    text_summary,
    write_report,
)
from balancebench.experiment.round_runs import VerdictRow, verdict_rows
from balancebench.experiment.rounds import RoundPolicy
from balancebench.experiment.run_spec import ROUND_TAG
from balancebench.orchestration import pipeline, sweep_pipeline
from balancebench.state import tracking

MAKESPAN, THROUGHPUT = "makespan_s_total", "throughput_tuples_per_s"
MAKESPAN_HEADING = f"node service: {MAKESPAN} (lower is better)"
THROUGHPUT_HEADING = f"delivered throughput: {THROUGHPUT} (higher is better)"


def run_url(rid: str) -> str:
    return f"http://mlflow.test/#/experiments/1/runs/{rid}"


def _group(s: float = 1.0, n: int = 8) -> str:
    return f"topk · s={s:g} · N={n}"


def _cell(strategy: str, rounds: float, s: float = 1.0, n: int = 8, **figures: tuple) -> dict:
    row = {
        "label": f"topk · {strategy} · s={s:g} · N={n}",
        "group": _group(s, n),
        "workload": "topk",
        "strategy": strategy,
        "zipf_s": s,
        "n_nodes": n,
        "tolerance": 0.1,
        "run_id": f"{strategy:0<8}{'c' * 24}",
        "rounds_finished": float(rounds),
        "regressed": False,
    }
    for metric, (mean, lo, hi) in figures.items():
        row.update(
            {
                f"{metric}_mean": mean,
                f"{metric}_std": 0.01,
                f"{metric}_ci95_lo": lo,
                f"{metric}_ci95_hi": hi,
            }
        )
    return row


def _page(
    tmp_path: Path,
    cells: pd.DataFrame,
    verdicts: Sequence[tuple[str, VerdictRow]] = (),
    checks: dict | None = None,
    regressions: Sequence[str] = (),
    least: int = 1,
) -> str:
    path = write_report(
        cells,
        list(verdicts),
        list(regressions),
        [],
        "sweep",
        run_url,
        tmp_path / "r.html",
        checks=checks,
        least=least,
    )
    return path.read_text(encoding="utf-8")


def _cells_table(page: str) -> list[str]:
    """The rows of table#cells (header first)."""
    table = re.search(r"<table id='cells'>(.*?)</table>", page, re.S)
    assert table
    return re.findall(r"<tr.*?</tr>", table.group(1), re.S)


def _caption(page: str, heading: str) -> str:
    """The figure caption of one section of the page."""
    found = re.search(
        rf"<h2>{re.escape(heading)}</h2><figure>.*?<figcaption>(.*?)</figcaption>", page, re.S
    )
    assert found, heading
    return found.group(1)


# Paired per-round figures of one cell group (s=1, N=8): mnrt's node service is clearly
# shorter than hash's and its throughput clearly lower; qmmp's node service scatters around
# hash's and its throughput is within a fraction of a percent of hash's in every round.
HASH = {MAKESPAN: [1.0, 1.02, 0.98, 1.01, 0.99], THROUGHPUT: [900, 910, 890, 905, 895]}
MNRT = {MAKESPAN: [0.8, 0.82, 0.79, 0.81, 0.80], THROUGHPUT: [700, 705, 695, 702, 698]}
QMMP = {
    MAKESPAN: [1.05, 0.97, 1.08, 0.95, 1.04],
    THROUGHPUT: [901, 909, 891, 904, 896],
}


def _rounds(figures: dict[str, list[float]]) -> dict[int, dict[str, float]]:
    n = len(next(iter(figures.values())))
    return {r: {m: float(v[r]) for m, v in figures.items()} for r in range(n)}


def _verdicts() -> tuple[list[tuple[str, VerdictRow]], dict[tuple[str, str, str], VerdictRow]]:
    """Verdicts of three cell groups: s=1, N=8 from its rounds (``verdict_rows``); s=1.4,
    N=8 and s=1, N=16 straight from ``stats.verdict``. Also by (group, strategy, figure)."""
    policy = RoundPolicy(5, 5, figures=(MAKESPAN, THROUGHPUT))
    rows = verdict_rows(
        {"hash": _rounds(HASH), "mnrt": _rounds(MNRT), "qmmp": _rounds(QMMP)},
        policy,
        ["hash", "mnrt", "qmmp"],
    )
    found = [(_group(1.0), r) for r in rows]
    base = HASH[MAKESPAN]
    # Rounds added from 3 to 5 and still open: "undecided after 5 rounds".
    open_ = verdict(base, QMMP[MAKESPAN], LOWER, looks=(3, 5), exhausted=True)
    found.append((_group(1.4), VerdictRow("mnrt", MAKESPAN, "hash", open_)))
    same = verdict(base, [1.005, 1.015, 0.985, 1.0, 0.995], LOWER)
    found.append((_group(1.4), VerdictRow("qmmp", MAKESPAN, "hash", same)))
    slower = verdict(base, [1.2, 1.23, 1.18, 1.21, 1.19], LOWER)
    found.append((_group(1.0, 16), VerdictRow("mnrt", MAKESPAN, "hash", slower)))
    return found, {(g, r.strategy, r.figure): r for g, r in found}


def test_the_verdicts_fixture_covers_every_outcome():
    _, by = _verdicts()
    outcomes = {key: r.verdict.outcome for key, r in by.items()}
    assert outcomes == {
        (_group(1.0), "mnrt", MAKESPAN): Outcome.FASTER,
        (_group(1.0), "mnrt", THROUGHPUT): Outcome.SLOWER,
        (_group(1.0), "qmmp", MAKESPAN): Outcome.UNCLEAR,
        (_group(1.0), "qmmp", THROUGHPUT): Outcome.EQUIVALENT,
        (_group(1.4), "mnrt", MAKESPAN): Outcome.UNDECIDED,
        (_group(1.4), "qmmp", MAKESPAN): Outcome.EQUIVALENT,
        (_group(1.0, 16), "mnrt", MAKESPAN): Outcome.SLOWER,
    }
    assert all(r.baseline == "hash" for r in by.values())
    assert by[(_group(1.0), "mnrt", MAKESPAN)].verdict.text().startswith("19.6% faster [")


def _verdict_cells() -> pd.DataFrame:
    figures = {MAKESPAN: (0.9, 0.85, 0.95), THROUGHPUT: (800, 790, 810)}
    return pd.DataFrame(
        [
            *[_cell(s, 5, z, **figures) for z in (1.0, 1.4) for s in ("hash", "mnrt", "qmmp")],
            *[_cell(s, 5, 1.0, 16, **figures) for s in ("hash", "mnrt")],
        ]
    )


def test_the_text_gives_each_strategys_verdict_against_the_baseline_per_figure_and_skew():
    # Given three cell groups in two sections (N=8: s=1 and s=1.4; N=16: s=1)
    verdicts, by = _verdicts()

    def said(s: float, strategy: str, figure: str = MAKESPAN, n: int = 8) -> str:
        row = by[(_group(s, n), strategy, figure)]
        return f"    s={s:g}: {strategy} vs hash: {row.verdict.text()}"

    # When the text summary is written
    text = text_summary(_verdict_cells(), verdicts, [], [])

    # Then each section lists per figure (with its good direction) each skew's verdicts,
    # in the order given, and a group's verdicts only under its own section
    assert (
        "\n".join(
            [
                "topk, N = 8: verdicts against the baseline on the paired rounds",
                f"  {MAKESPAN_HEADING}:",
                said(1.0, "mnrt"),
                said(1.0, "qmmp"),
                said(1.4, "mnrt"),
                said(1.4, "qmmp"),
                f"  {THROUGHPUT_HEADING}:",
                said(1.0, "mnrt", THROUGHPUT),
                said(1.0, "qmmp", THROUGHPUT),
                "topk, N = 16: verdicts against the baseline on the paired rounds",
                f"  {MAKESPAN_HEADING}:",
                said(1.0, "mnrt", n=16),
                "cells with fewer than 1 rounds (a run failed): 0",
            ]
        )
        in text
    )
    assert "s=1: mnrt vs hash: 19.6% faster [" in text
    assert "s=1: mnrt vs hash: 22.2% slower [" in text
    assert "s=1: qmmp vs hash: no clear difference (5 rounds) [" in text
    assert "s=1: qmmp vs hash: equivalent within ±3% [" in text
    assert "s=1.4: mnrt vs hash: undecided after 5 rounds [" in text
    assert "hash vs hash" not in text


def test_the_page_sets_decided_verdicts_in_bold_and_open_ones_plain(tmp_path):
    verdicts, by = _verdicts()

    def text(s: float, strategy: str, figure: str = MAKESPAN, n: int = 8) -> str:
        return by[(_group(s, n), strategy, figure)].verdict.text()

    page = _page(tmp_path, _verdict_cells(), verdicts)

    eight = _caption(page, "topk, N = 8")
    assert (
        f"<li>{MAKESPAN_HEADING}<ul>"
        f"\n<li>s=1: <b>mnrt</b> vs hash: {text(1.0, 'mnrt')}; "
        f"qmmp vs hash: {text(1.0, 'qmmp')}</li>"
        f"\n<li>s=1.4: mnrt vs hash: {text(1.4, 'mnrt')}; "
        f"<b>qmmp</b> vs hash: {text(1.4, 'qmmp')}</li>"
        "\n</ul></li>"
    ) in eight
    assert (
        f"<li>{THROUGHPUT_HEADING}<ul>"
        f"\n<li>s=1: <b>mnrt</b> vs hash: {text(1.0, 'mnrt', THROUGHPUT)}; "
        f"<b>qmmp</b> vs hash: {text(1.0, 'qmmp', THROUGHPUT)}</li>"
    ) in eight
    sixteen = _caption(page, "topk, N = 16")
    assert f"<li>s=1: <b>mnrt</b> vs hash: {text(1.0, 'mnrt', n=16)}</li>" in sixteen
    assert "qmmp" not in sixteen and "s=1.4" not in sixteen
    # Bold is for decided verdicts only: faster, slower, equivalent (5 of the 7).
    assert page.count("<b>") == sum(r.verdict.decided for r in by.values()) == 5
    assert "<b>qmmp</b> vs hash: no clear difference" not in page
    assert "<b>mnrt</b> vs hash: undecided" not in page


def test_a_group_without_verdicts_lists_none_and_no_bold(tmp_path):
    # A lone strategy (or a group whose baseline finished no round) has no verdict rows.
    assert verdict_rows({"hash": _rounds(HASH)}, RoundPolicy(), ["hash"]) == []
    assert verdict_rows({"mnrt": _rounds(MNRT), "hash": {}}, RoundPolicy(), ["hash", "mnrt"]) == []
    cells = pd.DataFrame([_cell("hash", 5, **{MAKESPAN: (0.3, 0.29, 0.31)})])
    text = text_summary(cells, [], [], [])
    assert text.startswith(
        "topk, N = 8: verdicts against the baseline on the paired rounds\n"
        "cells with fewer than 1 rounds"
    )
    page = _page(tmp_path, cells)
    assert "<b>" not in page and " vs " not in _caption(page, "topk, N = 8")


def test_cells_with_fewer_than_the_least_rounds_are_flagged_per_cell(tmp_path, monkeypatch):
    hollow: list[tuple[float, float]] = []
    plot = matplotlib.axes.Axes.plot

    def spy(self, *args, **kwargs):
        if kwargs.get("markerfacecolor") == "white":
            x, y = args[0], args[1]
            hollow.extend((round(float(a), 1), float(b)) for a, b in zip(x, y, strict=True))
        return plot(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", spy)
    # Given a sweep whose minimum is 5 rounds: one cell finished 3, one an unknown number
    cells = pd.DataFrame(
        [
            _cell("hash", 3, **{MAKESPAN: (0.30, 0.29, 0.31)}),
            _cell("mnrt", 5, **{MAKESPAN: (0.90, 0.88, 0.92)}),
            _cell("hash", 5, s=1.4, **{MAKESPAN: (0.30, 0.29, 0.31)}),
            _cell("mnrt", math.nan, s=1.4, **{MAKESPAN: (0.90, 0.88, 0.92)}),
        ]
    )

    text = text_summary(cells, [], [], [], least=5)
    assert (
        "cells with fewer than 5 rounds (a run failed): 2\n"
        "  topk · hash · s=1 · N=8: 3 round(s)\n"
        "  topk · mnrt · s=1.4 · N=8: ? round(s)\n"
        "regressions:"
    ) in text

    page = _page(tmp_path, cells, least=5)
    assert "2 cell(s) with fewer than 5 rounds: a run of theirs failed" in page
    rows = _cells_table(page)
    assert len(rows) == 5  # header + one per cell: nothing else in the table
    flagged = [r for r in rows if "<td class='few'>" in r]
    assert [re.findall(r">(topk[^<]*)</a>", r) for r in flagged] == [
        ["topk · hash · s=1 · N=8"],
        ["topk · mnrt · s=1.4 · N=8"],
    ]
    assert all("<span class='warn'>fewer than 5 rounds</span>" in r for r in flagged)
    assert "<td class='few'>3 <span" in flagged[0] and "<td class='few'>- <span" in flagged[1]
    assert sum("fewer than 5 rounds" in r for r in rows) == 2
    assert all(r.count("<a ") == 1 for r in rows[1:])  # one link per cell, to its run
    # The figure draws the two short cells' points hollow: hash at s=1, mnrt at s=1.4.
    assert sorted(hollow) == [(1.0, 0.30), (1.4, 0.90)]
    assert "hollow markers: fewer than 5 rounds" in page

    # With the least at 3 only the unknown count is short.
    assert "cells with fewer than 3 rounds (a run failed): 1\n" in text_summary(
        cells, [], [], [], least=3
    )


@pytest.mark.parametrize(("rounds", "shown"), [(math.nan, "?"), (0.0, "0")])
def test_an_unknown_or_zero_round_count_is_flagged_even_at_the_least_of_one(rounds, shown):
    cells = pd.DataFrame(
        [
            _cell("hash", 1, **{MAKESPAN: (0.30, math.nan, math.nan)}),
            _cell("mnrt", rounds, **{MAKESPAN: (math.nan, math.nan, math.nan)}),
        ]
    )
    text = text_summary(cells, [], [], [])
    assert (
        f"cells with fewer than 1 rounds (a run failed): 1\n  topk · mnrt · s=1 · N=8: "
        f"{shown} round(s)\n"
    ) in text


def test_the_regression_check_shows_its_baseline_and_the_runs_it_compared_against(tmp_path):
    earlier = [f"{i:02d}abcdef{'e' * 24}" for i in range(5)]
    history = pd.DataFrame(
        {"run_id": earlier, f"metrics.{MAKESPAN}": [0.30, 0.31, 0.29, 0.30, 0.305]}
    )
    judged = judge(MAKESPAN, history[f"metrics.{MAKESPAN}"].tolist(), 0.45, LOWER)
    assert judged.regressed and judged.history_runs == 5
    cells = pd.DataFrame(
        [
            {**_cell("hash", 5, **{MAKESPAN: (0.45, 0.44, 0.46)}), "regressed": True},
            _cell("mnrt", 5, **{MAKESPAN: (0.40, 0.38, 0.42)}),
        ]
    )
    checks = {
        cells.loc[0, "label"]: cell_check([judged], history),
        cells.loc[1, "label"]: cell_check(
            [judge(MAKESPAN, [], 0.40, LOWER)], pd.DataFrame(columns=["run_id"])
        ),
    }
    regressions = [f"{cells.loc[0, 'label']}: {judged.text()}"]
    page = _page(tmp_path, cells, checks=checks, regressions=regressions)
    check = re.search(r"<table id='history'>(.*?)</table>", page, re.S)
    assert check
    hash_row = next(r for r in re.findall(r"<tr.*?</tr>", check.group(1), re.S) if "hash" in r)
    assert f"<td>{judged.baseline:.4g}</td>" in hash_row  # the baseline it used
    assert f"<td>{judged.threshold:.1%}</td>" in hash_row
    assert "<td>5</td>" in hash_row  # earlier runs
    for rid in earlier[-3:]:  # the last three, short ids linked to their MLflow runs
        assert f"<a href='{run_url(rid)}'>{rid[:8]}</a>" in hash_row
    assert earlier[1][:8] not in page
    assert "regressed" in hash_row
    assert "no history yet" in page
    assert (
        "1 regressed figure(s): 1 of 2 cell(s) checked against earlier runs (5 each); "
        "1 with no history yet"
    ) in page
    assert "<tr class='regressed'><td><a" in page  # the regressed cell in table#cells
    text = text_summary(cells, [], regressions, [], checks)
    assert "regressions: 1 regressed figure(s); 1 of 2 cell(s) checked" in text
    assert f"\n  {regressions[0]}\n" in text
    assert (
        "  topk · hash · s=1 · N=8: checked against 5 earlier run(s) (last: "
        f"{', '.join(r[:8] for r in earlier[-3:])}); 1 figure(s): REGRESSED: {MAKESPAN}"
    ) in text
    assert "  topk · mnrt · s=1 · N=8: no history yet" in text


def test_the_interval_caption_says_bars_and_the_figure_draws_bars(tmp_path, monkeypatch):
    drawn: list[str] = []
    errorbar, legend = matplotlib.axes.Axes.errorbar, matplotlib.axes.Axes.legend

    def bars(self, *args, **kwargs):
        drawn.append("bars")
        return errorbar(self, *args, **kwargs)

    def key(self, *args, **kwargs):
        drawn.append(f"legend: {kwargs.get('title')}")
        return legend(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", bars)
    monkeypatch.setattr(matplotlib.axes.Axes, "legend", key)
    for name in ("fill_between", "fill_betweenx", "fill"):
        monkeypatch.setattr(
            matplotlib.axes.Axes, name, lambda *a, **k: drawn.append("shaded") or []
        )
    cells = pd.DataFrame(
        [
            _cell("hash", 5, s=s, **{MAKESPAN: (0.3, 0.29, 0.31), THROUGHPUT: (9, 8, 10)})
            for s in (0.6, 1.0)
        ]
    )
    page = _page(tmp_path, cells)
    assert "bars" in drawn and "shaded" not in drawn
    assert "legend: bars: Student-t 95% interval" in drawn
    assert CI_DRAWN.startswith("bars: Student-t 95% interval")
    assert f"Points: mean over rounds; {CI_DRAWN};" in _caption(page, "topk, N = 8")
    assert "shaded" not in page and "bootstrap" not in page
    assert "data:image/png;base64," in page


def test_a_cell_check_without_verdicts_says_it_was_not_checked():
    check = CellCheck(0, (), {})
    assert check.text() == "not checked (no finished round tonight)"


def test_names_ids_and_titles_are_escaped(tmp_path):
    cells = pd.DataFrame(
        [
            {
                **_cell("<b>x", 5, **{MAKESPAN: (0.30, 0.29, 0.31)}),
                "label": "<script>cell</script>",
                "run_id": "r'1<",
            },
            _cell("mnrt", 5, **{MAKESPAN: (0.90, 0.88, 0.92)}),
        ]
    )
    faster = verdict([0.9, 0.91, 0.89], [0.3, 0.31, 0.29], LOWER)
    assert faster.decided
    verdicts = [(_group(), VerdictRow("<b>x", MAKESPAN, "<i>base", faster))]
    history = pd.DataFrame({"run_id": ["<i>old'run"], f"metrics.{MAKESPAN}": [0.3]})
    checks = {"<script>cell</script>": cell_check([judge(MAKESPAN, [0.3], 0.3, LOWER)], history)}
    page = _page(tmp_path, cells, verdicts, checks)
    assert "<script>" not in page and "<i>" not in page and "r'1<" not in page
    assert "&lt;script&gt;cell&lt;/script&gt;" in page
    assert f"<b>&lt;b&gt;x</b> vs &lt;i&gt;base: {faster.text()}" in page
    assert "&lt;i&gt;old&#x27;" in page


def test_the_position_check_shows_a_first_run_slower_than_the_rest():
    """Runs sharing a Spark application: the report shows each position's deviation from
    its cell's mean, so a first run paying the warm-up is visible, and the harness's own
    time per run at the first position and after it."""
    from balancebench.experiment.report import (
        CORE_WAIT_METRIC,
        HARNESS_METRIC,
        POSITION_METRIC,
        measurement_lines,
    )

    runs = pd.DataFrame(
        {
            "cell": ["a", "a", "a", "b", "b", "b"],
            "run_index": [1.0, 3.0, 5.0, 2.0, 4.0, 6.0],
            POSITION_METRIC: [1.4, 1.0, 1.0, 2.0, 2.0, 2.0],
            HARNESS_METRIC: [9.0, 1.0, 2.0, 1.5, 1.0, 2.5],
        }
    )
    position, harness = measurement_lines(runs)
    assert "1: +23.5% (1 run(s))" in position  # 1.4 against a's mean 3.4 / 3
    assert "3: -11.8% (1 run(s))" in position and "2: +0.0% (1 run(s))" in position
    assert harness == (
        "harness time per run (charged to no strategy): first run of an application "
        "median 9.00 s; later runs median 1.50 s, max 2.50 s"
    )
    # Runs that measured their tasks' wait for a core: the later runs' split of it
    waited = runs.assign(**{CORE_WAIT_METRIC: [5.0, 0.5, 0.5, 1.0, 0.25, 0.5]})
    _, split = measurement_lines(waited)
    assert split.endswith(
        "of a later run, waiting for the machine's cores median 0.50 s (a lower bound) and "
        "the harness's own work median 0.75 s"
    )  # own: 0.5, 1.5, 0.5, 0.75, 2.0 (the first run, 9 - 5, left out)
    assert measurement_lines(runs.drop(columns=["run_index"])) == []  # older runs: none
    # An application that loads two datasets in turn: positions count on each dataset
    two = runs.assign(run_index=[1.0, 3.0, 5.0, 8.0, 10.0, 12.0])
    two["dataset_run_index"] = [1.0, 3.0, 5.0, 1.0, 3.0, 5.0]
    by_dataset, _ = measurement_lines(two)
    assert "1: +11.8% (2 run(s))" in by_dataset  # (+23.5% + 0%) / 2
    assert "8:" not in by_dataset
    # Dozens of runs on one dataset (a tolerance axis shares its load): the first
    # positions one by one, the later ones pooled
    many = pd.DataFrame(
        {
            "cell": ["a"] * 30,
            "run_index": [float(i) for i in range(1, 31)],
            POSITION_METRIC: [4.0] + [1.0] * 29,
        }
    )
    (pooled,) = measurement_lines(many)
    assert "1: +263.6% (1 run(s))" in pooled  # 4 against a mean of 33 / 30
    assert "9: -9.1% (1 run(s))" in pooled and "10-30: -9.1% (21 run(s))" in pooled
    assert "11:" not in pooled


def test_the_summarize_step_reports_each_cells_history_from_the_store(local_state):
    """Two sweeps of one cell group (hash and qmmp) on the real MLflow store: the second
    one's page and text name the first sweep's round runs as each cell's history, give
    qmmp's verdict against hash on the paired rounds, and its rounds.csv has every round."""
    from balancebench.orchestration.sweep_grid import validate_sweep_params

    params = validate_sweep_params(
        {
            "experiment": "report-history",
            "grid": {
                "workloads": ["topk"],
                "strategies": ["hash", "qmmp"],
                "zipf_s": [1],
                "n_nodes": [4],
            },
            "min_rounds": 3,
            "max_rounds": 3,
            "regression_metrics": [MAKESPAN],
        }
    )
    assert "repetitions" not in params
    client = tracking.client()
    experiment = tracking.ensure_experiment("report-history")
    labels = {s: f"topk · {s} · s=1 · N=4" for s in ("hash", "qmmp")}

    def sweep(dag_run: str, makespans: dict[str, list[float]]) -> tuple[dict, dict[str, list]]:
        parent = client.create_run(
            experiment, tags={tracking.ROLE_TAG: "sweep", "airflow.run_id": dag_run}
        ).info.run_id
        rounds: dict[str, list[str]] = {}
        for strategy, values in makespans.items():
            key = f"key-{strategy}"
            cell = client.create_run(
                experiment,
                run_name=labels[strategy],
                tags={"mlflow.parentRunId": parent, sweep_pipeline.CELL_KEY_TAG: key},
            ).info.run_id
            rounds[strategy] = []
            for r, value in enumerate(values):
                run = client.create_run(
                    experiment,
                    tags={
                        "mlflow.parentRunId": cell,
                        tracking.ROLE_TAG: "round",
                        ROUND_TAG: str(r),
                        sweep_pipeline.CELL_KEY_TAG: key,
                        sweep_pipeline.SWEEP_TAG: parent,
                    },
                ).info.run_id
                client.log_metric(run, MAKESPAN, value)
                client.log_param(run, "git_commit", "abc")
                client.log_param(run, "dataset_digest", "sha256:x")
                client.set_terminated(run, "FINISHED")
                rounds[strategy].append(run)
        generated = pipeline.Generated("nightly_sweep", dag_run, parent, params, {})
        return generated.to_xcom(), rounds

    # Given a first sweep (no history yet)
    first, earlier = sweep("manual__first", {"hash": [1.0, 1.01, 0.99], "qmmp": [0.70, 0.71, 0.69]})
    assert "no history yet" in sweep_pipeline.sweep_summarize_step(first)["summary"]

    # When a second sweep of the same cells is summarized, qmmp clearly faster every round
    tonight = {"hash": [1.0, 1.02, 1.01], "qmmp": [0.70, 0.72, 0.69]}
    second, _ = sweep("manual__second", tonight)
    result = sweep_pipeline.sweep_summarize_step(second)
    summary = result["summary"]

    # Then each cell was checked against its own 3 earlier round runs
    for strategy, label in labels.items():
        line = next(x for x in summary.splitlines() if x.startswith(f"  {label}: "))
        assert line.startswith(f"  {label}: checked against 3 earlier run(s) (last: ")
        # (runs started in one ms: any order)
        assert all(r[:8] in line for r in earlier[strategy])
    assert "cells with fewer than 3 rounds (a run failed): 0" in summary
    assert re.search(r"sweep wall time: \d+\.\d min for 6 finished runs", summary)
    # and qmmp's verdict against hash on the paired rounds is in the text and the page
    expected = verdict(tonight["hash"], tonight["qmmp"], LOWER, exhausted=True)
    assert expected.outcome is Outcome.FASTER
    assert f"  {MAKESPAN_HEADING}:\n    s=1: qmmp vs hash: {expected.text()}" in summary, summary
    assert re.search(r"s=1: qmmp vs hash: \d+\.\d% faster \[", summary)
    page = Path(result["report"]).read_text(encoding="utf-8")
    assert f"<b>qmmp</b> vs hash: {expected.text()}" in page
    # and on the sweep's parent run, as a tag per cell and figure
    tags = tracking.client().get_run(second["run"]).data.tags
    assert tags[f"verdict.topk.s1.N4.qmmp.{MAKESPAN}"] == expected.text()
    for strategy in labels:
        for rid in earlier[strategy]:
            assert f"/runs/{rid}?workflowType=machine_learning'>{rid[:8]}</a>" in page
    table = pd.read_csv(Path(result["report"]).with_suffix(".csv"))
    assert table["earlier_runs"].tolist() == [3, 3]
    assert table["rounds_finished"].tolist() == [3, 3]
    # and the rounds table has one row per (cell, round) with the round's figure
    rounds_csv = Path(result["report"]).with_suffix(".rounds.csv")
    assert rounds_csv.exists()
    per_round = pd.read_csv(rounds_csv)
    assert len(per_round) == 6
    got = {(s, r): v for s, r, v in per_round[["strategy", "round", MAKESPAN]].itertuples(False)}
    assert got == {(s, r): v for s, vs in tonight.items() for r, v in enumerate(vs)}
    assert set(per_round["group"]) == {"topk · s=1 · N=4"}
    assert per_round["min_rounds"].eq(3).all() and per_round["max_rounds"].eq(3).all()
