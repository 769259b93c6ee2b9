"""The nightly sweep's report says only what the data supports (issue 28, item 5): a
winner only where the CIs separate and every compared cell has 3 repetitions, a warning
per cell with fewer, captions that name what the figure draws, and per cell what the
regression check compared against. Plain pandas tables; the last test runs the summarize
step on the real MLflow store (no Spark, no Airflow)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import matplotlib.axes
import pandas as pd
import pytest

from balancebench import pipeline, tracking
from balancebench.regression import HIGHER, LOWER, judge
from balancebench.report import (
    CellCheck,
    cell_check,
    clear_winner,
    text_summary,
    write_report,
)

MAKESPAN, THROUGHPUT = "makespan_s_total", "throughput_tuples_per_s"


def run_url(rid: str) -> str:
    return f"http://mlflow.test/#/experiments/1/runs/{rid}"


def _cell(strategy: str, reps: float, s: float = 1.0, **figures: tuple) -> dict:
    row = {
        "label": f"topk · {strategy} · s={s:g} · N=8",
        "workload": "topk",
        "strategy": strategy,
        "zipf_s": s,
        "n_nodes": 8,
        "tolerance": 0.1,
        "run_id": f"{strategy:0<8}{'c' * 24}",
        "repetitions_finished": float(reps),
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


def _page(tmp_path: Path, cells: pd.DataFrame, checks: dict | None = None, **kw) -> str:
    extra = {} if checks is None else {"checks": checks}
    path = write_report(
        cells, kw.get("regressions", []), [], "sweep", run_url, tmp_path / "r.html", **extra
    )
    return path.read_text(encoding="utf-8")


def _cells_table(page: str) -> list[str]:
    """The rows of table#cells (header first)."""
    table = re.search(r"<table id='cells'>(.*?)</table>", page, re.S)
    assert table
    return re.findall(r"<tr.*?</tr>", table.group(1), re.S)


def test_overlapping_cis_name_no_winner_in_the_page_or_the_text(tmp_path):
    cells = pd.DataFrame(
        [
            _cell("hash", 3, **{MAKESPAN: (0.336, 0.316, 0.355)}),
            _cell("mnrt", 3, **{MAKESPAN: (0.354, 0.323, 0.386)}),
        ]
    )
    said = (
        "no clear winner (CIs overlap: best hash 0.336 [0.316, 0.355] vs mnrt 0.354 [0.323, 0.386])"
    )
    text = text_summary(cells, [], [])
    assert f"s=1: {said}" in text
    assert "winner hash" not in text and "winner mnrt" not in text
    page = _page(tmp_path, cells)
    assert said in page
    assert "<b>" not in page  # no name is set in bold as a winner


def test_separated_cis_with_three_repetitions_name_the_winner_in_its_direction(tmp_path):
    cells = pd.DataFrame(
        [
            _cell("hash", 3, **{MAKESPAN: (0.30, 0.29, 0.31), THROUGHPUT: (900, 880, 920)}),
            _cell("mnrt", 3, **{MAKESPAN: (0.40, 0.38, 0.42), THROUGHPUT: (1200, 1150, 1250)}),
        ]
    )
    text = text_summary(cells, [], [])
    # Lower is better for the makespan, higher for the throughput (regression.TIMED).
    assert (
        f"  {MAKESPAN} (lower is better):\n    s=1: winner hash 0.3 [0.29, 0.31]; its CI is "
        "clear of the runner-up mnrt 0.4 [0.38, 0.42]"
    ) in text
    assert f"  {THROUGHPUT} (higher is better):\n    s=1: winner mnrt 1200 [1150, 1250]" in text
    assert "no clear winner" not in text and "no winner named" not in text
    page = _page(tmp_path, cells)
    assert "winner <b>hash</b> 0.3 [0.29, 0.31]" in page
    assert "winner <b>mnrt</b> 1200 [1150, 1250]" in page


def test_clear_winner_wants_the_best_ci_clear_of_every_other():
    rows = pd.DataFrame(
        [
            _cell("hash", 3, **{MAKESPAN: (0.30, 0.29, 0.31)}),
            _cell("qmmp", 3, **{MAKESPAN: (0.40, 0.38, 0.42)}),
            # Behind the runner-up on its mean, but its wide CI reaches the best one's.
            _cell("mnrt", 3, **{MAKESPAN: (0.45, 0.20, 0.70)}),
        ]
    )
    won = clear_winner(rows, MAKESPAN)
    assert won.strategy is None and won.direction == LOWER
    assert won.text() == (
        "no clear winner (CIs overlap: best hash 0.3 [0.29, 0.31] vs mnrt 0.45 [0.2, 0.7])"
    )
    assert clear_winner(rows.iloc[:2], MAKESPAN).strategy == "hash"
    # The direction decides who is best: read the other way, qmmp is clear of hash but
    # not of mnrt.
    assert clear_winner(rows, MAKESPAN, HIGHER).strategy is None
    assert clear_winner(rows.iloc[:2], MAKESPAN, HIGHER).strategy == "qmmp"
    # Touching CIs overlap.
    touching = rows.iloc[:2].assign(**{f"{MAKESPAN}_ci95_hi": [0.38, 0.42]})
    assert clear_winner(touching, MAKESPAN).strategy is None


def test_fewer_than_three_repetitions_name_no_winner_and_are_flagged_per_cell(tmp_path):
    cells = pd.DataFrame(
        [
            # CIs far apart: only the repetition count stops the winner.
            _cell("hash", 2, **{MAKESPAN: (0.30, 0.29, 0.31)}),
            _cell("mnrt", 3, **{MAKESPAN: (0.90, 0.88, 0.92)}),
            _cell("hash", 3, s=1.4, **{MAKESPAN: (0.30, 0.29, 0.31)}),
            _cell("mnrt", 3, s=1.4, **{MAKESPAN: (0.90, 0.88, 0.92)}),
        ]
    )
    text = text_summary(cells, [], [])
    assert "s=1: fewer than 3 repetitions: no winner named (hash 2)" in text
    assert "s=1.4: winner hash 0.3" in text  # the group with 3 repetitions each
    assert "cells with fewer than 3 repetitions (their CIs say little): 1" in text
    assert "  topk · hash · s=1 · N=8: 2 repetition(s)" in text
    page = _page(tmp_path, cells)
    assert "s=1: fewer than 3 repetitions: no winner named (hash 2)" in page
    rows = _cells_table(page)
    assert len(rows) == 5  # header + one per cell: nothing else in the table
    flagged = [r for r in rows if "fewer than 3 repetitions" in r]
    assert len(flagged) == 1 and "topk · hash · s=1 · N=8" in flagged[0]
    assert all(r.count("<a ") == 1 for r in rows[1:])  # one link per cell, to its run


def test_the_regression_check_shows_its_baseline_and_the_runs_it_compared_against(tmp_path):
    earlier = [f"{i:02d}abcdef{'e' * 24}" for i in range(5)]
    history = pd.DataFrame(
        {"run_id": earlier, f"metrics.{MAKESPAN}": [0.30, 0.31, 0.29, 0.30, 0.305]}
    )
    verdict = judge(MAKESPAN, history[f"metrics.{MAKESPAN}"].tolist(), 0.45, LOWER)
    assert verdict.regressed and verdict.history_runs == 5
    cells = pd.DataFrame(
        [
            {**_cell("hash", 3, **{MAKESPAN: (0.45, 0.44, 0.46)}), "regressed": True},
            _cell("mnrt", 3, **{MAKESPAN: (0.40, 0.38, 0.42)}),
        ]
    )
    checks = {
        cells.loc[0, "label"]: cell_check([verdict], history),
        cells.loc[1, "label"]: cell_check(
            [judge(MAKESPAN, [], 0.40, LOWER)], pd.DataFrame(columns=["run_id"])
        ),
    }
    regressions = [f"{cells.loc[0, 'label']}: {verdict.text()}"]
    page = _page(tmp_path, cells, checks, regressions=regressions)
    check = re.search(r"<table id='history'>(.*?)</table>", page, re.S)
    assert check
    hash_row = next(r for r in re.findall(r"<tr.*?</tr>", check.group(1), re.S) if "hash" in r)
    assert f"<td>{verdict.baseline:.4g}</td>" in hash_row  # the baseline it used
    assert f"<td>{verdict.threshold:.1%}</td>" in hash_row
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
    text = text_summary(cells, regressions, [], checks)
    assert "regressions: 1 regressed figure(s); 1 of 2 cell(s) checked" in text
    assert (
        "  topk · hash · s=1 · N=8: checked against 5 earlier run(s) (last: "
        f"{', '.join(r[:8] for r in earlier[-3:])}); 1 figure(s): REGRESSED: {MAKESPAN}"
    ) in text
    assert "  topk · mnrt · s=1 · N=8: no history yet" in text


def test_the_ci_caption_says_bars_and_the_figure_draws_bars(tmp_path, monkeypatch):
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
            _cell("hash", 3, s=s, **{MAKESPAN: (0.3, 0.29, 0.31), THROUGHPUT: (9, 8, 10)})
            for s in (0.6, 1.0)
        ]
    )
    page = _page(tmp_path, cells)
    assert "bars" in drawn and "shaded" not in drawn
    assert "legend: bars: bootstrap 95% CI" in drawn
    assert "bars: bootstrap 95% CI" in page and "shaded" not in page
    assert "data:image/png;base64," in page


def test_the_summarize_step_reports_each_cells_history_from_the_store(local_state):
    """Two sweeps of one cell on the real MLflow store: the second one's page and text
    name the first sweep's repetition runs as its history."""
    from balancebench.sweep_grid import validate_sweep_params

    params = validate_sweep_params(
        {
            "experiment": "report-history",
            "grid": {"workloads": ["topk"], "strategies": ["hash"], "zipf_s": [1], "n_nodes": [4]},
            "repetitions": 3,
            "regression_metrics": [MAKESPAN],
        }
    )
    client = tracking.client()
    experiment = tracking.ensure_experiment("report-history")
    label = "topk · hash · s=1 · N=4"

    def sweep(dag_run: str, makespans: list[float]) -> tuple[dict, list[str]]:
        parent = client.create_run(
            experiment, tags={tracking.ROLE_TAG: "sweep", "airflow.run_id": dag_run}
        ).info.run_id
        cell = client.create_run(
            experiment,
            run_name=label,
            tags={"mlflow.parentRunId": parent, pipeline.CELL_KEY_TAG: "key1"},
        ).info.run_id
        reps = []
        for value in makespans:
            rep = client.create_run(
                experiment,
                tags={
                    "mlflow.parentRunId": cell,
                    tracking.ROLE_TAG: "repetition",
                    pipeline.CELL_KEY_TAG: "key1",
                    pipeline.SWEEP_TAG: parent,
                },
            ).info.run_id
            client.log_metric(rep, MAKESPAN, value)
            client.log_param(rep, "git_commit", "abc")
            client.log_param(rep, "dataset_digest", "sha256:x")
            client.set_terminated(rep, "FINISHED")
            reps.append(rep)
        generated = pipeline.Generated("nightly_sweep", dag_run, parent, params, {})
        return generated.to_xcom(), reps

    first, _ = sweep("manual__first", [1.0, 1.01, 0.99])
    assert "no history yet" in pipeline.sweep_summarize_step(first)["summary"]
    second, _ = sweep("manual__second", [1.0, 1.02, 1.01])
    earlier = tracking.child_runs(tracking.child_runs(first["run"]).iloc[0]["run_id"])
    result = pipeline.sweep_summarize_step(second)
    line = next(x for x in result["summary"].splitlines() if x.startswith(f"  {label}: "))
    assert line.startswith(f"  {label}: checked against 3 earlier run(s) (last: ")
    assert all(r[:8] in line for r in earlier["run_id"])  # (runs started in one ms: any order)
    assert "cells with fewer than 3 repetitions (their CIs say little): 0" in result["summary"]
    assert re.search(r"sweep wall time: \d+\.\d min for \d+ finished runs", result["summary"])
    page = Path(result["report"]).read_text(encoding="utf-8")
    for rid in earlier["run_id"]:
        assert f"/runs/{rid}?workflowType=machine_learning'>{rid[:8]}</a>" in page
    table = pd.read_csv(Path(result["report"]).with_suffix(".csv"))
    assert table.loc[0, "earlier_runs"] == 3


@pytest.mark.parametrize("reps", [float("nan"), 0.0])
def test_an_unknown_or_zero_repetition_count_names_no_winner(reps):
    rows = pd.DataFrame(
        [
            _cell("hash", 3, **{MAKESPAN: (0.30, 0.29, 0.31)}),
            _cell("mnrt", 3, **{MAKESPAN: (0.90, 0.88, 0.92)}),
        ]
    ).assign(repetitions_finished=[3.0, reps])
    assert clear_winner(rows, MAKESPAN).strategy is None


def test_a_cell_check_without_verdicts_says_it_was_not_checked():
    check = CellCheck(0, (), {})
    assert check.text() == "not checked (no finished repetition tonight)"


def test_names_ids_and_titles_are_escaped(tmp_path):
    cells = pd.DataFrame(
        [
            {
                **_cell("<b>x", 3, **{MAKESPAN: (0.30, 0.29, 0.31)}),
                "label": "<script>cell</script>",
                "run_id": "r'1<",
            },
            _cell("mnrt", 3, **{MAKESPAN: (0.90, 0.88, 0.92)}),
        ]
    )
    history = pd.DataFrame({"run_id": ["<i>old'run"], f"metrics.{MAKESPAN}": [0.3]})
    checks = {"<script>cell</script>": cell_check([judge(MAKESPAN, [0.3], 0.3, LOWER)], history)}
    page = _page(tmp_path, cells, checks)
    assert "<script>" not in page and "<i>" not in page and "r'1<" not in page
    assert "&lt;script&gt;cell&lt;/script&gt;" in page
    assert "winner <b>&lt;b&gt;x</b>" in page
    assert "&lt;i&gt;old&#x27;" in page


def test_a_missing_ci_or_a_lone_strategy_names_no_winner():
    rows = pd.DataFrame(
        [
            _cell("hash", 3, **{MAKESPAN: (0.30, math.nan, math.nan)}),
            _cell("mnrt", 3, **{MAKESPAN: (0.90, 0.88, 0.92)}),
        ]
    )
    assert clear_winner(rows, MAKESPAN).text() == "no winner named: no CI"
    assert clear_winner(rows.iloc[1:], MAKESPAN).text() == (
        "no winner named: only mnrt 0.9 [0.88, 0.92] measured"
    )


def test_the_position_check_shows_a_first_run_slower_than_the_rest():
    """Runs sharing a Spark application: the report shows each position's deviation from
    its cell's mean, so a first run paying the warm-up is visible, and the harness's own
    time per run at the first position and after it."""
    from balancebench.report import (
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
