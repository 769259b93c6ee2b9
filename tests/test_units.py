"""A figure prints in its unit as a person reads it (issue 60): the unit from the metric's
name, one prefix per row, no e-notation, no negative end for a figure that cannot be
negative; and an open verdict says what would decide it."""

from __future__ import annotations

import math

import pytest

from balancebench.core.stats import LOWER, verdict
from balancebench.core.units import interval, quantity, spread, unit_for
from balancebench.experiment.round_runs import VerdictRow, answer_lines, to_decide


@pytest.mark.parametrize(
    "metric, value, shown",
    [
        ("capacity_tuples_per_s", 1.0606e7, "10.6 M tuples/s"),
        ("throughput_tuples_per_s", 741_300.0, "741 k tuples/s"),
        ("makespan_s_total", 0.3668, "367 ms"),
        ("makespan_s_total", 12.34, "12.3 s"),
        ("plan_time_ms_mean", 0.2294, "229 µs"),
        ("plan_time_ms_mean", 1755.0, "1.75 s"),
        ("latency_p99_s", 1.074, "1.07 s"),
        ("migration_bytes_total", 3_250_000.0, "3.25 MB"),
        ("state_tuples_max_node_max", 346_300.0, "346 k"),
        ("routing_table_entries_max", 5.0, "5"),
        ("imbalance_max_over_mean_mean", 2.0734, "2.07"),
        ("oracle_passed", 1.0, "yes"),
        ("migrated_tuples_total", 0.0, "0"),
    ],
)
def test_a_value_prints_in_its_unit(metric, value, shown):
    assert quantity(metric, value) == shown


def test_a_row_shares_one_prefix_and_no_number_prints_in_e_notation():
    unit = unit_for("capacity_tuples_per_s", 9.071e6)
    assert interval("capacity_tuples_per_s", 1.061e7, 9.914e6, 1.13e7, unit) == (
        "10.6 [9.91, 11.3]"
    )
    for value in (1.234e-7, 3.2e12, 98_765_432.1):
        assert "e" not in quantity("result_rows_total", value).replace("µ", "")


def test_an_interval_below_zero_of_a_positive_figure_says_n_is_too_small():
    # N = 64 printed "0.658 [-0.4486, 1.764]" for a routing time.
    assert interval("route_s_total", 0.658, -0.4486, 1.764) == "658 ms (n too small)"
    unit = unit_for("route_s_total", 0.658)
    assert spread("route_s_total", 0.658, -0.4486, 1.764, unit) == "658 (n too small)"
    assert spread("route_s_total", 0.658, 0.6, 0.716, unit) == "658 ±9%"


def _row(strategy: str, figure: str, base: list[float], other: list[float]) -> VerdictRow:
    return VerdictRow(strategy, figure, "hash", verdict(base, other, LOWER, exhausted=True))


def test_the_answer_is_one_line_per_strategy_and_an_open_verdict_says_what_decides_it():
    base = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0]
    faster = [0.7, 0.78, 0.64, 0.74, 0.66, 0.7]
    noisy = [1.1, 0.95, 1.0, 1.2, 0.85, 1.06]
    rows = [
        _row("qmmp", "makespan_s_total", base, faster),
        _row("qmmp", "route_s_total", base, noisy),
        _row("mnrt", "makespan_s_total", base, faster),
    ]
    lines = answer_lines(rows)
    assert len(lines) == 2
    assert lines[0].startswith("qmmp against hash: node service ")
    assert "faster [" in lines[0] and "; routing " in lines[0]
    assert to_decide(rows[0], 6) is None  # decided
    hint = to_decide(rows[1], 6)
    assert hint is not None
    assert hint.startswith("qmmp's routing: 6 rounds resolve a change beyond ±")
    assert "max_rounds" in hint
    resolves = float(hint.split("±")[1].split("%")[0])
    ratio = rows[1].verdict.ratio
    assert ratio is not None
    assert resolves == pytest.approx(
        (math.exp((math.log(ratio.hi) - math.log(ratio.lo)) / 2) - 1) * 100, abs=0.05
    )


def test_the_answer_figure_draws_every_verdict_right_is_better(tmp_path):
    """The parent run's forest plot: one panel per headline figure, each strategy's signed
    change (right is better: node service 30% lower is +30%), open verdicts hollow."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from balancebench.experiment.compare import verdict_figure

    base = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0]
    rows = [
        _row("qmmp", "makespan_s_total", base, [0.7, 0.78, 0.64, 0.74, 0.66, 0.7]),
        _row("qmmp", "route_s_total", base, [1.1, 0.95, 1.0, 1.2, 0.85, 1.06]),
    ]
    captured = {}
    real_close = plt.close
    plt.close = lambda fig: captured.setdefault("fig", fig)  # keep it to read back
    try:
        path = verdict_figure(rows, tmp_path / "comparison.png", "t", 0.03)
    finally:
        plt.close = real_close
    assert path.stat().st_size > 0
    panels = [ax for ax in captured["fig"].axes if ax.get_title(loc="left")]
    assert [ax.get_title(loc="left") for ax in panels] == ["node service", "routing"]
    points = [[ln for ln in ax.lines if ln.get_marker() == "o"][0] for ax in panels]
    assert points[0].get_xdata()[0] == pytest.approx(30, abs=1)  # 30% less time: +30%
    assert points[0].get_markerfacecolor() != "white"  # decided: filled
    assert points[1].get_markerfacecolor() == "white"  # open: hollow


def test_the_mlflow_description_leads_with_the_answer_then_one_table_per_figure():
    from balancebench.experiment.round_runs import verdict_markdown

    base = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0]
    rows = [_row("qmmp", "makespan_s_total", base, [0.7, 0.78, 0.64, 0.74, 0.66, 0.7])]
    text = verdict_markdown(rows, {"hash": {"makespan_s_total": 1.0}, "qmmp": {}})
    lines = text.splitlines()
    assert lines[0].startswith("- qmmp against hash: node service ") and "faster" in lines[0]
    assert "| node service (s) | mean | against hash |" in lines
    assert "| hash | 1 | (baseline) |" in lines
    assert any(line.startswith("| qmmp | - | ") for line in lines)  # no mean: a dash


def test_two_runs_of_one_conf_are_named_apart_where_the_runs_table_cuts_names():
    from balancebench.state.tracking import run_label

    what = "topk · hash, qmmp, mnrt · s=1.2 · N=8"
    first = run_label("manual__2026-12-02T11:16:20.123456+00:00", what)
    second = run_label("manual__2026-12-02T11:19:02.5+00:00", what)
    assert first.startswith("12-02 11:16:20 #") and first.endswith(what)
    assert first[:20] != second[:20]
    # Triggered in the same second (six manual runs at once): still apart.
    same_second = run_label("manual__2026-12-02T11:16:20.654321+00:00", what)
    assert same_second[:20] != first[:20]


def test_a_strategy_without_a_finished_round_prints_dashes_not_a_traceback():
    """A killed or failed run leaves None in its row of the comparison (the report crashed
    on float(None) in make test-faults)."""
    import numpy as np

    unit = unit_for("makespan_s_total", float("nan"))
    assert spread("makespan_s_total", None, None, None, unit) == "-"
    assert interval("makespan_s_total", None, None, None) == "-"
    assert quantity("routing_table_entries_max", np.int64(3041)) == "3.04 k"
