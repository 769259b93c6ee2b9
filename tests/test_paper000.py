"""Paper 000's figure presets: the grid and Params a figure fixes, and the figure and
table drawn from a sweep's per-cell summary."""

from __future__ import annotations

import pandas as pd
import pytest

from balancebench.core.metric_definitions import METRIC_DEFINITIONS
from balancebench.experiment.paper000_figures import (
    FIGURE_EXPERIMENT,
    FIGURES,
    draw_figure,
    figure_caption,
    figure_table,
    plot_figure,
)
from balancebench.orchestration.sweep_grid import cells, validate_sweep_params


def test_a_figure_fixes_its_grid_and_params_and_keeps_the_rest():
    params = validate_sweep_params({"figure": "6b", "min_rounds": 2, "window_s": 0.0})
    grid = params["grid"]
    assert grid["workloads"] == ["band"] and grid["n_nodes"] == [12]
    assert {"qmmp", "mnrt", "dynamic", "bi", "bi6"} <= set(grid["strategies"])
    assert params["window_s"] == 1.0  # the figure's (windowed), not the trigger's 0
    assert params["min_rounds"] == 2  # not fixed by the figure: the trigger's
    assert params["experiment"] == FIGURE_EXPERIMENT
    # every cell is a real one: bi6 gets its 12 nodes
    assert len(cells(grid)) == len(grid["strategies"]) * len(grid["zipf_s"])
    assert validate_sweep_params({})["grid"]["workloads"] == ["topk"]  # no figure: as given


def test_an_unknown_figure_is_named():
    with pytest.raises(ValueError, match=r"figure: unknown '9z'; allowed values: \['none', '3a'"):
        validate_sweep_params({"figure": "9z"})


def test_every_figure_is_a_valid_sweep():
    for key, fig in FIGURES.items():
        params = validate_sweep_params({"figure": key})
        for metric in fig.metrics:  # a plotted metric is a defined run metric
            assert metric in METRIC_DEFINITIONS
        assert params["grid"] == fig.grid


def test_the_figure_and_its_table_hold_every_cell(tmp_path):
    fig = FIGURES["3a"]
    rows = []
    for i, strategy in enumerate(["bi6", "hash", "mnrt"]):
        for s in (0.4, 1.5):
            value = 10.0 * (i + 1) + s
            rows.append(
                {
                    "strategy": strategy,
                    "zipf_s": s,
                    "n_nodes": 12,
                    "rounds_finished": 3.0,
                    "charged_s_total_mean": value,
                    "charged_s_total_ci95_lo": value - 1,
                    "charged_s_total_ci95_hi": value + 1,
                    "latency_p50_s_mean": 9.9,  # not a figure metric: left out of the table
                }
            )
    cells_df = pd.DataFrame(rows).sample(frac=1.0, random_state=1)  # any order in
    png = draw_figure(cells_df, fig, tmp_path, "test caption")
    assert png.name == "paper000-fig3a.png" and png.stat().st_size > 10_000
    table = pd.read_csv(png.with_suffix(".csv"))
    assert len(table) == len(figure_table(cells_df, fig)) == 6
    assert table["strategy"].tolist() == ["bi6"] * 2 + ["hash"] * 2 + ["mnrt"] * 2
    assert table["zipf_s"].tolist() == [0.4, 1.5] * 3
    assert "latency_p50_s_mean" not in table
    assert table.loc[table["strategy"] == "mnrt", "charged_s_total_mean"].tolist() == [30.4, 31.5]


def test_the_tolerance_figure_varies_the_tolerance_per_cell():
    params = validate_sweep_params({"figure": "7", "tolerance": 0.3})
    found = cells(params["grid"])
    assert sorted({c.tolerance for c in found}) == [0.02, 0.05, 0.1, 0.2, 0.4]
    assert {c.strategy for c in found} == {"qmmp", "mnrt", "readj"}
    assert found[0].label.endswith(f"· tol={found[0].tolerance:g}")
    # each cell runs at its own tolerance, not the trigger's 0.3
    from balancebench.orchestration.sweep_grid import cell_spec

    assert {cell_spec(params, c).tolerance for c in found} == {0.02, 0.05, 0.1, 0.2, 0.4}
    # without the axis, no cell carries one and the labels are unchanged
    plain = cells(validate_sweep_params({})["grid"])
    assert all(c.tolerance is None and "tol=" not in c.label for c in plain)


def _table(key: str, spread: float) -> pd.DataFrame:
    """A figure table of two strategies at the figure's x values, intervals of ``spread``."""
    fig = FIGURES[key]
    xs = [0.4, 1.5] if fig.x == "zipf_s" else [0.02, 0.4]
    rows = []
    for strategy in ("hash", "qmmp"):
        for x in xs:
            row = {"strategy": strategy, fig.x: x, "rounds_finished": 5}
            for m in fig.metrics:
                row |= {f"{m}_mean": 10.0, f"{m}_ci95_lo": 10 - spread, f"{m}_ci95_hi": 10 + spread}
            rows.append(row)
    return pd.DataFrame(rows)


def test_a_deterministic_figure_says_it_has_no_bars(tmp_path):
    # Fig. 6a counts tuples: the same in every round, so its intervals are empty
    fig = FIGURES["6a"]
    said = plot_figure(_table("6a", 0.0), fig, tmp_path / "a.png", "caption")
    assert said.endswith("no bars: the same value in every round (deterministic for this dataset)")
    said = plot_figure(_table("6a", 1.0), fig, tmp_path / "b.png", "caption")
    assert said.endswith("bars: Student-t 95% interval over the rounds")
    assert (tmp_path / "a.png").stat().st_size > 10_000


def test_a_figure_caption_names_its_rounds_wall_and_commit():
    caption = figure_caption(FIGURES["8"], "5-8", 42, 10.6, "sweep run 5be76830", "52d701efaf00")
    assert "5-8 paired rounds" in caption and "11 min wall" in caption
    assert caption.endswith("made on commit 52d701efaf")
